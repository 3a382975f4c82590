"""Launch checks, one line per gotcha: `G1 PASS: ...` (G-number, then PASS/FAIL/WARN/SKIP/INFO).

Exit status: 0 ready, 1 ready with warnings, 3 blocked (a FAIL); 2 usage error; 78 bad configuration.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import sys

from spark_watchd import __version__
from spark_watchd.app import nvml_from_env
from spark_watchd.commands import term
from spark_watchd.preflight import build_report, checks, gather, hostinfo
from spark_watchd.sample.codec import dumps_strict

EXIT = {"ready": 0, "ready-with-warnings": 1, "blocked": 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `spark-watchd preflight`."""
    parser.add_argument(
        "--python", help="interpreter whose torch/flash-attn to check (training venv, container)"
    )
    parser.add_argument("--report", metavar="FILE", help="also write env-report.json here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON instead of lines")
    parser.add_argument("--launch-config", metavar="FILE", help="launch script/config to check for G10")
    parser.add_argument("--root", default="/", help="host root for /proc, /.dockerenv... (tests, containers)")
    parser.add_argument(
        "--config", metavar="PATH", help="configuration file (its [thresholds], as the daemon's)"
    )
    parser.add_argument(
        "--probe-timeout",
        type=float,
        default=gather.PROBE_TIMEOUT_S,
        help="seconds for the interpreter probe",
    )


def collect(args: argparse.Namespace, launch_text: str | None, settings) -> list[checks.Check]:
    """Gather every fact and run every check, in G-number order, on the configured thresholds."""
    probe, probe_error = gather.run_probe(args.python, timeout=args.probe_timeout)
    # The linker cache is the running system's: only meaningful when looking at this host.
    ldconfig = gather.ldconfig_cudart12() if os.path.abspath(args.root) == "/" else []
    try:
        meminfo = hostinfo.read_meminfo(args.root)
    except (OSError, ValueError):
        meminfo = None
    fake = nvml_from_env()  # SPARK_WATCHD_FAKE_NVML: a fake GB10 for end-to-end tests and demos
    own_gpu = fake is not None or os.path.abspath(args.root) == "/"
    gpus, gpu_error = gather.nvml_snapshot(fake) if own_gpu else (None, None)
    nvml_procs = [p for g in gpus or () for p in g.get("processes", ())]
    workloads, wl_error = gather.scan_workloads(
        os.path.join(args.root, "proc"), nvml_procs, settings.thresholds
    )
    out: list[checks.Check] = []
    out += checks.g1_torch_cuda(probe, ldconfig, probe_error, explicit_python=bool(args.python))
    out += checks.g2_flash_attn(probe)
    out += checks.g3_memory(meminfo)
    if own_gpu:
        via = smi_error = None
        if gpus is None:  # NVML missing: nvidia-smi, as the daemon falls back to it
            sm = settings.sources
            smi_gpus, smi_error = gather.smi_snapshot(sm.nvidia_smi_path, sm.nvidia_smi_timeout_s)
            if smi_gpus:
                gpus, via = smi_gpus, "nvidia-smi"
        out += checks.g4_thermal(gpus, gpu_error, smi_error, via)
        if gpus:  # a cap means something only where there is a GPU to cap
            out += checks.g4_clock_cap(gather.clock_cap_unit(args.root))
    else:  # another root's tree says nothing about its GPU: not a missing GPU either
        out.append(checks.Check("G4", "SKIP", "host root given: the GPU is this machine's"))
    out += checks.g6_contention(workloads, wl_error, gather.proc_hidepid(os.path.join(args.root, "proc")))
    out += checks.g7_capability(probe)
    out += checks.g9_container(gather.container_markers(args.root))
    out += checks.g10_tensor_parallel(launch_text, os.environ, args.launch_config)
    return out


def main(args: argparse.Namespace) -> int:
    """Run the checks, print the lines (or JSON), write the report."""
    from spark_watchd.app import settings_or_say
    from spark_watchd.errors import EX_CONFIG

    settings = settings_or_say(args, "preflight")
    if settings is None:
        return EX_CONFIG
    launch_text = None
    if args.launch_config:
        try:
            with open(args.launch_config, encoding="utf-8", errors="replace") as f:
                launch_text = f.read()
        except OSError as exc:
            print(
                f"spark-watchd preflight: --launch-config {args.launch_config}: {exc.strerror}",
                file=sys.stderr,
            )
            return 2
    found = collect(args, launch_text, settings)
    report = build_report(
        found,
        host=socket.gethostname(),
        generated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        extra={"python": args.python or sys.executable, "spark_watchd_version": __version__},
    )
    if args.json:
        sys.stdout.write(dumps_strict(report, indent=2) + "\n")
    else:
        # One line per gotcha in the community's fixed format for a pipe or a script; on a terminal each
        # is folded to its width, continuation lines indented under their G-number.
        fold = sys.stdout.isatty()
        for c in found:
            print("\n".join(term.wrap(c.line(), "    ")) if fold else c.line())
        gaps = report.get("unchecked") or []
        why = f" (not checked here: {', '.join(gaps)})" if gaps else ""
        print(f"verdict: {report['verdict']}{why}", file=sys.stderr)
    if args.report:
        try:
            with open(args.report, "w", encoding="utf-8") as f:
                f.write(dumps_strict(report, indent=2))
                f.write("\n")
        except OSError as exc:
            print(f"spark-watchd preflight: --report {args.report}: {exc.strerror}", file=sys.stderr)
            return 2
    return EXIT[report["verdict"]]
