"""promtool unit-test cases for every SparkWatchd* alert: when it must fire, and the benign cases where it must not.

generate.py turns these into deploy/prometheus/tests/*.yml, filling each
expected alert's annotations from the rules so the cases stay short. Series
values use promtool's expanding notation ('0x9 2x30' = ten 0s then thirty-one
2s), one value per `interval` (1m).

Each case: (file stem, series {selector: values}, checks [(eval_time, alertname, [extra labels...])]).
An empty list asserts that the alert is NOT firing at that time.
"""

from __future__ import annotations

JOB = 'job="spark-watchd", instance="spark-01:9761"'
INST = {"job": "spark-watchd", "instance": "spark-01:9761"}


def s(metric: str, extra: str = "") -> str:
    """A series selector for the one test Spark."""
    return metric + "{" + ", ".join(x for x in (JOB, extra) if x) + "}"


def pattern(unit: str, times: int) -> str:
    """Repeat a space-separated value pattern (oscillating findings)."""
    return " ".join([unit] * times)


G4 = 'gotcha="G4"'
G3 = 'gotcha="G3"'
G6 = 'gotcha="G6"'
F = "sparkwatchd_finding_level"
EV = "sparkwatchd_events_total"
CLK = "sparkwatchd_gpu_clock_event_seconds_total"
fires = [INST]
quiet: list = []

CASES = [
    (
        "g4_throttle",
        # ok for 10 min, then the throttle signature, then critical once training slows.
        {s(F, G4): "0x9 1x10 2x30", s(F, G3): "0x49", s(F, G6): "0x49"},
        [
            (5, "SparkWatchdThrottleSignature", quiet),
            (5, "SparkWatchdThermalThrottleHurtingTraining", quiet),
            (16, "SparkWatchdThrottleSignature", fires),
            (16, "SparkWatchdThermalThrottleHurtingTraining", quiet),
            (30, "SparkWatchdThermalThrottleHurtingTraining", fires),
            (30, "SparkWatchdMemoryPressure", quiet),
            (30, "SparkWatchdUncappedCoTenant", quiet),
        ],
    ),
    (
        "g4_slowdown_ratio",
        # The run's own step time 50% above its baseline while the G4 signature holds pages,
        # even before the classifier calls it critical; slowdown on a cool GPU does not.
        {
            s(F, G4): "1x40",
            s("sparkwatchd_training_slowdown_ratio", 'exported_job="qlora"'): "1x10 1.5x30",
            'sparkwatchd_finding_level{job="spark-watchd", instance="spark-02:9761", gotcha="G4"}': "0x40",
            'sparkwatchd_training_slowdown_ratio{job="spark-watchd", instance="spark-02:9761"}': "1.6x40",
        },
        [
            (8, "SparkWatchdThermalThrottleHurtingTraining", quiet),
            (20, "SparkWatchdThermalThrottleHurtingTraining", fires),
        ],
    ),
    (
        "g4_power_cap_plateau",
        # Benign: flat ~92 W at the platform cap, stable 79 C, the SW power-cap reason
        # active the whole time. Normal on GB10, never a throttle.
        {
            s(F, G4): "0x60",
            s("sparkwatchd_gpu_power_watts", 'gpu="0"'): "92x60",
            s("sparkwatchd_gpu_temperature_celsius", 'gpu="0"'): "79x60",
            s(CLK, 'gpu="0", reason="power_cap"'): "0+60x60",
            s(CLK, 'gpu="0", reason="sw_thermal"'): "0x60",
            s(CLK, 'gpu="0", reason="hw_thermal"'): "0x60",
            s(CLK, 'gpu="0", reason="hw_slowdown"'): "0x60",
        },
        [
            (30, "SparkWatchdThrottleSignature", quiet),
            (60, "SparkWatchdThrottleSignature", quiet),
            (60, "SparkWatchdThermalThrottleHurtingTraining", quiet),
        ],
    ),
    (
        "g4_thermal_counters",
        # Thermal slowdown counters moving (half of the time in SW thermal) warn even
        # while the finding lags: the mask can read 0 between samples while counters move.
        {
            s(F, G4): "0x40",
            s(CLK, 'gpu="0", reason="power_cap"'): "0+60x40",
            s(CLK, 'gpu="0", reason="sw_thermal"'): "0x10 0+30x30",
        },
        [
            (10, "SparkWatchdThrottleSignature", quiet),
            (25, "SparkWatchdThrottleSignature", fires),
        ],
    ),
    (
        "g4_oscillating",
        # warning, warning, ok... the classifier wobbling around its threshold keeps the
        # alert firing steadily (smoothed in PromQL, not by a long for:).
        {s(F, G4): pattern("1 1 0", 14)},
        [
            (15, "SparkWatchdThrottleSignature", fires),
            (25, "SparkWatchdThrottleSignature", fires),
            (32, "SparkWatchdThrottleSignature", fires),
        ],
    ),
    (
        "g4_single_blip",
        # One warning sample among ok ones is noise, not a page or a warning.
        {s(F, G4): "0x10 1 0x20", s(F, G6): "0x10 2 0x20"},
        [
            (11, "SparkWatchdThrottleSignature", quiet),
            (13, "SparkWatchdThrottleSignature", quiet),
            (15, "SparkWatchdThrottleSignature", quiet),
            (13, "SparkWatchdEviction", quiet),
        ],
    ),
    (
        "g4_reboot_after_throttle",
        # The Spark vanished for 6 minutes (no samples), came back with the counter up.
        {
            s(EV, 'kind="reboot_after_throttle"'): "0x10 _x6 1x40",
            s(EV, 'kind="reboot"'): "0x10 _x6 1x40",
        },
        [
            (5, "SparkWatchdRebootAfterThrottle", quiet),
            (20, "SparkWatchdRebootAfterThrottle", fires),
            (56, "SparkWatchdRebootAfterThrottle", quiet),
        ],
    ),
    (
        "g4_reboot_without_throttle",
        # A plain reboot (kernel update) is not a G4 page.
        {
            s(EV, 'kind="reboot_after_throttle"'): "0x10 _x6 0x20",
            s(EV, 'kind="reboot"'): "0x10 _x6 1x20",
        },
        [(20, "SparkWatchdRebootAfterThrottle", quiet)],
    ),
    (
        "g6_eviction",
        {
            s(EV, 'kind="eviction"'): "0x10 1x20",
            s(F, G6): "0x5 1x25",
        },
        [
            (8, "SparkWatchdEviction", quiet),
            (12, "SparkWatchdEviction", fires),
            (10, "SparkWatchdUncappedCoTenant", quiet),
            (16, "SparkWatchdUncappedCoTenant", fires),
        ],
    ),
    (
        "g6_critical_finding",
        # A major-fault storm with stalls is G6 critical without an eviction event.
        {s(EV, 'kind="eviction"'): "0x30", s(F, G6): "0x10 2x20"},
        [(8, "SparkWatchdEviction", quiet), (15, "SparkWatchdEviction", fires)],
    ),
    (
        "g6_capped_cotenant",
        # vLLM capped at 0.5 beside a small LoRA: G6 ok, nothing fires.
        {
            s(EV, 'kind="eviction"'): "0x30",
            s(F, G6): "0x30",
            s("sparkwatchd_workloads", 'kind="vllm", capped="true"'): "1x30",
            s("sparkwatchd_workloads", 'kind="trainer", capped="true"'): "1x30",
        },
        [(20, "SparkWatchdEviction", quiet), (20, "SparkWatchdUncappedCoTenant", quiet)],
    ),
    (
        "g3_oom_kill",
        {s("sparkwatchd_oom_kills_total"): "3x10 4x20", s(EV, 'kind="oom_kill"'): "0x30"},
        [(8, "SparkWatchdOOMKill", quiet), (12, "SparkWatchdOOMKill", fires)],
    ),
    (
        "g3_oom_event_and_reset",
        # The event counter rising pages; a counter reset (state file lost) does not.
        {
            s(EV, 'kind="oom_kill"'): "0x10 1x20",
            'sparkwatchd_events_total{job="spark-watchd", instance="spark-02:9761", kind="oom_kill"}': "5x10 0x20",
            'sparkwatchd_oom_kills_total{job="spark-watchd", instance="spark-02:9761"}': "7x30",
        },
        [(12, "SparkWatchdOOMKill", fires)],
    ),
    (
        "g3_pressure",
        {s(F, G3): "0x5 1x10 2x15"},
        [
            (4, "SparkWatchdMemoryPressure", quiet),
            (12, "SparkWatchdMemoryPressure", fires),
            (12, "SparkWatchdMemoryExhaustion", quiet),
            (25, "SparkWatchdMemoryExhaustion", fires),
        ],
    ),
    (
        "g3_runway_short",
        # A runway that stays under 30 minutes for 10 minutes warns; +Inf (no sustained fall) and a runway
        # that dips under the line for a few minutes (a trend that then eases) do not.
        {
            s("sparkwatchd_memory_runway_seconds"): pattern("Inf", 6) + " 2400x3 1700x3 2400x5 1500x25",
            'sparkwatchd_memory_runway_seconds{job="spark-watchd", instance="spark-02:9761"}': pattern(
                "Inf", 41
            ),
        },
        [
            (4, "SparkWatchdMemoryRunwayShort", quiet),
            (12, "SparkWatchdMemoryRunwayShort", quiet),
            (22, "SparkWatchdMemoryRunwayShort", quiet),
            (30, "SparkWatchdMemoryRunwayShort", fires),
        ],
    ),
    (
        "daemon_stale_and_down",
        {
            s("sparkwatchd_last_sample_timestamp_seconds"): "1000+60x10 1600x20",
            s("up"): "1x40",
            'sparkwatchd_last_sample_timestamp_seconds{job="spark-watchd", instance="spark-02:9761"}': "1000+60x10",
            'up{job="spark-watchd", instance="spark-02:9761"}': "1x10 0x30",
        },
        [
            (8, "SparkWatchdStale", quiet),
            (22, "SparkWatchdStale", fires),
            (8, "SparkWatchdDown", quiet),
            (14, "SparkWatchdDown", [{"job": "spark-watchd", "instance": "spark-02:9761"}]),
            (12, "SparkWatchdAbsent", quiet),
        ],
    ),
    (
        "daemon_absent",
        # Service discovery lost every Spark: only some other job is scraped.
        {'up{job="node", instance="spark-01:9100"}': "1x20"},
        [(5, "SparkWatchdAbsent", quiet), (15, "SparkWatchdAbsent", [{"job": "spark-watchd"}])],
    ),
    (
        "sources_lost",
        {
            s("sparkwatchd_source_up", 'source="nvml"'): "1x10 0x20",
            s("sparkwatchd_source_up", 'source="psi"'): "1x5 0x30",
            s("sparkwatchd_source_up", 'source="meminfo"'): "1x35",
            s("sparkwatchd_source_up", 'source="progress"'): "1x5 0x30",
            # A Spark whose driver never loaded: preflight's business, not an alert.
            'sparkwatchd_source_up{job="spark-watchd", instance="spark-02:9761", source="nvml"}': "0x35",
        },
        [
            (9, "SparkWatchdNvmlLost", quiet),
            (14, "SparkWatchdNvmlLost", [{**INST, "source": "nvml"}]),
            (10, "SparkWatchdSourceLost", quiet),
            (20, "SparkWatchdSourceLost", [{**INST, "source": "psi"}]),
        ],
    ),
    (
        "anomalies",
        # Power-delivery fault and hung engine are not throttles: their own warnings only.
        {
            s("sparkwatchd_anomaly", 'kind="power_delivery"'): "0x5 1x25",
            s("sparkwatchd_anomaly", 'kind="hung_engine"'): "0x5 1 0x24",
            s(F, G4): "0x30",
        },
        [
            (4, "SparkWatchdPowerDeliveryFault", quiet),
            (15, "SparkWatchdPowerDeliveryFault", fires),
            (15, "SparkWatchdHungEngine", quiet),
            (15, "SparkWatchdThrottleSignature", quiet),
        ],
    ),
    (
        "firmware_power_limit",
        # The G4 power_limit anomaly (board telemetry) for 10 min: its own warning, never a throttle alert.
        {s("sparkwatchd_anomaly", 'kind="power_limit"'): "0x5 1x25", s(F, G4): "0x30"},
        [
            (8, "SparkWatchdFirmwarePowerLimit", quiet),
            (20, "SparkWatchdFirmwarePowerLimit", fires),
            (20, "SparkWatchdThrottleSignature", quiet),
            (20, "SparkWatchdPowerDeliveryFault", quiet),
        ],
    ),
    (
        "hung_engine",
        {s("sparkwatchd_anomaly", 'kind="hung_engine"'): "0x5 1x25"},
        [(4, "SparkWatchdHungEngine", quiet), (15, "SparkWatchdHungEngine", fires)],
    ),
    (
        "driver_xid",
        # Xid 79 at minute 6 (fatal: page), Xid 13 at minute 20 (an application's: warning); the counters
        # are exported at 0 beforehand, so increase() sees the first one.
        {
            s("sparkwatchd_gpu_xid_errors_total", 'gpu="0", xid="79"'): "0x5 1x40",
            s("sparkwatchd_gpu_xid_errors_total", 'gpu="0", xid="13"'): "0x19 1x26",
        },
        [
            (4, "SparkWatchdGpuXidFatal", quiet),
            (8, "SparkWatchdGpuXidFatal", [{**INST, "gpu": "0", "xid": "79"}]),
            (8, "SparkWatchdGpuXid", quiet),
            (22, "SparkWatchdGpuXid", [{**INST, "gpu": "0", "xid": "13"}]),
            (40, "SparkWatchdGpuXid", quiet),
            (40, "SparkWatchdGpuXidFatal", quiet),
        ],
    ),
    (
        "driver_xid_unknown",
        # An Xid outside the table (xid="other") and Xid 109 (the catalog: reset the GPU) page as fatal.
        {
            s("sparkwatchd_gpu_xid_errors_total", 'gpu="0", xid="other"'): "0x5 1x40",
            s("sparkwatchd_gpu_xid_errors_total", 'gpu="0", xid="109"'): "0x19 1x26",
        },
        [
            (8, "SparkWatchdGpuXidFatal", [{**INST, "gpu": "0", "xid": "other"}]),
            (8, "SparkWatchdGpuXid", quiet),
            (22, "SparkWatchdGpuXidFatal", [{**INST, "gpu": "0", "xid": "109"}]),
            (22, "SparkWatchdGpuXid", quiet),
        ],
    ),
    (
        "driver_oom_and_pcie",
        {s(EV, 'kind="driver_oom"'): "0x9 1x40", s(EV, 'kind="pcie_fatal"'): "0x19 1x30"},
        [
            (5, "SparkWatchdDriverOutOfMemory", quiet),
            (12, "SparkWatchdDriverOutOfMemory", fires),
            (12, "SparkWatchdPcieFatal", quiet),
            (22, "SparkWatchdPcieFatal", fires),
            (45, "SparkWatchdDriverOutOfMemory", quiet),
        ],
    ),
    (
        "clock_cap_lost",
        # After a reboot the cap is gone: G4 warning with anomaly clock_cap_lost. That is the cap alert, never
        # the throttle signature (no thermal reason moves).
        {
            s(F, G4): "0x9 1x30",
            s("sparkwatchd_anomaly", 'kind="clock_cap_lost"'): "0x9 1x30",
            s(CLK, 'gpu="0", reason="sw_thermal"'): "0x40",
        },
        [
            (5, "SparkWatchdClockCapLost", quiet),
            (20, "SparkWatchdClockCapLost", fires),
            (20, "SparkWatchdThrottleSignature", quiet),
        ],
    ),
    (
        "link_problem",
        # rocep1s0f0 goes down at 10 min for 20 min; one blip at 35 min; the uncabled rocep1s0f1 (up 0,
        # problem 0 all along) never fires.
        {
            s("sparkwatchd_link_problem", 'device="rocep1s0f0", port="1"'): "0x9 1x20 0x4 1 0x10",
            s("sparkwatchd_link_up", 'device="rocep1s0f0", port="1"'): "1x9 0x20 1x4 0 1x10",
            s("sparkwatchd_link_problem", 'device="rocep1s0f1", port="1"'): "0x45",
            s("sparkwatchd_link_up", 'device="rocep1s0f1", port="1"'): "0x45",
        },
        [
            (8, "SparkWatchdLinkProblem", quiet),
            (20, "SparkWatchdLinkProblem", [{**INST, "device": "rocep1s0f0", "port": "1"}]),
            (38, "SparkWatchdLinkProblem", quiet),
        ],
    ),
]

# ---- fleet: two Sparks of one DDP cluster (target label cluster="ddp-a") and a standalone one ----
PAIR = {"spark-01:9761": 'job="spark-watchd", instance="spark-01:9761", cluster="ddp-a"',
        "spark-02:9761": 'job="spark-watchd", instance="spark-02:9761", cluster="ddp-a"'}  # fmt: skip
SOLO = 'job="spark-watchd", instance="spark-03:9761"'


def gpu_series(labels: str, clock: str, temp: str, util: str, g4: str = "0x40") -> dict[str, str]:
    """One Spark's GPU clock (Hz), temperature, utilisation (0..1) and G4 finding level."""
    return {
        f'sparkwatchd_gpu_sm_clock_hertz{{{labels}, gpu="0"}}': clock,
        f'sparkwatchd_gpu_temperature_celsius{{{labels}, gpu="0"}}': temp,
        f'sparkwatchd_gpu_utilization_ratio{{{labels}, gpu="0"}}': util,
        f'sparkwatchd_finding_level{{{labels}, gotcha="G4"}}': g4,
    }


def straggler(instance: str) -> list[dict]:
    return [{"job": "spark-watchd", "instance": instance, "cluster": "ddp-a"}]


CASES += [
    (
        "fleet_straggler_clock",
        # spark-01's clock sinks 17% under spark-02's at 5 min; the standalone spark-03 is slower still
        # but has no peers (no cluster label) and is never compared.
        {
            **gpu_series(PAIR["spark-01:9761"], "2.4e9x4 2.0e9x36", "80x40", "0.97x40"),
            **gpu_series(PAIR["spark-02:9761"], "2.4e9x40", "79x40", "0.97x40"),
            **gpu_series(SOLO, "1.5e9x40", "70x40", "0.97x40"),
        },
        [
            (12, "SparkWatchdStraggler", quiet),  # 15 min not reached yet
            (25, "SparkWatchdStraggler", straggler("spark-01:9761")),
        ],
    ),
    (
        "fleet_straggler_temperature",
        # Same clocks; spark-02 runs 7 C hotter under load. A 3 C gap is not a straggler.
        {
            **gpu_series(PAIR["spark-01:9761"], "2.4e9x40", "78x40", "0.97x40"),
            **gpu_series(PAIR["spark-02:9761"], "2.4e9x40", "81x9 85x30", "0.97x40"),
        },
        [(8, "SparkWatchdStraggler", quiet), (30, "SparkWatchdStraggler", straggler("spark-02:9761"))],
    ),
    (
        "fleet_idle_peer",
        # spark-02 idles (cool, low clock): it is no peer under load, so spark-01 is not compared with it.
        {
            **gpu_series(PAIR["spark-01:9761"], "2.3e9x40", "80x40", "0.97x40"),
            **gpu_series(PAIR["spark-02:9761"], "0.6e9x40", "45x40", "0.02x40"),
        },
        [(30, "SparkWatchdStraggler", quiet)],
    ),
    (
        "fleet_straggler_waiting_peers",
        # spark-01 shows the G4 throttle signature at 97% while spark-02 waits at 60%: spark-01 is the
        # straggler even though its clock and temperature stay within the margins.
        {
            **gpu_series(PAIR["spark-01:9761"], "2.3e9x40", "82x40", "0.97x40", g4="0x4 1x36"),
            **gpu_series(PAIR["spark-02:9761"], "2.4e9x40", "79x40", "0.97x4 0.6x36"),
        },
        [(12, "SparkWatchdStraggler", quiet), (25, "SparkWatchdStraggler", straggler("spark-01:9761"))],
    ),
    (
        "fleet_both_throttling",
        # Both Sparks throttle alike (the room is hot): no straggler, the G4 alerts cover each one.
        {
            **gpu_series(PAIR["spark-01:9761"], "2.1e9x40", "86x40", "0.97x40", g4="1x40"),
            **gpu_series(PAIR["spark-02:9761"], "2.1e9x40", "86x40", "0.97x40", g4="1x40"),
        },
        [
            (30, "SparkWatchdStraggler", quiet),
            (30, "SparkWatchdThrottleSignature", [{"job": "spark-watchd", "instance": i} for i in PAIR]),
        ],
    ),
]

# ---- serving: the inference servers' own telemetry (serving_rules.py) ----
import serving_rules  # noqa: E402 (beside this file)

CASES += serving_rules.cases(s, INST)
