#!/usr/bin/env python3
"""Build the spark-watchd Grafana dashboards as code (plain dicts, Grafana 10/11 JSON model).

    python grafana/build.py           # rewrite grafana/dashboards/*.json
    python grafana/build.py --check   # exit 1 if the committed JSON is out of date

Every query reads through the `$job` and `$instance` variables (and `$datasource`);
series named `sparkwatchd:*` come from the recording rules in deploy/prometheus/rules.yml,
which the dashboards therefore need loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # panels.py sits beside this file
from panels import LEVELS, SEL, Layout, dashboard, m, panel, refs, threshold_steps, unit_override  # noqa: E402
from serving import serving_panels  # noqa: E402
from signals import board_panels, cluster_panels, link_panels  # noqa: E402

OUT = Path(__file__).resolve().parent / "dashboards"


DRIVER_KINDS = 'kind=~"driver_oom|pcie_fatal"'


def overview() -> dict:
    """One Spark: findings, GPU thermals, unified memory, contention, training, the daemon itself."""
    L = Layout()
    L.row("Findings")
    L.add(
        panel(
            "stat",
            "Findings",
            "G3 unified-memory pressure, G4 thermal throttling, G6 contention: -1 unknown, 0 ok, 1 warning, 2 critical.",
            refs((m("sparkwatchd_finding_level"), "{{gotcha}}")),
            "none",
            mappings=LEVELS,
            thresholds=threshold_steps((None, "green"), (1, "orange"), (2, "red")),
            options={"colorMode": "background", "graphMode": "none", "textMode": "value_and_name"},
        ),
        w=12,
        h=4,
    )
    L.add(
        panel(
            "stat",
            "Events in range",
            "Evictions, OOM kills, reboots (after a throttle or not), throttle starts in the selected time range.",
            refs((f"max by (kind) (increase({m('sparkwatchd_events_total')}[$__range]))", "{{kind}}")),
            "short",
            decimals=0,
            options={"colorMode": "value", "graphMode": "none", "textMode": "value_and_name"},
        ),
        w=12,
        h=4,
    )
    L.row("GPU (G4)")
    L.add(
        panel(
            "timeseries",
            "Power and temperature",
            "G4 signature: power flat under the 240 W rating while the temperature climbs to the slowdown line "
            "(86 C on GB10). Flat power at the ~100 W cap with a stable temperature is normal.",
            refs(
                (m("sparkwatchd_gpu_power_watts"), "power gpu{{gpu}}"),
                (m("sparkwatchd_gpu_temperature_celsius"), "temperature gpu{{gpu}}"),
                (m("sparkwatchd_gpu_slowdown_temperature_celsius"), "slowdown threshold gpu{{gpu}}"),
            ),
            "watt",
            overrides=[
                unit_override("temperature.*|slowdown.*", "celsius", **{"custom.axisPlacement": "right"}),
                unit_override(
                    "slowdown.*", "celsius", **{"custom.lineStyle": {"fill": "dash", "dash": [10, 10]}}
                ),
            ],
        )
    )
    L.add(
        panel(
            "timeseries",
            "SM clock vs applications clock",
            "The SM clock should hold near the applications clock (2418 MHz) under load; a throttle pulls it down.",
            refs(
                (m("sparkwatchd_gpu_sm_clock_hertz"), "SM clock gpu{{gpu}}"),
                (m("sparkwatchd_gpu_applications_clock_hertz"), "applications clock gpu{{gpu}}"),
            ),
            "hertz",
        )
    )
    L.add(
        panel(
            "timeseries",
            "Throttle reasons (share of time)",
            "Rate of the cumulative clocks-event counters: the share of time in each reason. power_cap is the "
            "platform's normal state; sw_thermal, hw_thermal and hw_slowdown are G4.",
            refs(("sparkwatchd:gpu_clock_event:ratio_rate5m{" + SEL + "}", "{{reason}} gpu{{gpu}}")),
            "percentunit",
            min=0,
            max=1,
        )
    )
    L.add(
        panel(
            "timeseries",
            "GPU utilisation",
            "High utilisation at low power with a falling temperature is a hung engine, not a throttle.",
            refs((m("sparkwatchd_gpu_utilization_ratio"), "gpu{{gpu}}")),
            "percentunit",
            min=0,
            max=1,
        )
    )
    L.row("Unified memory (G3)")
    L.add(
        panel(
            "timeseries",
            "UMA composition",
            "One ~128 GB pool for CPU and GPU, read from /proc/meminfo (NVML memory is Not Supported on GB10). "
            "available = MemAvailable; window minimum = lowest MemAvailable between samples; budget = available "
            "minus the OS/driver reserve; page cache and anon from meminfo; GPU-attributed = memory NVML reports "
            "per GPU process; unexplained = total - available - anon - GPU-attributed (kernel, slab, page "
            "tables, unreclaimable shmem, driver reserve), floored at 0.",
            refs(
                (m("sparkwatchd_memory_total_bytes"), "total"),
                (m("sparkwatchd_memory_available_bytes"), "available"),
                (m("sparkwatchd_memory_available_min_bytes"), "available (window minimum)"),
                (m("sparkwatchd_memory_budget_bytes"), "budget"),
                (m("sparkwatchd_memory_cached_bytes"), "page cache"),
                (m("sparkwatchd_memory_anon_bytes"), "anon"),
                (m("sparkwatchd_memory_gpu_attributed_bytes"), "GPU-attributed"),
                ("sparkwatchd:memory_unexplained:bytes{" + SEL + "}", "unexplained"),
                (m("sparkwatchd_memory_swap_used_bytes"), "swap used"),
            ),
            "bytes",
            min=0,
        ),
        w=24,
        h=9,
    )
    L.add(
        panel(
            "timeseries",
            "Memory pressure (PSI)",
            "Share of time some (waiting) or all (stalled) tasks were stalled on memory reclaim.",
            refs(
                (
                    f"rate({m('sparkwatchd_pressure_memory_waiting_seconds_total')}[$__rate_interval])",
                    "some (waiting)",
                ),
                (
                    f"rate({m('sparkwatchd_pressure_memory_stalled_seconds_total')}[$__rate_interval])",
                    "full (stalled)",
                ),
            ),
            "percentunit",
            min=0,
        )
    )
    L.add(
        panel(
            "timeseries",
            "Swap-out and major faults",
            "Swapping out (not swap merely in use) and a major-fault storm mean the pool is being fought over.",
            refs(
                (f"rate({m('sparkwatchd_swap_out_pages_total')}[$__rate_interval])", "swap-out pages/s"),
                (f"rate({m('sparkwatchd_major_faults_total')}[$__rate_interval])", "major faults/s"),
            ),
            "ops",
            min=0,
        )
    )
    L.row("Contention (G6)")
    L.add(
        panel(
            "timeseries",
            "Workloads",
            "Heavy GPU workloads by kind; capped=false is a vLLM without --gpu-memory-utilization <= 0.5, an "
            "Ollama, or a large trainer. Only the kinds present are drawn (the exporter keeps every kind x "
            "capped series, mostly at 0).",
            refs((m("sparkwatchd_workloads") + " > 0", "{{kind}} capped={{capped}}")),
            "short",
            min=0,
            decimals=0,
        )
    )
    L.add(
        panel(
            "timeseries",
            "Workload memory",
            "Resident memory of each kind of workload; an eviction shows as one kind losing memory while alive. "
            "Only the kinds present are drawn.",
            refs((m("sparkwatchd_workload_memory_bytes") + " > 0", "{{kind}} capped={{capped}}")),
            "bytes",
            min=0,
        )
    )
    board_panels(L)
    link_panels(L)
    L.row("Training throughput")
    L.add(
        panel(
            "timeseries",
            "Step time",
            "Seconds per step per job (the trainer's own job name is exported_job): a throttle shows as step time "
            "rising under the G4 annotations.",
            refs((m("sparkwatchd_training_step_seconds"), "{{exported_job}}")),
            "s",
            min=0,
        )
    )
    L.add(
        panel(
            "timeseries",
            "Tokens per second",
            "Training throughput per job, with the throttle annotations overlaid.",
            refs((m("sparkwatchd_training_tokens_per_second"), "{{exported_job}}")),
            "suffix: tok/s",
            min=0,
        )
    )
    serving_panels(L)
    L.row("Driver faults")
    L.add(
        panel(
            "timeseries",
            "Xid errors",
            "Xids the GPU driver reported (NVML events, or the kernel log where the driver sends no events), per "
            "GPU and code; docs/driver-faults.md says what each code means and which need a reset or power cycle.",
            refs(
                (
                    f"sum by (gpu, xid) (increase({m('sparkwatchd_gpu_xid_errors_total')}[$__rate_interval]))",
                    "GPU {{gpu}} Xid {{xid}}",
                )
            ),
            "short",
            min=0,
            decimals=0,
            custom={"drawStyle": "bars", "fillOpacity": 80},
            # Every code is exported at 0: a table legend sorted by its maximum puts the codes seen on top.
            options={
                "legend": {
                    "displayMode": "table",
                    "placement": "right",
                    "calcs": ["max"],
                    "sortBy": "Max",
                    "sortDesc": True,
                }
            },
        )
    )
    L.add(
        panel(
            "timeseries",
            "Driver out of memory and PCIe fatal errors",
            "NV_ERR_NO_MEMORY kernel lines (the driver ran out of the unified pool before the OOM killer: owners "
            "report a host wedge next) and PCIe AER fatal errors (a ConnectX-7 link between two Sparks).",
            refs(
                (
                    f"sum by (kind) (increase({m('sparkwatchd_events_total', DRIVER_KINDS)}[$__rate_interval]))",
                    "{{kind}}",
                )
            ),
            "short",
            min=0,
            decimals=0,
            custom={"drawStyle": "bars", "fillOpacity": 80},
        )
    )
    L.row("spark-watchd")
    L.add(
        panel(
            "timeseries",
            "Sources up",
            "1 while each source answers; 0 is a failing source (Not Supported is not a failure).",
            refs((m("sparkwatchd_source_up"), "{{source}}")),
            "bool",
            min=0,
            max=1,
        )
    )
    L.add(
        panel(
            "timeseries",
            "Source duration",
            "Time each source took on the last tick.",
            refs((m("sparkwatchd_source_duration_seconds"), "{{source}}")),
            "s",
            min=0,
        )
    )
    return dashboard(
        "spark-watchd-overview",
        "Spark overview (spark-watchd)",
        "One DGX Spark: G3 unified-memory pressure, G4 thermal throttling and G6 contention, with training throughput.",
        L.panels,
        multi_instance=False,
    )


def fleet() -> dict:
    """Every Spark side by side: finding levels, power, temperature, available memory, step time."""
    L = Layout()
    by = "max by (instance)"
    g = {
        x: by + " (" + m("sparkwatchd_finding_level", 'gotcha="' + x + '"') + ")" for x in ("G3", "G4", "G6")
    }
    table_targets = refs(
        (g["G3"], "G3", True),
        (g["G4"], "G4", True),
        (g["G6"], "G6", True),
        (f"{by} ({m('sparkwatchd_gpu_power_watts')})", "power", True),
        (f"{by} ({m('sparkwatchd_gpu_temperature_celsius')})", "temperature", True),
        (f"{by} ({m('sparkwatchd_memory_available_bytes')})", "available", True),
        (f"{by} ({m('sparkwatchd_training_step_seconds')})", "step time", True),
    )
    names = {"Value #A": "G3", "Value #B": "G4", "Value #C": "G6", "Value #D": "Power"}
    names.update({"Value #E": "Temperature", "Value #F": "Available memory", "Value #G": "Step time"})
    L.add(
        panel(
            "table",
            "Sparks",
            "One row per Spark: finding levels (G3 memory, G4 thermal, G6 contention), GPU power and temperature, "
            "MemAvailable and the slowest training job's step time.",
            table_targets,
            "none",
            mappings=LEVELS,
            overrides=[
                {
                    "matcher": {"id": "byRegexp", "options": "G3|G4|G6"},
                    "properties": [
                        {"id": "custom.cellOptions", "value": {"type": "color-background"}},
                        {
                            "id": "thresholds",
                            "value": threshold_steps((None, "green"), (1, "orange"), (2, "red")),
                        },
                    ],
                },
                unit_override("Power", "watt", mappings=[]),
                unit_override("Temperature", "celsius", mappings=[]),
                unit_override("Available memory", "bytes", mappings=[]),
                unit_override("Step time", "s", mappings=[]),
            ],
            transformations=[
                {"id": "merge", "options": {}},
                {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": names}},
            ],
            options={"showHeader": True, "sortBy": [{"displayName": "G4", "desc": True}]},
        ),
        w=24,
        h=8,
    )
    for title, desc, expr, unit in (
        (
            "GPU temperature",
            "Per Spark; the slowdown threshold is 86 C on GB10.",
            m("sparkwatchd_gpu_temperature_celsius"),
            "celsius",
        ),
        (
            "GPU power",
            "Per Spark; ~100 W sustained is normal on GB10.",
            m("sparkwatchd_gpu_power_watts"),
            "watt",
        ),
        ("Available memory", "MemAvailable per Spark.", m("sparkwatchd_memory_available_bytes"), "bytes"),
        (
            "Step time",
            "Seconds per step of each Spark's training jobs.",
            m("sparkwatchd_training_step_seconds"),
            "s",
        ),
        (
            "Worst finding",
            "Highest finding level per Spark (2 critical, 1 warning).",
            f"max by (instance) ({m('sparkwatchd_finding_level')})",
            "none",
        ),
        (
            "Throttle time (thermal reasons)",
            "Share of time in thermal clocks-event reasons per Spark.",
            "max by (instance) (sparkwatchd:gpu_thermal_clock_event:ratio_rate5m{" + SEL + "})",
            "percentunit",
        ),
    ):
        legend = "{{instance}}" if "by (instance)" in expr else "{{instance}} {{gpu}}{{exported_job}}"
        L.add(panel("timeseries", title, desc, refs((expr, legend)), unit, min=0))
    cluster_panels(L)
    return dashboard(
        "spark-watchd-fleet",
        "Spark fleet (spark-watchd)",
        "All DGX Sparks scraped by Prometheus: findings, thermals, memory and training side by side.",
        L.panels,
        multi_instance=True,
    )


DASHBOARDS = {"spark-overview.json": overview, "spark-fleet.json": fleet}


def render(build) -> str:
    return json.dumps(build(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the dashboards, or with --check report the stale ones."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path, text = OUT / name, render(build)
        if a.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("out of date (run grafana/build.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
