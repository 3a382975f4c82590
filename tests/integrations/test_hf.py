"""Hugging Face callback: importable without the framework, job name and tokens, a real transformers Trainer reporting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from spark_watchd.integrations.hf import SparkWatchdMixin, _job_from_args
from spark_watchd.throughput.ledger import read_runs
from tests.conftest import REPO, cli_env


def test_callbacks_import_without_transformers_or_lightning():
    code = textwrap.dedent(
        """
        import sys
        for name in ("transformers", "lightning", "lightning.pytorch", "pytorch_lightning"):
            sys.modules[name] = None  # makes `import name` raise ImportError
        from spark_watchd.integrations.hf import SparkWatchdCallback
        from spark_watchd.integrations.lightning import SparkWatchdLightningCallback
        import spark_watchd.integrations.reporter
        for cls in (SparkWatchdCallback, SparkWatchdLightningCallback):  # no framework class in the bases
            assert cls.__mro__[-1] is object
            assert all(c.__module__.startswith("spark_watchd.") for c in cls.__mro__[:-1]), cls.__mro__
        cb = SparkWatchdCallback(job="x", tokens_per_step=8)
        print("ok", "torch" in sys.modules, "pydantic" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr
    # The client is standard library only: no pydantic, no torch pulled into a training process.
    assert out.stdout.split() == ["ok", "False", "False"]


def test_hf_job_name_comes_from_run_name_or_output_dir():
    assert _job_from_args(SimpleNamespace(run_name="sft-r16", output_dir="/tmp/out")) == "sft-r16"
    assert _job_from_args(SimpleNamespace(run_name=None, output_dir="/data/runs/llama-8b/")) == "llama-8b"
    assert _job_from_args(SimpleNamespace(run_name="/tmp/o", output_dir="/tmp/o")) == "o"


def test_hf_tokens_fall_back_to_tokens_per_step():
    cb = SparkWatchdMixin(tokens_per_step=512)
    assert cb._tokens(SimpleNamespace(num_input_tokens_seen=0, global_step=10)) == 5120
    tracked = SimpleNamespace(include_num_input_tokens_seen="all")
    assert cb._tokens(SimpleNamespace(num_input_tokens_seen=0, global_step=0), tracked) == 0
    assert cb._tokens(SimpleNamespace(num_input_tokens_seen=777, global_step=10)) == 777
    assert SparkWatchdMixin()._tokens(SimpleNamespace(num_input_tokens_seen=0, global_step=10)) is None


@pytest.mark.slow
@pytest.mark.needs_torch
def test_real_transformers_trainer_reports_to_a_real_daemon(tmp_path, daemon):
    if os.environ.get("SPARK_WATCHD_REQUIRE_TORCH") == "1":  # .ci/run's second pass: it must run, not skip
        import torch
        import transformers
    else:
        torch = pytest.importorskip("torch")
        transformers = pytest.importorskip("transformers")
    from spark_watchd.integrations.hf import SparkWatchdCallback

    assert issubclass(SparkWatchdCallback, transformers.TrainerCallback)
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=128, n_positions=64)
    model = transformers.GPT2LMHeadModel(config)  # built from a config: nothing downloaded

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(0, 128, (16,))  # token ids made by hand: no tokenizer
            return {"input_ids": ids, "labels": ids.clone()}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "tiny-gpt2"), max_steps=5, per_device_train_batch_size=2, report_to=[],
        use_cpu=True, logging_steps=1, save_strategy="no", disable_tqdm=True, dataloader_num_workers=0,
    )  # fmt: skip
    # The README's one-liner: no include_num_input_tokens_seen, yet tokens/s must come out (issue 14.2).
    cb = SparkWatchdCallback(url=daemon.url, min_interval=0)  # job name from output_dir
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[cb])
    trainer.train()
    assert cb.reporter is None  # closed at on_train_end, which sent the end report
    ledger = daemon.state_dir / "runs.jsonl"
    runs = daemon.wait_until(
        lambda: [r for r in read_runs(ledger)[0] if r["job"] == "tiny-gpt2"],
        "the Trainer's run in the ledger",
    )
    # One run from step 0 to 5: a step that went back would have split it (a restart) in two.
    (run,) = runs
    assert (run["end_reason"], run["first_step"], run["last_step"], run["tokens"]) == (
        "end",
        0,
        5,
        5 * 2 * 16,
    )
    assert run["samples"] == 5 * 2 and run["reports"] >= 3
    assert run["mean_tokens_per_second"] > 0 and run["mean_step_seconds"] > 0


def test_hf_callback_says_once_why_tokens_are_missing_when_it_cannot_count(caplog):
    class Frozen(SimpleNamespace):
        def __setattr__(self, name, value):
            raise AttributeError(f"{name} is frozen")

    cb = SparkWatchdMixin()
    with caplog.at_level("WARNING", logger="spark_watchd.integrations.hf"):
        cb._count_tokens(Frozen(include_num_input_tokens_seen="no"))
    assert "tokens/s will be missing" in caplog.text and "frozen" in caplog.text
    chosen = SimpleNamespace(include_num_input_tokens_seen="non_padding")
    cb._count_tokens(chosen)
    assert chosen.include_num_input_tokens_seen == "non_padding"  # the user's choice is kept
