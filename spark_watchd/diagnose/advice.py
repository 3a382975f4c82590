"""G6 advice drawn from the workloads on the card: what to do with each heavy server, as it is launched.

A fixed "stop or cap the server" contradicts a card that shows the server capped: a vLLM under
`--kv-cache-memory-bytes` is capped and still holds its weights beside that budget, so the advice
says which flag to lower, or that a fraction cap is still too big for two tenants.
"""

from __future__ import annotations

from spark_watchd.diagnose.sizing import size_words

GIB = 1024**3

# The flag that bounds each server's share of the pool (0.5: two tenants fit), as users write it.
CAP_HOW = {
    "vllm": "vLLM --gpu-memory-utilization 0.5",
    "sglang": "SGLang --mem-fraction-static 0.5",
    "trtllm": "TensorRT-LLM --kv_cache_free_gpu_memory_fraction 0.5",
}
OLLAMA = "Ollama takes what it finds: stop it (sudo systemctl stop ollama) or set OLLAMA_KEEP_ALIVE=0 while training."
LLAMACPP = "llama.cpp takes what it finds: stop it while training, or offload fewer layers (--n-gpu-layers)."
EVICT = "One workload is pushing another's memory out of the shared pool: act now."
LADDER = (
    "Then follow the OOM ladder: drop caches between runs (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches), "
    "smaller batch / packing, bf16 LoRA before QLoRA."
)
TRAINERS = "Two trainers share the pool: run them one after the other, or shrink one (smaller batch, LoRA)."


def _server(w, held=None) -> str | None:
    """One line for a heavy server, matching how the card shows it, or None for a non-server."""
    kind = w.kind
    if kind == "ollama":
        return OLLAMA
    if kind == "llamacpp":
        return LLAMACPP
    if w.capped is None:
        return None
    foot = size_words(w, held)
    if w.capped and w.caps.get("kv_cache_memory_bytes"):
        return (
            f"{kind} is capped by {w.cap} and holds {foot}: that budget bounds only the KV cache, "
            f"the weights sit on top of it; lower the budget, or stop {kind} while training."
        )
    if w.capped:
        return f"{kind} is capped ({w.cap}) and holds {foot}: lower its cap, or stop it while training."
    how = CAP_HOW.get(kind, "its memory-fraction flag at 0.5")
    was = f" (it runs with {w.cap})" if w.cap else ""
    return f"{kind} is uncapped{was}: stop it while training, or restart it capped: {how}."


def g6_advice(heavy, evicting: bool, held=None) -> tuple[str, ...]:
    """Advice for a G6 warning (sharing) or critical (evicting): one line per heavy server, never repeated."""
    lines = [EVICT] if evicting else []
    for w in heavy:
        line = _server(w, held)
        if line and line not in lines:
            lines.append(line)
    if len(lines) == (1 if evicting else 0) and len(heavy) >= 2:  # no server: trainers crowd each other
        lines.append(TRAINERS)
    if evicting:
        lines.append(LADDER)
    return tuple(lines)
