#!/usr/bin/env python3
"""Resident memory of `spark-watchd run` after start with the default config, variants in alternation.

Run from the repository root:
    python bench/rss_start.py [--runs 5] [--ref REF ...] [--env NAME=VALUE ...]

Each variant is this tree (or REF of this repository, `git archive`d), or this tree with one environment
variable set (e.g. MALLOC_ARENA_MAX=16: glibc's default arena count on 2 cores, which the daemon's own cap
then leaves alone). Variants start in turn, RUNS times each, on a fresh state directory with the working
directory outside every tree (so `-m spark_watchd` imports the tree on PYTHONPATH); VmRSS is read 1.5 s after
the first /healthz 200, as bench/compare.py does. The machine's process count moves the first tick's
figure by up to a few MiB between runs, so only the alternation compares. Also prints the watched modules
each variant has loaded (read from the daemon's sys.modules at exit).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))
from _common import free_port, proc_status  # noqa: E402
from compare import previous_tree  # noqa: E402
from compare_parts import wait_ready  # noqa: E402

# Modules the default configuration does not use (tests/test_cli.py asserts they are not loaded), then
# apscheduler and the multiprocessing pool it imports (the scheduler's own cost, about 0.6 MiB).
WATCHED = ("difflib", "encodings.idna", "tomllib", "bcrypt", "yaml", "spark_watchd.web.auth",
            "spark_watchd.notify.notifier", "spark_watchd.snapshot.recorder", "spark_watchd.postmortem.html",
            "apscheduler", "multiprocessing")  # fmt: skip
DUMP = "import atexit, os, sys\natexit.register(lambda: open(os.environ['RSS_MODULES'], 'w').write(' '.join(sys.modules)))\n"


def one_start(tree: Path, env_extra: dict[str, str], tmp: str) -> tuple[int, set[str]]:
    """(VmRSS KiB 1.5 s after the first healthy answer, the modules loaded at exit) of one daemon."""
    state, site = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
    Path(site, "sitecustomize.py").write_text(DUMP)
    mods = os.path.join(site, "modules")
    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{site}", RSS_MODULES=mods, **env_extra)
    env.pop("SPARK_WATCHD_CONFIG", None)
    port = free_port()
    p = subprocess.Popen(
        [sys.executable, "-m", "spark_watchd", "run", "--listen", f"127.0.0.1:{port}", "--interval", "30",
         "--state-dir", state, "--log-level", "error"],
        env=env, cwd=state, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_ready(port, "/healthz", p)
        time.sleep(1.5)
        rss = proc_status(p.pid, "VmRSS")
    finally:
        p.terminate()
        p.wait(timeout=15)
    return rss, set(Path(mods).read_text().split()) if os.path.exists(mods) else set()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ref", action="append", default=[], help="also a REF of this repository")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="also this tree with it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        variants: list[tuple[str, Path, dict[str, str]]] = [("this tree", REPO, {})]
        variants += [(ref, previous_tree(ref, Path(tmp) / ref.replace("/", "_")), {}) for ref in args.ref]
        variants += [(kv, REPO, dict([kv.split("=", 1)])) for kv in args.env]
        rss: dict[str, list[int]] = {name: [] for name, _t, _e in variants}
        loaded: dict[str, set[str]] = {}
        for _ in range(args.runs):
            for name, tree, env in variants:
                kib, mods = one_start(tree, env, tmp)
                rss[name].append(kib)
                loaded[name] = mods
    print(f"VmRSS after start, default config, {args.runs} starts each in alternation (MiB):")
    for name, xs in rss.items():
        opt = [m for m in WATCHED if m in loaded[name]]
        print(f"  {name:22s} median {statistics.median(xs) / 1024:5.2f}  min {min(xs) / 1024:5.2f}  "
              f"max {max(xs) / 1024:5.2f}   watched modules loaded: {', '.join(opt) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
