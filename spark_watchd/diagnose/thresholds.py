"""Every threshold the classifiers use (`[thresholds]` in config.toml), each with the evidence behind it."""

from pydantic import ConfigDict, Field, model_validator

from spark_watchd.diagnose.wedge_thresholds import WedgeThresholds
from spark_watchd.sample.quantities import Bytes, Count, Delay, Level, Positive, Seconds, Share

GIB = 1024**3

# Keys that older releases accepted and nothing reads any more: a config file that still sets one loads
# (the value is dropped) rather than stopping the daemon after an upgrade. key -> why it went.
RETIRED = {
    "window_max_samples": "bounded the engine's sample window, which nothing read and which is gone (issue 11)",
}


class Thresholds(WedgeThresholds):  # + fabric_thresholds + serving_thresholds, chained
    """Classifier thresholds; windows are in seconds of sample time so 30 s and 60 s intervals behave alike."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # ---- window --------------------------------------------------------------------------------
    # Ten minutes holds 10-20 samples at the 30-60 s sampling interval: enough for the anomaly watch's
    # temperature trend (G4's power-delivery and hung-engine look-alikes), the one reader of this key.
    window_s: Seconds = Field(600.0, description="Temperature history the G4 anomaly watch keeps, seconds.")
    # A gap longer than this (daemon stopped, host asleep) restarts rates instead of averaging across it.
    max_gap_s: Seconds = Field(
        600.0, description="Longest gap between samples still used for rates, seconds."
    )

    # ---- steadiness ----------------------------------------------------------------------------
    # Every finding, once it changes severity, keeps the new one at least this long before it may fall
    # back (rising is immediate: an episode is caught at the same sample). Longer than the 30 s sampling
    # interval, so a one-sample blip is published across the next sample instead of toggling back at
    # once; shorter than two, so a collapse that is over (MemAvailable 29 -> 2.5 -> 57 GiB in 60 s samples)
    # or a 60 s load transient is not reported past its end. The per-threshold leaving levels (below) do
    # the rest of the steadying.
    min_dwell_s: Delay = Field(
        45.0, description="Least time a finding stays at a severity before it may fall, seconds."
    )

    # ---- G4 thermal ----------------------------------------------------------------------------
    # NVML slowdown threshold on GB10 is 86 C (nvidia-smi prints N/A; NVML answers it): used only when
    # the sample carries no slowdown_temp_c.
    default_slowdown_temp_c: float = Field(
        86.0, description="Slowdown threshold when NVML does not report one, C."
    )
    # GB10 shutdown threshold is 90 C per NVML; field reports of spontaneous reboots sit at 89-91 C.
    default_shutdown_temp_c: float = Field(
        90.0, description="Shutdown threshold when NVML does not report one, C."
    )
    # Field traces: thermal counters start moving ~1 C below the 86 C slowdown (85.2 C), temperature
    # hovers 86-89 C while throttled.
    slowdown_margin_c: Level = Field(
        3.0,
        description="Temperature within this of the slowdown threshold counts as 'at the threshold', C.",
    )
    # The mask reads 0 between samples while the cumulative counters move; 2% of wall time spent in a
    # thermal reason is well above counter jitter (0 on healthy GB10 traces) and below the 11-100% seen throttling.
    thermal_counter_rate_min: Level = Field(
        0.02, le=1, description="Share of time in sw/hw thermal or hw slowdown that counts as moving."
    )
    # GB10 applications clock is 2418 MHz; healthy runs wander 2300-2480 MHz, throttled ones sink to 1900-2100.
    default_applications_clock_mhz: int = Field(
        2418, description="Applications clock when NVML does not report one, MHz."
    )
    clock_drop_ratio: Share = Field(
        0.95,
        description="SM clock under this share of the applications clock counts as 'falling'.",
    )
    # "Under load": a training step keeps util at 95-100%; a lightly used GPU is not throttling anything.
    load_util_pct: Level = Field(50.0, le=100, description="GPU utilisation that counts as under load, %.")
    # GB10 is rated 240 W but sustains ~100 W (a flat 88-95 W plateau with the SW power cap bit is normal).
    power_rating_w: Positive = Field(240.0, description="Board power rating, W (GB10: 240 W).")
    sustained_power_w: Positive = Field(
        100.0, description="Power GB10 sustains under load (the ~100 W cap), W."
    )
    # Hysteresis: counters move in bursts; a throttle ends only after this long without thermal activity.
    throttle_end_quiet_s: Delay = Field(
        300.0, description="Quiet time before a throttle episode ends, seconds."
    )
    # Step time: field traces show steps 20-25% slower once clocks sink under a throttle (1.0 -> 1.2 s).
    step_slowdown_ratio: float = Field(
        1.15, gt=1, description="Recent step time over the job's baseline that counts as damage (critical)."
    )
    step_recover_ratio: float = Field(
        1.08, gt=1, description="Ratio under which a damaged (critical) throttle falls back to warning."
    )
    step_recent_s: Seconds = Field(150.0, description="Step times averaged for the recent value, seconds.")
    # Skip compile/warm-up steps, then take the median of the next ten minutes as the job's own baseline.
    baseline_warmup_s: Delay = Field(120.0, description="Job warm-up skipped before the baseline, seconds.")
    baseline_window_s: Seconds = Field(600.0, description="Span of step times forming the baseline, seconds.")
    baseline_min_points: Count = Field(3, description="Step readings needed before a baseline is trusted.")
    # A progress report older than this is a stopped job, not a slow one.
    step_stale_s: Seconds = Field(300.0, description="Age after which a job's progress is ignored, seconds.")
    # Reboot after throttle: reported when the throttle was active or ended this recently before the gap.
    reboot_after_throttle_window_s: Delay = Field(
        900.0, description="A throttle this recent before a reboot makes it a reboot after throttle, s."
    )
    reboot_critical_hold_s: Delay = Field(
        900.0, description="How long G4 stays critical after a reboot that followed a throttle, s."
    )
    # Power-delivery fault (field: clocks pinned 500-900 MHz at ~30 W and 50 C with no reason bits,
    # cured only by a full AC power cycle).
    pinned_clock_max_mhz: int = Field(900, description="SM clock at or under this counts as pinned low, MHz.")
    pinned_power_max_w: float = Field(60.0, description="Power at or under this counts as low, W.")
    cool_margin_c: float = Field(15.0, description="Cooler than slowdown minus this counts as cool, C.")
    anomaly_min_s: Delay = Field(120.0, description="A non-thermal anomaly must persist this long, seconds.")
    # Three GX10s stalled every ~30 min for 5-10 min at 94-96 % util, 15-18 W, 630-650 MHz, no reason bit, and
    # recovered alone (issue 32's field report): a stall after 2 such within 3 h recurs; a power cycle is moot.
    stall_recur_min: int = Field(2, ge=1, description="Earlier healed stalls making one recur.")
    stall_recur_window_s: Delay = Field(10800.0, description="Earlier stalls count this long, s.")
    stall_recovers_s: Delay = Field(1200.0, description="A stall healed within this recovered, s.")
    # Hung engine: utilisation pegged while power sits near idle and the die cools.
    hung_util_pct: float = Field(90.0, description="Utilisation that counts as pegged, %.")
    hung_power_max_w: float = Field(
        25.0, description="Power at or under this with pegged util counts as idle, W."
    )
    hung_temp_drop_c: float = Field(
        2.0, description="Temperature fall over the anomaly window that counts, C."
    )
    # GB10 board telemetry (spbm hwmon driver, antheas/spark_hwmon), read only when the driver is loaded.
    # tj_max_c is the firmware's headroom to Tj max; the driver README lists ~0 C at idle too, so a zero
    # counts only with the package hot (tj_max within cool_margin_c of the slowdown) and the GPU loaded.
    board_tj_headroom_c: Level = Field(
        2.0, description="Board tj_max_c headroom at or under this counts as at the Tj limit, C."
    )
    # The firmware's 100 ms PID holds the EWMA power within ~1-2% of an engaged limit: 97% is at the limit.
    board_limit_ratio: Share = Field(
        0.97,
        description="EWMA power over its pl1/syspl1 limit at or above this is 'at the limit'.",
    )
    # A loaded GB10 draws 120-140 W at the DC input on the 240 W brick; a starved input (USB-PD fallback
    # contract, failing brick) sits at 60-65 W, about the idle-plus-pinned-GPU draw.
    board_dc_input_low_w: Level = Field(
        65.0, description="Board DC input at or under this, GPU loaded, counts as starved, W."
    )

    # ---- G3 unified memory ---------------------------------------------------------------------
    # The budget is MemAvailable minus what the OS, driver and desktop keep for themselves; GB10 owners
    # report trouble once MemAvailable falls under ~4 GiB. The exporter publishes memory_budget_bytes with it.
    os_reserve_bytes: Bytes = Field(
        4 * GIB, description="OS/driver reserve subtracted from MemAvailable, bytes."
    )
    # A vLLM at 0.94 runs for weeks at 1.5-1.9 GiB available: thin budget is a warning, never critical alone.
    budget_warn_bytes: int = Field(8 * GIB, description="Budget under this is thin (warning), bytes.")
    # MemAvailable collapses 29 -> 2.5 GiB in 9 s on GB10: the window minimum, not the sample, decides.
    budget_critical_bytes: int = Field(
        4 * GIB,
        description="Budget (from the window minimum) under this with stalls/swap-out is critical, bytes.",
    )
    # Hysteresis: a finding entered at one level leaves only past another, so a reading hovering at a line
    # (MemAvailable wandering +-0.5 GiB around the 8 GiB budget line) does not toggle it every sample.
    budget_warn_leave_bytes: int = Field(
        9 * GIB, description="A thin-budget warning ends only once the budget is back above this, bytes."
    )
    budget_critical_leave_bytes: int = Field(
        5 * GIB,
        description="The near-exhaustion critical ends only once the minimum budget is above this, bytes.",
    )
    # PSI avg60, not the flickering avg10: healthy GB10 sits at 0-0.2%; reclaim stalls show 3-30%.
    psi_some_warn_pct: Level = Field(2.0, description="PSI memory 'some' avg60 that counts as stalling, %.")
    # Healthy GB10 sits at 0-0.2 %: under 1 % the stalls are over, between 1 and 2 % they carry on.
    psi_some_leave_pct: Level = Field(1.0, description="PSI some avg60 under which stalling has stopped, %.")
    psi_full_critical_pct: Level = Field(
        10.0, description="PSI 'full' avg60 that counts as sustained stalls, %."
    )
    psi_full_leave_pct: Level = Field(
        7.0, description="PSI full avg60 under which sustained full stalls have stopped, %."
    )
    psi_full_sustain_s: Delay = Field(60.0, description="How long PSI 'full' must stay high, seconds.")
    # Swapping out (pswpout rate), not stale SwapTotal-SwapFree; healthy hosts swap out 0 pages/s.
    swapout_warn_pages_s: Delay = Field(64.0, description="pswpout rate that counts as swapping, pages/s.")
    swapout_leave_pages_s: Delay = Field(
        16.0, description="pswpout rate under which swapping out has stopped, pages/s."
    )
    # Healthy training shows 1-10 major faults/s; eviction storms 300-2000/s.
    majfault_storm_per_s: Delay = Field(200.0, description="pgmajfault rate that counts as a storm, per s.")
    # A storm under pressure wanders 150-320/s between samples: it is over under half the entering rate
    # (healthy 1-10/s), so a storm at 180-250/s stays one storm instead of critical every other sample.
    majfault_storm_leave_per_s: Delay = Field(
        100.0, description="pgmajfault rate under which a storm is over, per s."
    )
    # Model load (56 GiB safetensors): page cache and anon climb ~8 GiB per 30 s each while MemAvailable falls.
    # A job start that maps 16 GiB of weights grows anon by ~2 GiB: not a transient heading for the limit.
    transient_min_growth_bytes: int = Field(
        4 * GIB, description="Cached and anon must each grow this much over the transient window, bytes."
    )
    transient_window_s: Seconds = Field(
        90.0, description="Window over which the load transient is judged, s."
    )
    # Three minutes ahead (3-6 samples): the 56 GiB load ran out of budget ~95 s after it became visible,
    # while a 20 GiB load into an empty pool, also fast, stops long before the limit.
    transient_horizon_s: Seconds = Field(
        180.0, description="Warn when the falling budget would be exhausted within this, seconds."
    )
    # The device copy of a model load on GB10 (cudaMalloc'd, in neither Cached nor AnonPages) drops
    # MemAvailable 45 -> 32 -> 18 GiB in consecutive 45 s samples; healthy hosts wobble by well under 1 GiB.
    avail_fall_min_bytes: Bytes = Field(
        2 * GIB,
        description="MemAvailable fall per interval, twice in a row, that counts as falling fast, bytes.",
    )
    # Warn when, at the latest fall rate, the budget is gone before the next sample: a load that stops on its
    # own (a trainer start taking 69 -> 60 -> 44 -> 28 GiB at 37 s sampling, a benign 90 -> 68 -> 56 GiB load)
    # still had more than one interval left, while the 56 GiB device copy at 18 GiB had 42 s of 45.
    avail_fall_horizon_intervals: Positive = Field(
        1.0,
        description="Warn when MemAvailable falling fast would exhaust the budget within this many intervals.",
    )
    oom_critical_hold_s: Delay = Field(300.0, description="G3 stays critical this long after an OOM kill, s.")
    # CmaFree is counted in MemAvailable (si_mem_available() starts from NR_FREE_PAGES) but only movable
    # allocations may use CMA pageblocks, and the GPU driver's pinned cudaMalloc pages are not movable:
    # owners' GB10 kills came at MemAvailable 10.4 GiB with MemAvailable - CmaFree at 1.6 GiB
    # (docs/diagnosis.md, "CmaFree and the budget").
    budget_subtracts_cma_free: bool = Field(
        True, description="Subtract CmaFree from MemAvailable in the budget (pages the GPU path cannot use)."
    )
    # ---- memory runway -------------------------------------------------------------------------
    # "At the last 20 minutes' rate": 20-40 samples at 30-60 s; vLLM footprints were measured growing
    # +21 GiB per 30 minutes, which this window sees as a clear, steady fall.
    runway_window_s: Seconds = Field(
        1200.0, description="Window over which the budget's trend (the runway) is measured, seconds."
    )
    # A creep is judged over (nearly) the whole window: under 15 minutes of history (a fresh start, just
    # after a kill or a reboot) there is no trend yet, and a fall that began inside the window is not one.
    runway_min_span_s: Seconds = Field(
        900.0, description="Least history before a runway or a footprint drift is reported, seconds."
    )
    # Healthy hosts wander +-0.5 GiB; a trend that loses under 2 GiB over the window is no runway.
    runway_min_fall_bytes: Bytes = Field(
        2 * GIB,
        description="Least fall of the budget's trend over the window that counts as a runway, bytes.",
    )
    # Lead time is the point: half an hour is enough to find the grower and restart or cap it; a vLLM creeping
    # at 0.7 GiB/min has ~21 GiB of budget left then, far from the thin-budget line.
    runway_warn_s: Delay = Field(
        1800.0, description="G3 warns when the budget runs out within this at its trend, seconds."
    )
    runway_leave_s: Delay = Field(
        2700.0, description="A runway warning ends once the runway is longer than this, seconds."
    )

    # ---- exits ---------------------------------------------------------------------------------
    # The kernel log reaches the daemon through the journal follower, a tick after the process is gone at
    # worst: a process that left the table waits this long for the report that names its killer.
    exit_grace_s: Delay = Field(
        60.0,
        description="How long a vanished process waits for a kill report before it counts as an exit, s.",
    )

    # ---- G6 contention -------------------------------------------------------------------------
    # "A LoRA under 4 GB beside a vLLM capped at 0.5 is ok": smaller GPU-resident jobs are not heavy.
    heavy_workload_bytes: int = Field(
        4 * GIB, description="Footprint from which a job counts as heavy, bytes."
    )
    # A server whose footprint wanders around 4 GiB (a small model plus a KV cache filling and draining)
    # stays heavy until it is clearly small again.
    heavy_leave_bytes: int = Field(
        3 * GIB, description="A heavy workload stops counting as heavy under this footprint, bytes."
    )
    # Field eviction: a QLoRA trainer holding 38 GiB beside an uncapped vLLM.
    large_trainer_bytes: int = Field(
        16 * GIB, description="Footprint from which a trainer counts as large, bytes."
    )
    # vLLM's default --gpu-memory-utilization is 0.9 of the whole UMA pool; 0.5 leaves room for a trainer.
    capped_utilization_max: Share = Field(0.5, description="Highest utilisation cap that counts as capped.")
    near_capacity_ratio: Share = Field(
        0.85,
        description="Workload footprints over this share of MemTotal count as near capacity.",
    )
    # Field eviction: trainer RSS halves (14 -> 7 GiB) within ~3 minutes while PSI and swap-out fire.
    eviction_loss_ratio: Share = Field(0.30, description="Share of RSS lost that counts as eviction.")
    eviction_min_loss_bytes: int = Field(
        1 * GIB, description="Smallest RSS loss that counts as eviction, bytes."
    )
    # Ten minutes, so a victim squeezed out gradually (60 s sampling) is still seen losing its share.
    eviction_window_s: Seconds = Field(600.0, description="Window over which RSS loss is measured, seconds.")
    # A level counts once the process has held it this long: torch.save staging a state dict lifts a
    # trainer's RSS (10 -> 22 GiB) for one 30-60 s sample and returns; evicted trainers and servers sat at
    # their level for minutes (the field victim held 14 GiB for the whole run before halving).
    eviction_level_hold_s: Delay = Field(
        90.0, description="How long an RSS level must be held to be the reference of a loss, seconds."
    )
    # Pressure signals flicker between samples during one squeeze (PSI avg60 dips under 2 % for a sample);
    # a quiet spell this long ends the episode, so the next one measures from fresh reference levels.
    eviction_episode_gap_s: Delay = Field(
        300.0, description="Quiet time without memory pressure that ends a pressure episode, seconds."
    )
    # A process that moved its weights to the GPU shows gpu_mem rising by about what RSS lost.
    gpu_move_ratio: Positive = Field(
        0.5, description="GPU memory gain (share of the RSS loss) that explains a shrink as a move."
    )
    eviction_hold_s: Delay = Field(600.0, description="G6 stays critical this long after an eviction, s.")
    eviction_rearm_s: Delay = Field(
        1800.0, description="A process evicted once is not reported again for, s."
    )

    # ---- driver faults --------------------------------------------------------------------------
    # An NV_ERR_NO_MEMORY line is evidence on G3 for this long; it is critical only with the memory signals
    # (healthy vLLM starts log it with memory to spare).
    driver_oom_hold_s: Delay = Field(
        600.0, description="G3 names a live NV_ERR_NO_MEMORY line this long (never critical alone), seconds."
    )
    # The hung-engine pattern needs minutes to show (anomaly_min_s); an Xid 43/109 logged within this
    # before it is the driver saying the same thing.
    hung_xid_window_s: Seconds = Field(
        900.0, description="An Xid 43/109 this recent is named by the hung-engine anomaly, seconds."
    )
    # The fault that ended a boot sits in its last minutes: a wedge freezes the host within minutes of it
    # (the journal stops there), while a planned reboot hours after a benign line is not its consequence.
    # Measured back from that boot's last journal entry, or from the last sample before the gap (an Xid 79
    # is the cause however long before: nothing reaches the GPU again until a power cycle).
    driver_fault_reboot_window_s: Seconds = Field(
        600.0,
        description="A driver fault this close before a boot's end (its last journal entry, or the last "
        "sample before the gap) is named as the reboot's cause, seconds.",
    )

    # ---- the ConnectX-7 link and the clock cap ---------------------------------------------------
    # A Spark's QSFP ports negotiate 200 Gb/s with an approved cable (ServeTheHome, NVIDIA's "Connect two
    # Sparks" playbook); a port that trains lower (a bad cable or a 100G peer) halves every all-reduce.
    link_min_rate_gbps: Positive = Field(
        200.0, description="An active ConnectX-7 port below this rate is reported as slow, Gb/s."
    )
    # A boot that ends within a day of an update is named by it: panicking and wedging kernels did so within
    # minutes to hours of the first boot on them (NVIDIA/open-gpu-kernel-modules#1358: 7 boots in 5 hours).
    platform_update_window_s: Positive = Field(
        86400.0,
        description="A reboot this soon after a boot that brought a new kernel, driver or firmware "
        "is named by that update, seconds.",
    )
    # The owner's intended SM clock cap (`nvidia-smi -lgc 0,2100` took one unit from 91 to 65 C): the driver
    # forgets it at every boot, so a boot whose loaded clock runs above it has lost the cap. Unset: the cap
    # this daemon saw in the previous boot is the one expected; 0: no cap is ever expected.
    expected_clock_cap_mhz: int | None = Field(
        None,
        ge=0,
        le=4000,
        description="The SM clock cap the owner keeps (nvidia-smi -lgc 0,CAP), MHz; unset: the previous "
        "boot's cap, 0: none.",
    )
    # Healthy GB10 clocks wander 2300-2480 MHz under load; a locked clock stays within a few tens of MHz.
    clock_cap_band_mhz: int = Field(
        80,
        ge=10,
        le=500,
        description="Loaded clocks within this of each other for 10 min are held by a cap, MHz.",
    )
    # Over the cap by more than sample jitter (+-30 MHz on GB10 traces) for 3 loaded samples: the cap is gone.
    clock_cap_above_mhz: int = Field(
        50, ge=10, le=1000, description="A loaded clock this far over the expected cap runs uncapped, MHz."
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_keys(cls, data):
        """Accept and drop the keys in RETIRED, so a config file written for an older release still loads."""
        if isinstance(data, dict) and any(k in data for k in RETIRED):
            data = {k: v for k, v in data.items() if k not in RETIRED}
        return data

    @model_validator(mode="after")
    def _leaving_levels_sit_past_entering_ones(self) -> "Thresholds":
        """Each leaving level sits on the far side of its entering level, or the finding could never leave.

        A leaving level left at its default follows a moved entering level (same margin, or same ratio
        for rates); one set explicitly on the wrong side is refused, naming both keys.
        """
        pairs = (
            ("budget_warn_leave_bytes", "budget_warn_bytes", 1),
            ("budget_critical_leave_bytes", "budget_critical_bytes", 1),
            ("psi_some_leave_pct", "psi_some_warn_pct", -1),
            ("psi_full_leave_pct", "psi_full_critical_pct", -1),
            ("swapout_leave_pages_s", "swapout_warn_pages_s", -1),
            ("majfault_storm_leave_per_s", "majfault_storm_per_s", -1),
            ("heavy_leave_bytes", "heavy_workload_bytes", -1),
            ("runway_leave_s", "runway_warn_s", 1),
            ("usable_critical_leave_bytes", "usable_critical_bytes", 1),
        )
        fields = type(self).model_fields
        for leave, enter, side in pairs:
            lv, ev = getattr(self, leave), getattr(self, enter)
            if (lv - ev) * side >= 0:
                continue
            if leave in self.model_fields_set:
                word = "at or above" if side > 0 else "at or below"
                raise ValueError(f"{leave} ({lv:g}) must be {word} {enter} ({ev:g})")
            d_leave, d_enter = fields[leave].default, fields[enter].default
            moved = ev + (d_leave - d_enter) if side > 0 else ev * (d_leave / d_enter if d_enter else 1.0)
            object.__setattr__(self, leave, type(d_leave)(moved))
        return self
