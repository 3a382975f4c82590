"""`spark-watchd fabric-test [--peer NAME] [--bytes N] [--seconds S]`: the fabric's throughput to a peer, measured.

Moves a fixed amount of zeros (default 1 GiB, at most `--seconds`) to one `[fleet]` peer's daemon, which
must agree (its own `[fleet] fabric_test = true`, and this Spark's address among its peers), and prints the
Gb/s it received. Configure the peer by its ConnectX-7 address and the bytes cross that link. Exit 0 with a
figure; 3 when the peer refuses, cannot be reached or no peer is configured (web/fabric_test.py).
"""

from __future__ import annotations

import sys

from spark_watchd.errors import EX_USAGE

UNKNOWN = 3


def add_arguments(parser) -> None:
    parser.add_argument("--config", help="configuration file whose [fleet] peers to use")
    parser.add_argument("--peer", help="the peer's name in [fleet] peers (default: the first)")
    parser.add_argument("--bytes", type=int, default=1 << 30, help="bytes to move (default 1 GiB)")
    parser.add_argument("--seconds", type=float, default=5.0, help="stop after this long (default 5)")


def main(args) -> int:
    from spark_watchd.app import settings_for
    from spark_watchd.web.fabric_test import FabricTestError, measure
    from spark_watchd.web.peers import parse_peer

    if args.bytes < 1 or not 0 < args.seconds <= 30:
        print("fabric-test: --bytes must be positive and --seconds in (0, 30]", file=sys.stderr)
        return EX_USAGE
    fleet = settings_for(args).fleet
    peers = [parse_peer(p) for p in fleet.peers]
    if not peers:
        print(
            'fabric-test: no [fleet] peers configured (config.toml: [fleet] peers = ["spark-b=10.0.0.2:9761"])'
        )
        return UNKNOWN
    chosen = [p for p in peers if args.peer in (None, p.name)]
    if not chosen:
        print(f"fabric-test: no peer named {args.peer!r} (peers: {', '.join(p.name for p in peers)})")
        return UNKNOWN
    try:
        r = measure(chosen[0], fleet, args.bytes, args.seconds)
    except FabricTestError as exc:
        print(f"fabric-test: {exc}")
        return UNKNOWN
    print(
        f"fabric-test to {r.peer} ({r.address}): {r.received_bytes / 2**30:.2f} GiB received of "
        f"{r.sent_bytes / 2**30:.2f} GiB sent in {r.seconds:.2f} s: {r.gbps:.2f} Gb/s"
    )
    return 0
