"""The UMA worksheet: how much of the Spark's one memory pool a training job needs (pure arithmetic).

Figures are GiB (2^30 bytes) like every other spark-watchd output; the community's worksheet says
decimal GB ("70B QLoRA: 70e9 x 0.5 B = 35 GB of weights" is 32.6 GiB).
Every term is a documented estimate, not a measurement: compare against the anchors and leave
head-room. No I/O here; `commands/plan.py` reads today's budget and prints.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

GB = 1e9  # the community's reported peaks are decimal GB
GIB = 2**30
BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "int8": 1.0, "nf4": 0.5, "fp4": 0.5, "nvfp4": 0.5}
# Optimizer state per trainable parameter: AdamW keeps two fp32 moments (8 B); bitsandbytes 8-bit
# AdamW two 8-bit moments (~2 B); SGD with momentum one fp32 buffer (4 B).
OPTIMIZER_BYTES = {"adamw": 8.0, "adamw8bit": 2.0, "sgd": 4.0}
METHODS = ("full", "lora", "qlora")
DEFAULT_WEIGHT_DTYPE = {"full": "bf16", "lora": "bf16", "qlora": "nf4"}

# Architecture heuristic for a dense decoder (Llama-like): params ~= 12 * layers * hidden^2 and
# hidden / layers ~= 110 (Llama-3 70B: 8192/80 = 102; 8B: 4096/32 = 128; 13B: 5120/40 = 128).
ASPECT = 110.0
# LoRA on all seven linears of a layer (q, k, v, o, gate, up, down) with GQA kv = hidden/8 and
# MLP width 3.5 x hidden (Llama-3 70B: 28672 = 3.5 x 8192): sum of (d_in + d_out) = 19.75 x hidden.
LORA_DIM_SUM_PER_LAYER = 19.75
ADAPTER_BYTES = 2.0  # adapters are trained in bf16 (QLoRA included)
# Activations per layer and token, bf16, with flash attention (Korthikanti et al. 2022, "Reducing
# Activation Recomputation in Large Transformer Models", eq. 2 without the 5as/h attention-score term).
ACT_BYTES_PER_TOKEN_HIDDEN_LAYER = 34.0
# Gradient checkpointing keeps one bf16 hidden state per layer and recomputes one layer at a time.
CHECKPOINT_BYTES_PER_TOKEN_HIDDEN_LAYER = 2.0
LOGIT_BYTES = 4.0  # logits upcast to fp32 for the loss
DEFAULT_VOCAB = 128256  # Llama-3 tokenizer
# CUDA context, cuBLAS workspaces and allocator slack on GB10 (about what an idle torch process holds).
RUNTIME_OVERHEAD_GIB = 1.0
# Below this share of the budget a plan "fits"; up to the whole budget it is "tight".
FIT_SHARE = 0.85


@dataclass(frozen=True)
class Anchor:
    """A job the community ran on a Spark, with the peak reported where one was."""

    name: str
    params: float
    method: str
    reported_gib: float | None
    source: str


# Figures from the community's field reports (docs/interfaces.md); where no peak
# was reported the anchor says so and the worksheet's own estimate is shown next to it.
ANCHORS = (
    Anchor(
        "70B QLoRA (NF4 base, bf16 adapters)",
        70e9,
        "qlora",
        40 * GB / GIB,
        "community field reports",
    ),
    Anchor("120B MoE NVFP4 LoRA", 120e9, "lora", 68 * GB / GIB, "community field reports"),
    Anchor("27B LoRA at packing 1024", 27e9, "lora", None, "community field reports; no peak given"),
    Anchor("9B full fine-tune", 9e9, "full", None, "community field reports; no peak given"),
)

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


def parse_params(text: str) -> float:
    """Parameter count from '70B', '7.5b', '500M', '1.2T' or '70e9'; ValueError names the input."""
    m = re.fullmatch(r"\s*([-+]?\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbtKMBT]?)\s*", str(text))
    if m and float(m.group(1)) <= 0:
        raise ValueError(f"parameter count {text!r} must be positive, e.g. 8B or 70B")
    if not m:
        raise ValueError(
            f"parameter count {text!r}: expected a number with an optional K/M/B/T suffix, e.g. 70B"
        )
    value = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if value < 1e6:
        raise ValueError(f"parameter count {text!r} is below a million: did you mean {text}B?")
    return value


@dataclass(frozen=True)
class Job:
    """What the operator is about to train."""

    params: float
    method: str = "qlora"
    dtype: str | None = None  # weights in memory; default per method
    compute_dtype: str = "bf16"
    optimizer: str = "adamw"
    lora_rank: int = 16
    trainable_params: float | None = None
    seq_len: int = 2048
    batch: int = 1
    packing: int | None = None  # packed sequence length; replaces seq_len when given
    gradient_checkpointing: bool = True
    vocab: int = DEFAULT_VOCAB
    checkpoint_gib: float | None = None  # on-disk checkpoint read during load; default: the weights


@dataclass(frozen=True)
class Plan:
    """The worksheet's lines, the total and the verdict against a budget."""

    job: dict
    architecture: dict
    lines: dict  # name -> GiB
    steady_gib: float
    load_peak_gib: float
    peak_gib: float
    budget_gib: float | None
    verdict: str  # fits / tight / does not fit / unknown (no budget)
    anchor: dict
    advice: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready form (`plan --json`)."""
        return asdict(self)


def architecture(params: float) -> tuple[int, int]:
    """(hidden, layers) of a dense decoder of this size, by the ASPECT heuristic."""
    hidden = (params * ASPECT / 12.0) ** (1.0 / 3.0)
    hidden = max(128, int(round(hidden / 128.0)) * 128)
    layers = max(1, int(round(params / (12.0 * hidden * hidden))))
    return hidden, layers


def lora_params(params: float, rank: int) -> float:
    """Adapter parameters: rank x (d_in + d_out) for every targeted linear in every layer."""
    hidden, layers = architecture(params)
    return float(rank) * LORA_DIM_SUM_PER_LAYER * hidden * layers


def _validate(job: Job) -> None:
    if job.method not in METHODS:
        raise ValueError(f"method {job.method!r}: expected one of {', '.join(METHODS)}")
    for name, value in (("dtype", job.dtype), ("compute dtype", job.compute_dtype)):
        if value is not None and value not in BYTES_PER_PARAM:
            raise ValueError(f"{name} {value!r}: expected one of {', '.join(BYTES_PER_PARAM)}")
    if job.optimizer not in OPTIMIZER_BYTES:
        raise ValueError(f"optimizer {job.optimizer!r}: expected one of {', '.join(OPTIMIZER_BYTES)}")
    for name, value in (("lora rank", job.lora_rank), ("seq len", job.seq_len), ("batch", job.batch)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")


def _lines(job: Job) -> tuple[str, float, int, int, int, dict[str, float]]:
    """(weights dtype, trainable params, hidden, layers, tokens per step, worksheet lines in GiB)."""
    _validate(job)
    dtype = job.dtype or DEFAULT_WEIGHT_DTYPE[job.method]
    hidden, layers = architecture(job.params)
    tokens = job.batch * (job.packing or job.seq_len)
    if job.trainable_params is not None:
        trainable = job.trainable_params
    elif job.method == "full":
        trainable = job.params
    else:
        trainable = lora_params(job.params, job.lora_rank)

    lines: dict[str, float] = {"weights": job.params * BYTES_PER_PARAM[dtype] / GIB}
    if job.method == "full":
        lines["gradients"] = trainable * BYTES_PER_PARAM[job.compute_dtype] / GIB
    else:
        lines["lora adapters"] = trainable * ADAPTER_BYTES / GIB
        lines["gradients"] = trainable * ADAPTER_BYTES / GIB
    lines["optimizer states"] = trainable * OPTIMIZER_BYTES[job.optimizer] / GIB
    if job.gradient_checkpointing:
        per_token = hidden * (
            layers * CHECKPOINT_BYTES_PER_TOKEN_HIDDEN_LAYER + ACT_BYTES_PER_TOKEN_HIDDEN_LAYER
        )
    else:
        per_token = hidden * layers * ACT_BYTES_PER_TOKEN_HIDDEN_LAYER
    lines["activations"] = tokens * per_token / GIB
    lines["logits"] = tokens * job.vocab * LOGIT_BYTES / GIB
    lines["runtime overhead"] = RUNTIME_OVERHEAD_GIB
    return dtype, trainable, hidden, layers, tokens, lines


def worksheet(job: Job, budget_gib: float | None = None, residents: list[dict] | None = None) -> Plan:
    """Fill in the worksheet for one job and judge it against the budget (GiB available to training)."""
    dtype, trainable, hidden, layers, tokens, lines = _lines(job)
    steady = sum(lines.values())
    # Loading safetensors on unified memory: the page cache holds the checkpoint while the same
    # pool holds the loaded copy, so the load peaks at about twice the checkpoint (G3 load transient).
    checkpoint = job.checkpoint_gib if job.checkpoint_gib is not None else lines["weights"]
    load_peak = lines["weights"] + checkpoint + RUNTIME_OVERHEAD_GIB
    peak = max(steady, load_peak)

    # The steady state decides; the load transient's page-cache half is reclaimable, so a transient
    # over budget only makes a plan tight (drop caches before loading), never "does not fit".
    if budget_gib is None:
        verdict = "unknown"
    elif steady > budget_gib:
        verdict = "does not fit"
    elif steady > FIT_SHARE * budget_gib or load_peak > budget_gib:
        verdict = "tight"
    else:
        verdict = "fits"
    anchor = nearest_anchor(job.params, job.method)
    job_d = asdict(job)
    job_d["dtype"] = dtype
    job_d["trainable_params"] = trainable
    return Plan(
        job=job_d,
        architecture={"hidden": hidden, "layers": layers, "tokens_per_step": tokens},
        lines={k: round(v, 3) for k, v in lines.items()},
        steady_gib=round(steady, 3),
        load_peak_gib=round(load_peak, 3),
        peak_gib=round(peak, 3),
        budget_gib=None if budget_gib is None else round(budget_gib, 3),
        verdict=verdict,
        anchor={**asdict(anchor), "worksheet_gib": round(sum(_lines(anchor_job(anchor))[5].values()), 3)},
        advice=oom_ladder(job, dtype, residents) if verdict in ("tight", "does not fit") else [],
    )


def anchor_job(anchor: Anchor) -> Job:
    """The anchor as a worksheet job at default settings."""
    return Job(
        params=anchor.params,
        method=anchor.method,
        dtype="nvfp4" if "NVFP4" in anchor.name else None,
        packing=1024 if "packing 1024" in anchor.name else None,
    )


def nearest_anchor(params: float, method: str) -> Anchor:
    """The same-method anchor closest in size (log scale); any method only when none shares it.

    An 8B QLoRA compared with a 9B full fine-tune says nothing: the method moves memory far more than size.
    """
    same = [a for a in ANCHORS if a.method == method] or list(ANCHORS)
    return min(same, key=lambda a: abs(math.log(params / a.params)))


def oom_ladder(job: Job, dtype: str, residents: list[dict] | None = None) -> list[str]:
    """The OOM ladder, cheapest rung first, skipping rungs the job already stands on.

    `residents`: the GPU users found now (preflight's workload scan); [] drops the "stop other GPU
    residents" rung, None (not scanned) keeps it in general terms.
    """
    rungs = [
        "Drop the page cache between runs (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches): cached "
        "safetensors count as available but GB10 reclaims them too slowly for cudaMalloc (G3).",
    ]
    if residents is None:
        rungs.append(
            "Stop or cap other GPU residents first: vLLM --gpu-memory-utilization, Ollama OLLAMA_KEEP_ALIVE=0 (G6)."
        )
    elif residents:
        who = ", ".join(
            f"{w.get('kind', 'other')} (pid {w.get('pid')}{', uncapped' if w.get('capped') is False else ''})"
            for w in residents[:4]
        )
        rungs.append(
            f"Stop or cap the GPU residents running now first: {who}; vLLM --gpu-memory-utilization, "
            "Ollama OLLAMA_KEEP_ALIVE=0 (G6)."
        )
    if job.batch > 1 or (job.packing or job.seq_len) > 1024:
        rungs.append(
            "Lower the micro-batch, then the packing/sequence length; raise gradient accumulation instead."
        )
    if not job.gradient_checkpointing:
        rungs.append("Turn on gradient checkpointing (activations drop from every layer to one).")
    if job.optimizer == "adamw":
        rungs.append(
            "Use 8-bit AdamW (bitsandbytes): optimizer states from 8 to about 2 bytes per trainable param."
        )
    if job.method == "full":
        rungs.append(
            "Switch from a full fine-tune to bf16 LoRA (only the adapters carry gradients and states)."
        )
    elif job.method == "lora" and BYTES_PER_PARAM[dtype] > 0.5:
        rungs.append("Switch from bf16 LoRA to QLoRA (NF4 base: 0.5 byte per parameter).")
    rungs.append("Pick a smaller model, or split the job across two Sparks.")
    return rungs
