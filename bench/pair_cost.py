"""What the pair features cost: the link source per tick, the link and clock-cap judgements, one peer read.

    python bench/pair_cost.py [N]

Times N (default 2000) link-source collects on the GB10 ConnectX-7 fixture tree (tests/fixtures/hosts/gb10-cx7:
four RDMA devices, 41 sysfs files read each), the link verdict and the engine (with its clock-cap watch)
over the capped trace, then one fleet poll against a loopback stand-in peer serving a real status
document (the worker's cost per interval, none of it in the tick). Prints the figures; asserts nothing.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.diagnose.link import LinkWatch  # noqa: E402
from spark_watchd.diagnose.thresholds import Thresholds  # noqa: E402
from spark_watchd.sample.model import Sample  # noqa: E402
from spark_watchd.sample.trace import read_trace  # noqa: E402
from spark_watchd.sources.link import LinkSource  # noqa: E402
from spark_watchd.web.fleet import FleetWatch  # noqa: E402
from spark_watchd.web.peers import FleetSettings  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures")


def per_call_us(fn, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main(n: int) -> None:
    src = LinkSource(os.path.join(FIX, "hosts", "gb10-cx7", "sys"))
    print(f"link source collect (4 RDMA ports): {per_call_us(lambda: src.collect({}), n):.0f} us")
    link = Sample.from_dict({"ts": 0.0, **src.collect({})}).link
    watch = LinkWatch(Thresholds())
    ts = iter(range(10**9))
    us = per_call_us(lambda: watch.observe(Sample(ts=float(next(ts)), link=link)), n)
    print(f"link verdict per sample: {us:.1f} us")
    samples = list(read_trace(os.path.join(FIX, "traces", "pair", "capped_2100_45s.jsonl")))
    for label, diag in (("engine", Diagnoser),):
        d = diag()
        t0 = time.perf_counter()
        for s in samples:
            d.observe(s)
        print(f"{label} (G3/G4/G6 + link + clock cap) per sample, capped trace: "
              f"{(time.perf_counter() - t0) / len(samples) * 1e6:.0f} us")  # fmt: skip
    doc = json.dumps({"ts": 1.0, "host": "spark-b", "gpus": [{"util_pct": 62, "sm_clock_mhz": 2410, "temp_c": 71}],
                      "findings": {"G4": {"severity": "ok"}}, "memory": {}, "extras": {},
                      "processes": [{"pid": i, "cmdline": ["python3", "x"] * 8} for i in range(300)]}).encode()  # fmt: skip

    class Peer(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", str(len(doc)))
            self.end_headers()
            self.wfile.write(doc)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Peer)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    own = json.loads(doc)
    fleet = FleetWatch(FleetSettings(peers=[f"127.0.0.1:{srv.server_address[1]}"]), lambda: own)
    polls = max(20, n // 20)
    print(f"fleet poll, one peer ({len(doc) // 1024} KiB status document): "
          f"{per_call_us(fleet.poll_once, polls) / 1000:.2f} ms")  # fmt: skip
    srv.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
