#!/usr/bin/env python3
"""Generate the spark-watchd Prometheus rules (and the Kubernetes PrometheusRule) from one definition.

The job selector lives in exactly one place (SELECTOR below, or --selector):
every raw `sparkwatchd_*` / `up` series is read through it, and alerts only
read the recorded series, which already carry it.

    python deploy/prometheus/generate.py            # rewrite the committed files
    python deploy/prometheus/generate.py --check    # exit 1 if they are out of date
    python deploy/prometheus/generate.py --time-scale 0.01 --min-window 3s --out /tmp/rules.yml

`--time-scale` multiplies every `for:` and every range window (with
`--min-window` as a floor for the windows), so a test replaying a trace 600x
faster than recorded can run the shipped rules unchanged otherwise
(docs/alerts.md, "Testing with a time scale").
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # unit_cases.py sits beside this file
sys.path.insert(
    1, str(Path(__file__).resolve().parents[2])
)  # the package: its Xid table says which are fatal

from spark_watchd.diagnose.xid import FATAL_XIDS  # noqa: E402

# An Xid outside the table (xid="other") is possibly fatal: it pages with the fatal codes.
FATAL_XID_RE = "|".join([*(str(x) for x in sorted(FATAL_XIDS)), "other"])

import fleet_rules  # noqa: E402 (beside this file, found through the path above)
import serving_rules  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RULES_PATH = HERE / "rules.yml"
TESTS_DIR = HERE / "tests"
PROMETHEUS_RULE_PATH = REPO / "deploy" / "kubernetes" / "prometheusrule.yaml"

# The one place that says which scrape job is spark-watchd. Keep it an equality
# matcher: absent() derives the labels of its alert from it.
SELECTOR = 'job="spark-watchd"'
# Where runbook_url points; anchors are the lower-cased alert names in docs/runbook.md.
RUNBOOK_BASE = "https://github.com/spark-watchd/spark-watchd/blob/main/docs/runbook.md"

_UNITS = (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0))


def format_duration(seconds: float) -> str:
    """Prometheus duration text for a number of seconds (whole milliseconds)."""
    ms = max(1, round(seconds * 1000))
    if ms % 1000:
        return f"{ms}ms"
    rest = ms // 1000
    out = ""
    for unit, size in _UNITS:
        n, rest = divmod(rest, int(size))
        if n:
            out += f"{n}{unit}"
    return out or "0s"


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as `1h30m`, `500ms`."""
    parts = re.findall(r"(\d+)(ms|d|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Prometheus duration: {text!r}")
    size = {"ms": 0.001, **dict(_UNITS)}
    return sum(int(n) * size[u] for n, u in parts)


@dataclass(frozen=True)
class Ctx:
    """What the rule text depends on: the selector, the time scale and the runbook base."""

    selector: str = SELECTOR
    time_scale: float = 1.0
    min_window_s: float = 0.0
    runbook_base: str = RUNBOOK_BASE

    def sel(self, extra: str = "") -> str:
        """Label matchers: the job selector plus any extra matchers."""
        return "{" + ", ".join(m for m in (self.selector, extra) if m) + "}"

    def win(self, seconds: float) -> str:
        """A range window, scaled, never under the floor."""
        return format_duration(max(seconds * self.time_scale, self.min_window_s))

    def dur(self, seconds: float) -> str:
        """A `for:` duration, scaled."""
        return format_duration(seconds * self.time_scale)


def recording_rules(c: Ctx) -> list[dict]:
    """Series that the alerts and dashboards share."""
    w5 = c.win(300)
    rules = [
        # Findings as 0/1 per severity, so alerts can ask "what share of the last
        # minutes was warning or worse" instead of flapping with the classifier.
        ("sparkwatchd:finding_warning:bool", f"sparkwatchd_finding_level{c.sel()} >= bool 1"),
        ("sparkwatchd:finding_critical:bool", f"sparkwatchd_finding_level{c.sel()} >= bool 2"),
        ("sparkwatchd:finding_level:max5m", f"max_over_time(sparkwatchd_finding_level{c.sel()}[{w5}])"),
        # Share of time each clocks-event reason was active (0..1).
        (
            "sparkwatchd:gpu_clock_event:ratio_rate5m",
            f"rate(sparkwatchd_gpu_clock_event_seconds_total{c.sel()}[{w5}])",
        ),
        # Thermal reasons only: the SW power cap (power_cap) is the platform's normal state on GB10.
        (
            "sparkwatchd:gpu_thermal_clock_event:ratio_rate5m",
            "max by (job, instance, gpu) (sparkwatchd:gpu_clock_event:ratio_rate5m"
            '{reason=~"sw_thermal|hw_thermal|hw_slowdown"})',
        ),
        (
            "sparkwatchd:pressure_memory_waiting:ratio_rate5m",
            f"rate(sparkwatchd_pressure_memory_waiting_seconds_total{c.sel()}[{w5}])",
        ),
        (
            "sparkwatchd:pressure_memory_stalled:ratio_rate5m",
            f"rate(sparkwatchd_pressure_memory_stalled_seconds_total{c.sel()}[{w5}])",
        ),
        ("sparkwatchd:swap_out_pages:rate5m", f"rate(sparkwatchd_swap_out_pages_total{c.sel()}[{w5}])"),
        ("sparkwatchd:major_faults:rate5m", f"rate(sparkwatchd_major_faults_total{c.sel()}[{w5}])"),
        # Used memory that neither process anonymous memory nor GPU allocations
        # explain: kernel slab, page tables, unreclaimable shmem, driver reserve.
        (
            "sparkwatchd:memory_unexplained:bytes",
            f"clamp_min(sparkwatchd_memory_total_bytes{c.sel()} - sparkwatchd_memory_available_bytes{c.sel()}"
            f" - sparkwatchd_memory_anon_bytes{c.sel()} - sparkwatchd_memory_gpu_attributed_bytes{c.sel()}, 0)",
        ),
        (
            "sparkwatchd:memory_available:ratio",
            f"sparkwatchd_memory_available_bytes{c.sel()} / sparkwatchd_memory_total_bytes{c.sel()}",
        ),
    ]
    rules += fleet_rules.recording_rules(c)  # Sparks grouped by their `cluster` label
    rules += serving_rules.recording_rules(c)  # the inference servers' own telemetry
    return [{"record": name, "expr": expr} for name, expr in rules]


def _finding_share(metric: str, gotcha: str, w: str) -> str:
    return f'max by (job, instance) (avg_over_time({metric}{{gotcha="{gotcha}"}}[{w}]))'


def _events(c: Ctx, kind: str, seconds: float) -> str:
    sel = c.sel('kind="' + kind + '"')
    return f"sum by (job, instance) (increase(sparkwatchd_events_total{sel}[{c.win(seconds)}])) > 0"


def _xids(c: Ctx, op: str, seconds: float) -> str:
    """Xid counters that rose, fatal codes (op `=~`) or the others (`!~`), per GPU and code."""
    sel = c.sel(f'xid{op}"{FATAL_XID_RE}"')
    return f"sum by (job, instance, gpu, xid) (increase(sparkwatchd_gpu_xid_errors_total{sel}[{c.win(seconds)}])) > 0"


def _anomaly(c: Ctx, kind: str) -> str:
    sel = c.sel('kind="' + kind + '"')
    return f"max by (job, instance) (avg_over_time(sparkwatchd_anomaly{sel}[{c.win(600)}])) >= 0.5"


def alert_rules(c: Ctx) -> list[dict]:
    """Every SparkWatchd* alert: (name, severity, gotcha, for, expr, summary, description)."""
    w5 = c.win(300)
    nvml = c.sel('source="nvml"')
    other = c.sel('source!~"nvml|progress"')
    crit = "sparkwatchd:finding_critical:bool"
    warn = "sparkwatchd:finding_warning:bool"
    specs = [
        # ---- pages ----
        (
            "SparkWatchdThermalThrottleHurtingTraining",
            "critical",
            "G4",
            c.dur(60),
            f"{_finding_share(crit, 'G4', w5)} >= 0.5\n"
            "or\n"
            f"(max by (job, instance) (sparkwatchd_training_slowdown_ratio{c.sel()}) >= 1.25\n"
            f"  and on (job, instance) {_finding_share(warn, 'G4', w5)} >= 0.5)",
            "Thermal throttling is slowing training on {{ $labels.instance }} (G4)",
            "The GPU on {{ $labels.instance }} sits at its thermal slowdown threshold and the run pays for it "
            "(step time well above its baseline, or the GPU at its shutdown threshold). "
            "Flat power under the 240 W rating with a climbing temperature is the G4 signature.",
        ),
        (
            "SparkWatchdRebootAfterThrottle",
            "critical",
            "G4",
            "0s",
            _events(c, "reboot_after_throttle", 1800),
            "{{ $labels.instance }} rebooted after a thermal throttle (G4)",
            "The Spark restarted (new boot id) while or shortly after it was throttling. "
            "Spontaneous reboots under sustained load are the end stage of G4.",
        ),
        (
            "SparkWatchdEviction",
            "critical",
            "G6",
            "0s",
            f"{_events(c, 'eviction', 900)}\nor\n{_finding_share(crit, 'G6', w5)} >= 0.5",
            "Workloads are evicting each other on {{ $labels.instance }} (G6)",
            "A GPU-resident process lost a large part of its resident memory while still alive, or a "
            "major-fault storm with memory stalls hit while heavy workloads share the unified pool.",
        ),
        (
            "SparkWatchdOOMKill",
            "critical",
            "G3",
            "0s",
            f"{_events(c, 'oom_kill', 900)}\n"
            f"or\nsum by (job, instance) (increase(sparkwatchd_oom_kills_total{c.sel()}[{c.win(900)}])) > 0",
            "The kernel OOM-killed a process on {{ $labels.instance }} (G3)",
            "The unified memory pool ran out and the kernel killed a process (vmstat oom_kill rose).",
        ),
        (
            "SparkWatchdMemoryExhaustion",
            "critical",
            "G3",
            c.dur(60),
            f"{_finding_share(crit, 'G3', w5)} >= 0.5",
            "Unified memory on {{ $labels.instance }} is close to exhaustion (G3)",
            "MemAvailable is near zero while the kernel stalls on reclaim (PSI full) or swaps out: "
            "an OOM kill or an eviction is next.",
        ),
        (
            "SparkWatchdStale",
            "critical",
            None,
            c.dur(300),
            # Sample time, not time() - sample time: replays and clock skew between the
            # Spark and Prometheus must not read as stale. Down is SparkWatchdDown's page.
            f"changes(sparkwatchd_last_sample_timestamp_seconds{c.sel()}[{w5}]) == 0\n"
            f"and on (job, instance) up{c.sel()} == 1",
            "spark-watchd on {{ $labels.instance }} stopped sampling",
            "The daemon answers scrapes but its last sample has not advanced for several minutes: "
            "a source is hanging the tick loop, or the daemon is wedged.",
        ),
        (
            "SparkWatchdDown",
            "critical",
            None,
            c.dur(120),
            f"up{c.sel()} == 0",
            "spark-watchd on {{ $labels.instance }} is down",
            "Prometheus cannot scrape spark-watchd on {{ $labels.instance }}: the daemon is stopped, "
            "the Spark is off or rebooting, or the network path is broken.",
        ),
        (
            "SparkWatchdAbsent",
            "critical",
            None,
            c.dur(600),
            f"absent(up{c.sel()})",
            "No spark-watchd target is being scraped",
            "Prometheus has no target for the spark-watchd job at all: the scrape configuration or "
            "service discovery lost the Sparks.",
        ),
        # ---- warnings ----
        (
            "SparkWatchdThrottleSignature",
            "warning",
            "G4",
            c.dur(120),
            f"({_finding_share(warn, 'G4', w5)} >= 0.5\n"
            # A lost clock cap is a G4 warning but no heat: SparkWatchdClockCapLost says it.
            f" unless on (job, instance) {_anomaly(c, 'clock_cap_lost')})\n"
            "or\n"
            "max by (job, instance) (sparkwatchd:gpu_thermal_clock_event:ratio_rate5m) > 0.1",
            "Thermal throttle signature on {{ $labels.instance }} (G4)",
            "Power is flat under the 240 W rating while the temperature climbs toward the 86 C slowdown "
            "threshold, and thermal clocks-event reasons are active. Training is not (yet) visibly slower.",
        ),
        (
            "SparkWatchdMemoryPressure",
            "warning",
            "G3",
            c.dur(120),
            f"{_finding_share(warn, 'G3', w5)} >= 0.5",
            "Unified memory pressure on {{ $labels.instance }} (G3)",
            "The memory budget (MemAvailable minus the OS/driver reserve) is thin, or reclaim stalls or "
            "swap-out have begun. NVML memory is Not Supported on GB10: this is read from /proc.",
        ),
        (
            "SparkWatchdMemoryRunwayShort",
            "warning",
            "G3",
            c.dur(600),
            # +Inf while the budget is not on a sustained fall; a settling load never gets a finite value.
            f"min by (job, instance) (sparkwatchd_memory_runway_seconds{c.sel()}) < 1800",
            "Unified memory on {{ $labels.instance }} runs out within 30 minutes at its trend (G3)",
            "The memory budget (MemAvailable minus CmaFree and the reserve) has fallen steadily for 20 minutes "
            "and, at that rate, is gone within 30 minutes: a workload is growing (see its growth per hour on "
            "the status page) and the OOM killer is next.",
        ),
        (
            "SparkWatchdUncappedCoTenant",
            "warning",
            "G6",
            c.dur(300),
            f"{_finding_share(warn, 'G6', w5)} >= 0.5",
            "Heavy GPU workloads share {{ $labels.instance }} without a memory cap (G6)",
            "Two or more heavy GPU-resident workloads share the unified pool and at least one is uncapped "
            "(vLLM without --gpu-memory-utilization <= 0.5, Ollama, a large trainer). Evictions follow.",
        ),
        (
            "SparkWatchdPowerDeliveryFault",
            "warning",
            None,
            c.dur(120),
            _anomaly(c, "power_delivery"),
            "Clocks pinned low at cool temperature on {{ $labels.instance }} (power delivery)",
            "SM clocks are pinned low at low power and a cool temperature with no throttle reason bits: "
            "a power-delivery fault, not a thermal throttle.",
        ),
        (
            "SparkWatchdHungEngine",
            "warning",
            None,
            c.dur(120),
            _anomaly(c, "hung_engine"),
            "GPU busy at low power on {{ $labels.instance }} (hung engine)",
            "Utilisation reads high while power is low and the temperature falls: the GPU engine is "
            "likely hung, not working. Not a thermal throttle.",
        ),
        # ---- driver faults (diagnose/xid.py marks which Xids need a reset, reboot or power cycle) ----
        # gotcha "driver": a fatal Xid page inhibits the Xid warning of the same Spark, not unrelated warnings.
        (
            "SparkWatchdGpuXidFatal",
            "critical",
            "driver",  # scopes the Alertmanager inhibition to driver faults
            "0s",
            _xids(c, "=~", 900),
            "GPU {{ $labels.gpu }} on {{ $labels.instance }} reported fatal Xid {{ $labels.xid }}",
            "The GPU driver reported an Xid whose resolution in NVIDIA's Xid catalog is a GPU reset or a "
            "node reboot (79: fell off the bus; 119/120: GSP firmware; 48/95: uncorrectable memory errors), or "
            'a code outside the table (xid="other": possibly fatal). The event on the status page names the '
            "fault and the next step.",
        ),
        (
            "SparkWatchdGpuXid",
            "warning",
            "driver",  # scopes the Alertmanager inhibition to driver faults
            "0s",
            _xids(c, "!~", 900),
            "GPU {{ $labels.gpu }} on {{ $labels.instance }} reported Xid {{ $labels.xid }}",
            "The GPU driver reported an Xid whose resolution is none or restarting the application (13, 31: "
            "a kernel crashed; 43: a context died). The GPU keeps working.",
        ),
        (
            "SparkWatchdDriverOutOfMemory",
            "warning",  # healthy vLLM starts log it too; SparkWatchdUnifiedMemory pages on the memory signals
            "G3",
            "0s",
            _events(c, "driver_oom", 1800),
            "The GPU driver ran out of unified memory on {{ $labels.instance }} (NV_ERR_NO_MEMORY)",
            "The kernel log shows NVRM NV_ERR_NO_MEMORY: the driver could not allocate from the unified "
            "pool. With memory to spare (a server's start-up) it is harmless; under pressure owners report "
            "a whole-host wedge next, and G3 goes critical on the memory signals.",
        ),
        (
            "SparkWatchdPcieFatal",
            "critical",
            "driver",  # scopes the Alertmanager inhibition to driver faults
            "0s",
            _events(c, "pcie_fatal", 1800),
            "PCIe AER fatal error on {{ $labels.instance }}",
            "The kernel logged an uncorrectable (fatal) PCIe error: a link went down. On a dual-Spark "
            "pair the ConnectX-7 link can soft-lock the head node.",
        ),
        (
            "SparkWatchdFirmwarePowerLimit",
            "warning",
            None,
            c.dur(300),
            _anomaly(c, "power_limit"),
            "A board firmware power limit is slowing training on {{ $labels.instance }}",
            "The training step time rose well above its baseline with no thermal signature while the GB10 "
            "board's pl1/syspl1 power controller sits at its limit (spbm board telemetry): the platform's "
            "power limit, not heat, and NVML shows no reason for it.",
        ),
        (
            "SparkWatchdNvmlLost",
            "warning",
            None,
            c.dur(120),
            f"sparkwatchd_source_up{nvml} == 0\n"
            f"and on (job, instance)\nmax_over_time(sparkwatchd_source_up{nvml}[{c.win(21600)}]) == 1",
            "spark-watchd lost NVML on {{ $labels.instance }}",
            "NVML answered before and now fails: GPU power, temperature and clocks are blind, so G4 cannot "
            "be judged (finding unknown). The driver may have been reloaded or the GPU fell off the bus.",
        ),
        (
            "SparkWatchdSourceLost",
            "warning",
            None,
            c.dur(600),
            f"sparkwatchd_source_up{other} == 0\n"
            f"and on (job, instance, source)\nmax_over_time(sparkwatchd_source_up{other}[{c.win(21600)}]) == 1",
            "spark-watchd source {{ $labels.source }} is failing on {{ $labels.instance }}",
            "A source that worked before keeps failing; the findings that need it may read unknown.",
        ),
        (
            "SparkWatchdClockCapLost",
            "warning",
            None,
            c.dur(120),
            _anomaly(c, "clock_cap_lost"),
            "The SM clock cap of {{ $labels.instance }} was lost at its last reboot",
            "The owner keeps an SM clock cap (nvidia-smi -lgc 0,CAP) against G4, and since the last boot the "
            "clock runs above it under load: the driver forgets the cap at every boot. The G4 finding names "
            "the cap and the command that restores it; `spark-watchd install-service --clock-cap CAP` makes "
            "it stick.",
        ),
        (
            "SparkWatchdLinkProblem",
            "warning",
            None,
            c.dur(120),
            f"max by (job, instance, device, port) (avg_over_time(sparkwatchd_link_problem{c.sel()}[{w5}])) >= 0.5",
            "ConnectX-7 port {{ $labels.device }} on {{ $labels.instance }} is down, slow, capped or counting errors",
            "A ConnectX-7 port that was up this boot went down, trained below 200 Gb/s, its link error "
            "counters (symbol errors, link downed, RoCE retransmits, CRC) keep rising, it carries a flat "
            "fraction of its rate under sustained traffic (capped), or it is the one loaded half of its cable "
            "(NCCL_IB_HCA names one half). A DDP/FSDP job over the link runs at its pace: a slow peer because "
            "of the link, not heat.",
        ),
        fleet_rules.straggler_alert(c),
        *serving_rules.alerts(c),
    ]
    out = []
    for name, severity, gotcha, for_, expr, summary, description in specs:
        labels = {"severity": severity}
        if gotcha:
            labels["gotcha"] = gotcha
        rule = {"alert": name, "expr": expr}
        if for_ != "0s" and parse_duration(for_) > 0:
            rule["for"] = for_
        rule["labels"] = labels
        rule["annotations"] = {
            "summary": summary,
            "description": description,
            "runbook_url": f"{c.runbook_base}#{name.lower()}",
        }
        out.append(rule)
    return out


def build_rules(ctx: Ctx | None = None) -> dict:
    """The rule file as a dict: one recording group and one alerting group."""
    c = ctx or Ctx()
    return {
        "groups": [
            {"name": "sparkwatchd.rules", "rules": recording_rules(c)},
            {"name": "sparkwatchd.alerts", "rules": alert_rules(c)},
        ]
    }


def prometheus_rule(rules: dict) -> dict:
    """The same groups wrapped as a prometheus-operator PrometheusRule."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "spark-watchd",
            "namespace": "monitoring",
            "labels": {"app.kubernetes.io/name": "spark-watchd", "release": "prometheus"},
        },
        "spec": rules,
    }


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, data: str):
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)

HEADER = "# Generated by deploy/prometheus/generate.py; edit that file, then run it.\n"
HEADER_TESTS = (
    "# Generated by deploy/prometheus/generate.py from unit_cases.py; edit that file, then run it.\n"
)


def dump(doc: dict) -> str:
    """YAML text with a do-not-edit header; multi-line expressions as literal blocks."""
    return HEADER + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=1000, allow_unicode=True)


def _render(template: str, labels: dict[str, str]) -> str:
    """Expand the `{{ $labels.x }}` references the annotations use (all they use)."""
    return re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels.get(m.group(1), ""), template)


def unit_tests(rules: dict) -> dict[str, dict]:
    """promtool test files from unit_cases.py, expected annotations filled in from the rules."""
    import unit_cases

    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"] if "alert" in r}
    files = {}
    for stem, series, checks in unit_cases.CASES:
        tests = []
        for minute, name, expected in checks:
            rule = alerts[name]  # KeyError names a case that points at a missing alert
            exp = []
            for extra in expected:
                labels = {**extra, **rule["labels"]}
                annotations = {k: _render(v, labels) for k, v in rule["annotations"].items()}
                exp.append({"exp_labels": labels, "exp_annotations": annotations})
            tests.append({"eval_time": f"{minute}m", "alertname": name, "exp_alerts": exp})
        files[stem] = {
            "rule_files": ["../rules.yml"],
            "evaluation_interval": "1m",
            "tests": [
                {
                    "interval": "1m",
                    "input_series": [{"series": k, "values": v} for k, v in series.items()],
                    "alert_rule_test": tests,
                }
            ],
        }
    return files


def outputs(ctx: Ctx | None = None) -> dict[Path, str]:
    """Every generated file and its text."""
    rules = build_rules(ctx)
    out = {RULES_PATH: dump(rules), PROMETHEUS_RULE_PATH: dump(prometheus_rule(rules))}
    for stem, doc in unit_tests(rules).items():
        out[TESTS_DIR / f"{stem}.yml"] = dump(doc).replace(HEADER, HEADER_TESTS)
    return out


def main(argv: list[str] | None = None) -> int:
    """Write (or --check) the committed files, or write one scaled rule file with --out."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the committed files differ")
    p.add_argument("--selector", default=SELECTOR)
    p.add_argument("--runbook-base", default=RUNBOOK_BASE)
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every for: and window")
    p.add_argument("--min-window", default="0s", help="floor for scaled range windows (e.g. 3s)")
    p.add_argument("--out", type=Path, help="write only the rule file here")
    a = p.parse_args(argv)
    ctx = Ctx(
        a.selector,
        a.time_scale,
        parse_duration(a.min_window) if a.min_window != "0s" else 0.0,
        a.runbook_base,
    )
    if a.out:
        a.out.write_text(dump(build_rules(ctx)))
        return 0
    stale = []
    for path, text in outputs(ctx).items():
        if a.check:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(REPO)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("out of date (run deploy/prometheus/generate.py): " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
