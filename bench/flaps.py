#!/usr/bin/env python3
"""Severity flapping: for each trace, run the replay command and count finding changes per gotcha.

usage: bench/flaps.py TRACE_DIR -- CMD... ({trace} is replaced by the trace path)
  e.g. bench/flaps.py tests/fixtures/traces/layouts -- spark-watchd replay {trace} --format jsonl
Prints, per trace, the changes per gotcha and the worst rate in changes per hour; last line:
  "flaps: worst=R/h trace=NAME gotcha=G total_changes=N errors=E"
Exits 1 when any replay fails (or there are no traces), 0 otherwise.
A change is any move between ok/warning/critical/unknown from one sample to the next. A real episode
costs 2-4 changes; a judge that oscillates around a threshold costs dozens. The bar (docs/diagnosis.md,
"Steady findings"): no gotcha over 6 changes an hour on any fixture trace.
"""

import json
import subprocess
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    d = Path(argv[1])
    cmd = argv[argv.index("--") + 1 :]
    worst = (0.0, "-", "-")
    total, failed = 0, []
    traces = sorted(p for p in d.glob("*.jsonl") if not p.name.endswith(".truth.jsonl"))
    for t in traces:
        try:
            run = subprocess.run([a.replace("{trace}", str(t)) for a in cmd], capture_output=True, text=True)
        except OSError as exc:  # the command itself cannot start (not on PATH)
            run = subprocess.CompletedProcess(cmd, 127, "", str(exc))
        rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
        if run.returncode != 0 or not rows:
            why = (run.stderr.strip().splitlines() or [f"exit {run.returncode}, no output"])[-1]
            print(f"{t.name[:-6]}: ERROR replay failed (exit {run.returncode}): {why[:300]}")
            failed.append(t.name)
            continue
        if len(rows) < 2:
            continue
        hours = max((rows[-1]["ts"] - rows[0]["ts"]) / 3600, 1 / 60)
        per = {}
        for g in ("G3", "G4", "G6"):
            sev = [r["findings"][g]["severity"] for r in rows]
            per[g] = sum(1 for a, b in zip(sev, sev[1:], strict=False) if a != b)
            total += per[g]
            if per[g] / hours > worst[0]:
                worst = (per[g] / hours, t.name[:-6], g)
        print(f"{t.name[:-6]}: " + " ".join(f"{g}={n}" for g, n in per.items()) + f" over {hours:.1f} h")
    print(
        f"flaps: worst={worst[0]:.1f}/h trace={worst[1]} gotcha={worst[2]} total_changes={total} "
        f"errors={len(failed)}"
    )
    if failed or not traces:
        # A rate of 0.0/h over replays that never ran would read as a pass: fail loudly instead.
        print(f"flaps: {len(failed)} of {len(traces)} replays failed; no figure to trust", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
