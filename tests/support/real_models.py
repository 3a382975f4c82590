"""Tiny random-weight models for the real-server tests, made on the spot: nothing is loaded from a hub.

Run with the interpreter that has the server's packages (vLLM's venv has transformers and tokenizers):

    python tests/support/real_models.py hf DIR     # a llama checkpoint vLLM loads (safetensors, bf16)
    python tests/support/real_models.py gguf FILE  # the same shape as a GGUF llama-server loads (needs gguf)

The model's words are random: tests ask for `ignore_eos` so each request generates exactly max_tokens.
"""

from __future__ import annotations

import sys
from pathlib import Path

WORDS = [f"w{i}" for i in range(400)]
SHAPE = dict(
    hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2
)


def _tokenizer(out: Path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{w: i + 3 for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(out)
    return len(vocab)


def make_hf(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    n = _tokenizer(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=n, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2, **SHAPE)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)


def make_gguf(out: Path) -> None:
    """A llama GGUF (f32 tensors, a word-level SPM-style vocabulary) of the same shape."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(0)
    h, ff, layers, heads = (
        SHAPE["hidden_size"],
        SHAPE["intermediate_size"],
        SHAPE["num_hidden_layers"],
        SHAPE["num_attention_heads"],
    )
    # A SentencePiece-style vocabulary llama.cpp's tokenizer can reach: byte fallbacks, the pieces of each
    # word ("\u2581", "w", digits) and every prefix of it (each a word itself: w1, w12, w123), then the words.
    pieces = ["\u2581", "w", *"0123456789", "\u2581w"]
    tokens = [
        "<unk>",
        "<s>",
        "</s>",
        *(f"<0x{b:02X}>" for b in range(256)),
        *pieces,
        *(f"\u2581{w}" for w in WORDS),
    ]
    types = [2, 3, 3, *([6] * 256), *([1] * (len(tokens) - 259))]
    scores = [0.0] * 259 + [float(-len(t)) for t in pieces] + [float(i) for i in range(len(WORDS))]
    n = len(tokens)
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(65536)
    w.add_embedding_length(h)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(h // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def t(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    t("token_embd.weight", n, h)
    w.add_tensor("output_norm.weight", np.ones(h, dtype=np.float32))
    t("output.weight", n, h)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(h, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(h, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            t(f"blk.{i}.{name}.weight", h, h)
        t(f"blk.{i}.ffn_gate.weight", ff, h)
        t(f"blk.{i}.ffn_up.weight", ff, h)
        t(f"blk.{i}.ffn_down.weight", h, ff)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    what, dest = sys.argv[1], Path(sys.argv[2])
    {"hf": make_hf, "gguf": make_gguf}[what](dest)
