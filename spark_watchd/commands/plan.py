"""Memory plan for a training job: the UMA worksheet against today's budget and the known anchors.

Exit status: 0 fits, 1 tight or unknown budget, 3 does not fit; 2 usage error; 78 bad configuration.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys

from spark_watchd.commands import term
from spark_watchd.preflight import gather, hostinfo, planner
from spark_watchd.sample.codec import dumps_strict

EXIT = {"fits": 0, "tight": 1, "unknown": 1, "does not fit": 3}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `spark-watchd plan`."""
    parser.add_argument("--params", required=True, help="parameter count: 70B, 7.5B, 500M, 70e9")
    # So `--params -5B` reaches parse_params ("must be positive") instead of argparse's "expected one argument".
    parser._negative_number_matcher = re.compile(r"^-\d+(\.\d+)?(e\d+)?[kmbtKMBT]?$")
    parser.add_argument(
        "--method",
        choices=planner.METHODS,
        help="full, lora or qlora (default qlora, said on stderr: the method moves memory the most)",
    )
    parser.add_argument(
        "--dtype",
        choices=sorted(planner.BYTES_PER_PARAM),
        help="weights in memory (default: nf4 for qlora, else bf16)",
    )
    parser.add_argument("--optimizer", choices=sorted(planner.OPTIMIZER_BYTES), default="adamw")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--trainable-params", help="override the trainable parameter count (e.g. 200M)")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1, help="micro-batch size")
    parser.add_argument("--packing", type=int, help="packed sequence length (replaces --seq-len)")
    parser.add_argument(
        "--no-gradient-checkpointing", dest="gradient_checkpointing", action="store_false", default=True
    )
    parser.add_argument("--vocab", type=int, default=planner.DEFAULT_VOCAB, help="vocabulary size (logits)")
    parser.add_argument(
        "--checkpoint-gib", type=float, help="on-disk checkpoint size in GiB read at load (default: weights)"
    )
    parser.add_argument(
        "--budget-gib", type=float, help="GiB available to training (default: MemAvailable - reserve)"
    )
    parser.add_argument(
        "--reserve-gib",
        type=float,
        help="OS reserve in GiB (default: [thresholds] os_reserve_bytes, as the daemon's budget)",
    )
    parser.add_argument("--config", metavar="PATH", help="configuration file ([thresholds] os_reserve_bytes)")
    parser.add_argument(
        "--root", default="/", help="host root to read proc/meminfo under (tests, containers)"
    )
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")


def render(plan: planner.Plan, cols: int | None = None) -> str:
    """The human worksheet table, folded to the terminal."""
    j = plan.job
    head = (
        f"{j['params'] / 1e9:g}B {j['method']}, weights {j['dtype']}, {j['optimizer']}, "
        f"{plan.architecture['tokens_per_step']} tokens/step"
        + (", gradient checkpointing" if j["gradient_checkpointing"] else "")
    )
    rows = [
        head,
        f"architecture estimate: hidden {plan.architecture['hidden']}, {plan.architecture['layers']} layers",
    ]
    rows.append(f"trainable parameters: {j['trainable_params'] / 1e6:,.1f} M")
    rows.append("")
    width = max(len(k) for k in plan.lines) + 2
    for name, gb in plan.lines.items():
        rows.append(f"  {name:<{width}}{gb:>9.2f} GiB")
    rows.append(f"  {'steady total':<{width}}{plan.steady_gib:>9.2f} GiB")
    rows.append(
        f"  {'load peak':<{width}}{plan.load_peak_gib:>9.2f} GiB  (weights + checkpoint in page cache)"
    )
    budget = "unknown" if plan.budget_gib is None else f"{plan.budget_gib:.2f} GiB"
    rows.append(f"  {'budget today':<{width}}{budget:>12}")
    rows.append("")
    a = plan.anchor
    reported = (
        f"reported about {a['reported_gib']:.1f} GiB ({a['reported_gib'] * planner.GIB / planner.GB:.0f} GB)"
        if a["reported_gib"]
        else "no peak reported"
    )
    rows.append(
        f"nearest anchor: {a['name']}: {reported}; worksheet {a['worksheet_gib']:.1f} GiB ({a['source']})"
    )
    rows.append(f"verdict: {plan.verdict}")
    out = []
    for row in rows:
        lead = row[: len(row) - len(row.lstrip())]
        out += term.wrap(row.lstrip(), lead + "    ", first=lead, cols=cols)
    for i, step in enumerate(plan.advice, 1):
        out += term.wrap(step, "     ", first=f"  {i}. ", cols=cols)
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    """Run the worksheet and print it."""
    from spark_watchd.app import settings_or_say
    from spark_watchd.errors import EX_CONFIG

    settings = settings_or_say(args, "plan")
    if settings is None:
        return EX_CONFIG
    try:
        params = planner.parse_params(args.params)
        trainable = planner.parse_params(args.trainable_params) if args.trainable_params else None
        if args.method is None:
            print(
                "spark-watchd plan: no --method given: planning qlora (pass --method full, lora or qlora)",
                file=sys.stderr,
            )
        # Job fields with a flag of the same name take it; params, method and trainable_params are parsed first.
        flags = {
            f.name: getattr(args, f.name) for f in dataclasses.fields(planner.Job) if hasattr(args, f.name)
        }
        job = planner.Job(
            **{**flags, "params": params, "method": args.method or "qlora", "trainable_params": trainable}
        )
        budget = args.budget_gib
        note = None
        if budget is None:
            reserve = args.reserve_gib
            if reserve is None:  # the daemon's own reserve, from the same configuration
                reserve = settings.thresholds.os_reserve_bytes / 2**30
            try:
                budget = hostinfo.training_budget_gib(hostinfo.read_meminfo(args.root), reserve)
            except (OSError, ValueError, KeyError) as exc:
                note = f"spark-watchd plan: no budget ({exc}); pass --budget-gib"
        # Who holds the GPU now (none: the ladder skips "stop other residents"); not scanned: said in general.
        residents, _ = gather.scan_workloads(os.path.join(args.root, "proc"), (), settings.thresholds)
        plan = planner.worksheet(job, budget, residents)
    except ValueError as exc:
        print(f"spark-watchd plan: {exc}", file=sys.stderr)
        return 2
    if note:
        print(note, file=sys.stderr)
    sys.stdout.write(dumps_strict(plan.to_dict(), indent=2) + "\n" if args.json else render(plan))
    return EXIT[plan.verdict]
