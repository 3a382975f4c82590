"""The wedge's thresholds (issue 31): usable memory nearly gone and the engine stall, each with why it has its
value (docs/diagnosis.md, "Usable memory nearly gone" and "Engine stall").

Judged on the traces in tests/fixtures/traces/wedge/, rebuilt from owners' incident logs (domenkogler/homelab
docs/spark-incidents.md, NVIDIA/open-gpu-kernel-modules#1358, vllm-project/vllm#56824).
"""

from pydantic import ConfigDict, Field

from spark_watchd.diagnose.fabric_thresholds import FabricThresholds
from spark_watchd.sample.quantities import Bytes, Count, Delay, Seconds

GIB = 1024**3


class WedgeThresholds(FabricThresholds):
    """Mixed into Thresholds (flat keys of [thresholds]); alone, the defaults for tests and tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Usable memory (MemAvailable - CmaFree, no OS reserve taken off) nearly gone is critical whatever PSI says:
    # one owner's global OOM kill came with PSI full at 0.0 for ten samples, at MemAvailable 9.4 GiB of which
    # 8.8 GiB was CmaFree; that owner's gauge (MemAvailable - CmaFree, critical under 4 GiB) fired 3.5 minutes
    # before the kill. A vLLM at 0.94 sits at 1.5-1.9 GiB for weeks: the level alone is not enough, the
    # usable memory must still be falling inside the thin spell, or be nearly nothing (docs/diagnosis.md,
    # "Usable memory nearly gone").
    usable_critical_bytes: Bytes = Field(
        4 * GIB,
        description="Usable memory (MemAvailable - CmaFree, its 1 s minimum) under this is a thin spell, bytes.",
    )
    usable_critical_leave_bytes: Bytes = Field(
        5 * GIB, description="A thin spell of usable memory ends once it is back above this, bytes."
    )
    # Every owner's kill or freeze came at or under 1.6 GiB usable; a steady 0.94 vLLM sits at 1.5-1.9 GiB.
    usable_gone_bytes: Bytes = Field(
        1 * GIB, description="Usable memory at or under this in consecutive samples is nearly gone, bytes."
    )
    # The PSI-blind kill lost ~1 GiB a minute through its last 4 GiB; a settled load's plateau and the 0.94
    # vLLM's drift move ~0.1 GiB in that time.
    usable_fall_bytes: Bytes = Field(
        GIB // 2,
        description="Fall of usable memory inside a thin spell over usable_fall_window_s that is critical, bytes.",
    )
    usable_fall_window_s: Seconds = Field(
        180.0, description="Window over which a thin spell's recent fall is measured, seconds."
    )
    usable_spell_fall_bytes: Bytes = Field(
        1 * GIB,
        description="Fall of usable memory over a whole thin spell that is critical (a slow creep), bytes.",
    )
    # The PSI-blind kill's last minutes: ~0.5 GiB per 30 s sample; a load lands in one step of several GiB.
    usable_creep_step_bytes: Bytes = Field(
        GIB // 4, description="Least fall per interval that counts as a creep into a thin spell, bytes."
    )
    usable_critical_samples: Count = Field(
        2,
        description="Consecutive thin samples before usable memory counts as nearly gone (no one-second dip).",
    )

    # ---- engine stall --------------------------------------------------------------------------
    # open-gpu-kernel-modules#1358: vLLM's logged prompt throughput (a 10 s average) read 0.0 with the request
    # still running before every instrumented wedge; a chunked prefill moves the prompt counter every chunk
    # (~1-2 s at 8192 tokens on GB10), so two scrapes 10 s or more apart with neither counter moving is a stall.
    engine_stall_min_s: Delay = Field(
        10.0,
        description="Requests running and no prompt or generation progress this long (two scrapes at least) "
        "is an engine stall, seconds.",
    )
