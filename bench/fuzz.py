#!/usr/bin/env python3
"""Long fuzz run of the hostile-input surfaces (prints figures; exit 1 if anything crashed).

usage: python bench/fuzz.py [--n 100000] [--seed 1] [--pages-every 200] [--peers-http-every 50]

Mutates real trace lines (a float where a counter is an int, a string where a number is, a list where
an object is, 1e400, 400-digit integers, deep nesting, dropped keys, cut lines), /proc texts (meminfo,
vmstat, pressure, /proc/PID/stat) and config files, and feeds each to the code that reads it:
  trace line  -> parse_line -> Sample.from_dict -> Diagnoser.observe  (every --pages-every-th one also
                 through a replaying Daemon with /metrics, /api/v1/status, /api/v1/workloads and / answered)
  /proc text  -> the parser: data within 64 bits, or a ValueError
  config text -> load_settings: Settings, or a ConfigError
  bundle manifest -> beside a good bundle: `report` (list, --json, --last), GET /api/v1/postmortem and
                 /postmortem/latest, and pruning: the good bundle listed and served, every answer strict
                 JSON (no NaN/Infinity), the bad one skipped, the cap kept (--manifests, default n/4)
  exposition  -> each server's parser (vLLM, SGLang, llama.cpp, TensorRT-LLM text, Ollama /api/ps), two
                 scrapes -> a reading: figures, or an ExpositionError; a reading must be strict JSON
  peer status document (issue 29) -> web/peerdoc.peer_status: the pair view's part, or a PeerError; what is
                 accepted (and this daemon's own document mutated alike) through FleetWatch.poll_once,
                 GET /api/v1/fleet (200, strict JSON, sentences within 300 characters) and `status --fleet`'s
                 render; every --peers-http-every-th one read over loopback HTTP by the real PeerClient
  server answer (issue 29) -> sources/serving_parse (vLLM, SGLang, llama.cpp, TensorRT-LLM text; Ollama's
                 /api/ps): figures, or an ExpositionError; accepted ones made a ServingReading over the real
                 one before it, written as JSON (must be strict) and checked as a trace-v1 sample
Anything else (a traceback, a 500, an out-of-range value let through) is a crash, printed with its site.
The CI-sized versions of these checks are the hypothesis tests in tests/.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spark_watchd.app import build  # noqa: E402
from spark_watchd.config import load_settings  # noqa: E402
from spark_watchd.diagnose.engine import Diagnoser  # noqa: E402
from spark_watchd.errors import ConfigError  # noqa: E402
from spark_watchd.sample.model import Sample  # noqa: E402
from spark_watchd.sample.trace import TraceError, parse_line  # noqa: E402
from spark_watchd.sources import parsers  # noqa: E402
from spark_watchd.sources.procfs import parse_stat  # noqa: E402
from spark_watchd.sources.replay import ReplayFeed  # noqa: E402
from spark_watchd.web.http import Request  # noqa: E402
from tests.support.jsonpaths import json_paths  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "spark_watchd" / "scenarios" / "eviction.jsonl"
HOST = REPO / "tests" / "fixtures" / "hosts" / "gb10-eviction" / "proc"
PAGES = ("/metrics", "/api/v1/status", "/api/v1/workloads", "/")
CONFIG = '[daemon]\ninterval = 10\nstate_dir = "/tmp/x"\n\n[sources]\nproc_root = "/proc"\n\n[notify]\nheaders = {a = "b"}\n'


def _bad_value(rng: random.Random, old):
    deep = rng.choice([10, 1000, 100_000])
    return rng.choice(
        [
            lambda: old + 0.5 if isinstance(old, float) or (type(old) is int and abs(old) < 2**53) else 1.5,
            lambda: str(old),
            lambda: [old],
            lambda: {"x": old},
            lambda: float("inf"),  # what 1e400 decodes to
            lambda: 10**400,
            lambda: -(10**30),
            lambda: None,
            lambda: True,
            lambda: "",
            lambda: json.loads("[" * min(deep, 900) + "]" * min(deep, 900)),
            # Right type, extreme value: what gets past the parser and must not break what follows.
            lambda: 0 if isinstance(old, int) else 0.0,
            lambda: 2**63 if isinstance(old, int) and not isinstance(old, bool) else old,
            lambda: 1e300 if isinstance(old, float) else old,
            lambda: type(old)() if isinstance(old, (list, dict, str)) else old,
        ]
    )()


def mutate_line(rng: random.Random, base: dict, paths: list) -> str:
    """One hostile trace line built from a real one."""
    kind = rng.random()
    if kind < 0.05:
        n = rng.choice([1000, 100_000])
        return '{"v": 1, "ts": 1, "gpus": ' + "[" * n + "]" * n + "}"
    if kind < 0.10:
        line = json.dumps(base)
        return line[: rng.randrange(1, len(line))]
    if kind < 0.13:
        return json.dumps(base).replace("1764", "1e400", 1)
    return json.dumps(_break_paths(rng, base, lambda: rng.choice(paths)))


def _break_paths(rng: random.Random, base, pick):
    """A copy of base with one to three of its paths (from pick()) dropped or given a _bad_value."""
    obj = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        path = pick()
        cur = obj
        try:
            for key in path[:-1]:
                cur = cur[key]
            if rng.random() < 0.15 and isinstance(cur, dict):
                cur.pop(path[-1], None)
            else:
                cur[path[-1]] = _bad_value(rng, cur[path[-1]])
        except (KeyError, IndexError, TypeError):
            pass
    return obj


def mutate_text(rng: random.Random, text: str) -> str:
    """A /proc or config text with a few tokens replaced by hostile ones."""
    if rng.random() < 0.3:  # keep most of the text whole so well-formed lines reach the checks
        tokens = text.split("\n")
        i = rng.randrange(len(tokens))
        tokens[i] = tokens[i].replace(rng.choice("0123456789"), rng.choice(["9" * 25, "1.5", "-", ""]), 1)
        return "\n".join(tokens)
    tokens = text.split(" ")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(tokens))
        tokens[i] = rng.choice(
            [
                "9" * 400,
                "nan",
                "inf",
                "-1",
                "1e400",
                "(",
                ")",
                "",
                "\0",
                "1.5",
                "[" * 200,
                "{a={b={c={d={e={f={g=1}}}}}}}",
                "\n",
            ]
        )
    return " ".join(tokens)


def _in_range(out) -> bool:
    stack = [out]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and not (-(2**63) <= v <= 2**64 - 1):
            return False  # also NaN, for which every comparison is false
    return True


def _strict_json(text: str):
    """json.loads refusing NaN and Infinity, which are not JSON."""

    def refuse(name):
        raise ValueError(f"non-JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def mutate_manifest(rng: random.Random, base: dict) -> bytes:
    """One hostile manifest.json built from a real one."""
    kind = rng.random()
    text = json.dumps(base)
    if kind < 0.08:
        return text[: rng.randrange(0, len(text))].encode()  # truncated (a crash mid-write)
    if (
        kind < 0.18
    ):  # numbers Python's json reads but no bundle has: 1e999 is inf, NaN and Infinity are not JSON
        key = rng.choice(['"bytes": ', '"samples": ', '"ts": '])
        head, _, tail = text.partition(key)
        value = rng.choice(["1e999", "-1e999", "NaN", "Infinity", "1e12", "-1", "1" + "0" * 400])
        return (head + key + value + tail[tail.find(",") if "," in tail else len(tail) :]).encode()
    if kind < 0.22:
        n = rng.choice([1000, 200_000])
        return ('{"trigger": ' + "[" * n + "]" * n + "}").encode()
    if kind < 0.25:
        return rng.choice([b"\xff\xfe\x00", b"", b"null", b"[]", b'"x"', b"1e999", b" " * (300 << 10)])
    paths = [p for p in json_paths(base) if p]
    obj = _break_paths(rng, base, lambda: rng.choice(paths))
    try:
        return json.dumps(obj).encode()
    except ValueError:  # 10**400 is past json.dumps's int-to-str limit: a hand-written one, then
        return json.dumps({**base, "samples": 0}).replace('"samples": 0', '"samples": 1' + "0" * 400).encode()


def fuzz_bundle_manifests(rng: random.Random, n: int, tmp: Path, crash, stats: Counter) -> None:
    """Bad manifests beside a good bundle through report, the post-mortem API and pruning (self-contained)."""
    import contextlib
    import io
    import shutil
    from argparse import Namespace

    from spark_watchd.commands import report
    from spark_watchd.postmortem.bundle import list_bundles, prune
    from spark_watchd.web import postmortem as postmortem_web

    quiet = type("Quiet", (), {"warning": lambda self, *a, **k: None})()
    state = tmp / "pm"
    root = state / "bundles"
    good = root / "20251124T000000Z-oom_kill"
    good.mkdir(parents=True)
    base = {"version": 1, "trigger": {"kind": "oom_kill", "gotcha": "G3", "ts": 1763942400.0,
            "summary": "The kernel OOM killer killed python3"}, "samples": 60, "first_ts": 1763940600.0,
            "last_ts": 1763942400.0, "bytes": 4096, "files": ["trace.jsonl", "report.html", "manifest.json"]}  # fmt: skip
    (good / "manifest.json").write_text(json.dumps(base))
    (good / "report.html").write_text("<!doctype html><title>good</title>")
    routes = {r.path: r.handler for r in postmortem_web.routes(root)}
    req = Request("GET", "/", {}, {}, b"", "127.0.0.1")
    for i in range(n):
        bad = root / f"20251125T{i % 240000:06d}Z-oom_kill"
        bad.mkdir()
        raw = mutate_manifest(rng, base)
        (bad / "manifest.json").write_bytes(raw)
        (bad / "report.html").write_text("<!doctype html><title>bad</title>")
        where = "list_bundles"
        try:
            listed = list_bundles(root, quiet)
            if good.name not in [b.name for b in listed]:
                crash("the good bundle not listed", raw[:200].decode("utf-8", "replace"))
            stats["manifest " + ("listed" if bad.name in [b.name for b in listed] else "skipped")] += 1
            where = "report --json"
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                code = report.main(
                    Namespace(bundle=None, last=False, out=None, json=True, state_dir=str(state), config=None)
                )
            _strict_json(out.getvalue())
            where = "report (list)"
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code |= report.main(
                    Namespace(
                        bundle=None, last=False, out=None, json=False, state_dir=str(state), config=None
                    )
                )
                code |= report.main(
                    Namespace(bundle=None, last=True, out=None, json=False, state_dir=str(state), config=None)
                )
            if code != 0:
                crash("report exit", raw[:200].decode("utf-8", "replace"))
            stats["report answers (3 forms)"] += 1
            where = "GET /api/v1/postmortem"
            resp = routes["/api/v1/postmortem"](req)
            doc = _strict_json(resp.body.decode())
            if resp.status != 200 or good.name not in [b["name"] for b in doc["bundles"]]:
                crash(f"api {resp.status}", raw[:200].decode("utf-8", "replace"))
            where = "GET /postmortem/latest"
            resp = routes["/postmortem/latest"](req)
            if resp.status != 200:
                crash(f"latest {resp.status}", raw[:200].decode("utf-8", "replace"))
            stats["strict-JSON API answers"] += 1
        except Exception:
            crash(where, traceback.format_exc(limit=-2))
        if i % 10 == 9:  # the cap holds with the bad ones among them
            try:
                prune(root, keep=5, max_bytes=1 << 30, log=quiet)
                left = [p for p in root.iterdir() if not p.name.startswith(".")]
                if len(left) > 5:
                    crash("prune let the count past its cap", str(len(left)))
                stats["prune passes (cap kept)"] += 1
            except Exception:
                crash("prune", traceback.format_exc(limit=-2))
            # the next round starts from the good bundle alone (pruning took the oldest: the good one)
            for p in root.iterdir():
                if p != good:
                    shutil.rmtree(p, ignore_errors=True)
            if not good.exists():
                good.mkdir()
                (good / "manifest.json").write_text(json.dumps(base))
                (good / "report.html").write_text("<!doctype html><title>good</title>")


def serving_bases(seconds: float) -> dict[str, str]:
    """Each server kind's real-shaped answer (tests/support/serving_fakes.py) after `seconds` of work."""
    from tests.support.serving_fakes import FakeEngine

    bases = {}
    for kind in ("vllm", "sglang", "llamacpp", "trtllm", "ollama"):
        eng = FakeEngine(kind)
        eng.step(seconds)
        path = "/api/ps" if kind == "ollama" else "/prometheus/metrics" if kind == "trtllm" else "/metrics"
        bases[kind] = eng.body(path)[2].decode()
    return bases


def fuzz_expositions(rng: random.Random, n: int, stats: Counter, crash) -> None:
    """Mutated server expositions (engines duplicated, values made huge, NaN, negative) through the parsers."""
    from spark_watchd.sources.serving import finite, reading
    from spark_watchd.sources.serving_endpoints import Endpoint
    from spark_watchd.sources.serving_parse import ExpositionError, parse_metrics, parse_ollama

    bases = serving_bases(5)
    for i in range(n):
        kind = list(bases)[i % len(bases)]
        texts = []
        for _ in range(2):
            t = bases[kind]
            if kind != "ollama" and rng.random() < 0.5:  # a second engine: its series summed with the first's
                t = t + "\n".join(
                    ln.replace('engine="0"', 'engine="1"') for ln in t.splitlines() if "{" in ln
                )
            texts.append(mutate_text(rng, t.replace(" 1.0", " 1e308") if rng.random() < 0.2 else t))
        try:
            parse = parse_ollama if kind == "ollama" else lambda t, k=kind: parse_metrics(k, t)
            a, b = parse(texts[0]), parse(texts[1])
        except ExpositionError:
            stats["exposition refused (server down)"] += 1
            continue
        except Exception:
            crash(f"parse {kind} exposition", traceback.format_exc(limit=-2))
            continue
        try:
            ep = Endpoint(f"{kind}:1", kind, "http://127.0.0.1:1", 1)
            r = finite(reading(ep, 2.0, b, a, 1.0))
            json.dumps(r.to_dict(), allow_nan=False)
            stats["exposition read (strict JSON)"] += 1
        except Exception:
            crash(f"{kind} reading", traceback.format_exc(limit=-2))


# ---- issue 29: peer documents and hostile server answers (self-contained: their own bases and checks) ----


_HOSTILE_NUMBERS = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e400",
    "9" * 400,
    "1e308",
    "-0.0",
    "true",
    '"7"',
)


def _mutate_doc(rng: random.Random, base: dict, paths: list, hot: list) -> bytes:
    """One hostile peer document built from a real /api/v1/status document."""
    kind = rng.random()
    text = json.dumps(base)
    if kind < 0.05:
        n = rng.choice([65, 1000, 200_000])
        return ('{"gpus": ' + "[" * n + "]" * n + "}").encode()
    if kind < 0.10:
        return text[: rng.randrange(1, len(text))].encode()
    if kind < 0.25:  # a number of the text replaced by a hostile token (NaN, 1e999, 400 digits ...)
        digits = [i for i, ch in enumerate(text) if ch.isdigit() and not text[i - 1].isdigit()]
        i = rng.choice(digits)
        j = i
        while j < len(text) and (text[j].isdigit() or text[j] in ".e+-"):
            j += 1
        return (text[:i] + rng.choice(_HOSTILE_NUMBERS) + text[j:]).encode()
    if kind < 0.30:  # the break-7 peer: a huge string where an enumerated one goes
        obj = copy.deepcopy(base)
        where = rng.choice(
            [("worst",), ("host",), ("findings", "G4", "severity"), ("findings", "G4", "summary")]
        )
        cur = obj
        for k in where[:-1]:
            cur = cur.setdefault(k, {})
        cur[where[-1]] = "x" * rng.choice([301, 100_000, 3_900_000])
        return json.dumps(obj).encode()
    obj = _break_paths(rng, base, lambda: rng.choice(hot if rng.random() < 0.7 else paths))
    return json.dumps(obj).encode()  # inf from _bad_value is written as Infinity, as a bad peer would


def _bounded_view(answer: dict) -> str | None:
    """Why the /api/v1/fleet answer is not bounded (a long string, a number out of range), or None."""
    stack = [answer.get("view"), answer.get("history")]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, str) and len(v) > 1000:
            return f"a string of {len(v)} characters kept"
        elif isinstance(v, float) and not math.isfinite(v):
            return "a non-finite number kept"
    return None


def fuzz_peers(rng: random.Random, n: int, http_every: int, crash, stats: Counter) -> None:
    """Mutated peer documents through the peer reader, the pair view, its route and `status --fleet`."""
    from spark_watchd.commands import status_fleet
    from spark_watchd.logs import configure_logging
    from spark_watchd.sample.text import printable_tree
    from spark_watchd.web import api
    from spark_watchd.web.fleet import FleetWatch
    from spark_watchd.web.fleet import routes as fleet_routes
    from spark_watchd.web.peerdoc import PeerError, peer_status
    from spark_watchd.web.peers import FleetSettings
    from tests.support.fakes import CaptureServer, Reply

    configure_logging("error")  # each refused peer is logged once per change: 25,000 warnings here
    d = build(load_settings(None, environ={}), replay=ReplayFeed(str(TRACE), speed=1e6), state_dir=None)
    try:
        for _ in range(5):
            d.tick()
        base = json.loads(json.dumps(api.status_dict(d), default=str))
    finally:
        d.close()
    paths = [p for p in json_paths(base) if p]
    wanted = ("ts", "host", "fresh", "worst", "gpus", "memory", "throughput", "findings", "extras")
    hot = [p for p in paths if p[0] in wanted and len(p) <= 4]
    served = [b"{}"]
    srv = CaptureServer(lambda _req: Reply(200, served[0], {"Content-Type": "application/json"}))
    settings = FleetSettings(peers=[f"spark-b={srv.url}"], timeout_s=5)
    try:
        for i in range(n):
            body = _mutate_doc(rng, base, paths, hot)
            own = base
            if rng.random() < 0.2:  # this daemon's own document mutated alike (it is decoded leniently)
                try:
                    own = json.loads(_mutate_doc(rng, base, paths, hot))
                except (ValueError, RecursionError):
                    own = base
            w = FleetWatch(settings, lambda own=own: own)
            over_http = http_every and i % http_every == 0
            try:
                if over_http:
                    served[0] = body
                    stats["peer documents served over loopback HTTP to the real client"] += 1
                    doc = w.clients[0].status()
                else:
                    doc = peer_status(body)
                stats["peer documents accepted"] += 1
            except PeerError as exc:
                stats["peer documents refused (that peer down)"] += 1
                doc = exc
            except Exception:
                crash("peer_status", traceback.format_exc(limit=-2))
                continue
            w.clients[0].status = (lambda doc=doc: doc) if isinstance(doc, dict) else _raiser(doc)
            try:
                w.poll_once()
                (route,) = fleet_routes(w)
                resp = route.handler(Request("GET", "/api/v1/fleet", {}, {}, b"", "127.0.0.1"))
                if resp.status != 200:
                    crash(f"/api/v1/fleet {resp.status}", body[:200].decode("utf-8", "replace"))
                    continue
                answer = _strict_json(resp.body)
                why = _bounded_view(answer)
                if why:
                    crash(f"/api/v1/fleet unbounded: {why}", body[:200].decode("utf-8", "replace"))
                status_fleet.render(printable_tree(answer), cols=100)
                status_fleet.worst(answer)
                stats["pair views answered as strict JSON"] += 1
            except ValueError as exc:
                crash("/api/v1/fleet not JSON", f"{exc}: {body[:200]!r}")
            except Exception:
                crash("pair view", traceback.format_exc(limit=-2))
            finally:
                w.close()
    finally:
        srv.close()


def _raiser(exc: Exception):
    def read():
        raise exc

    return read


_EXPO_TOKENS = (
    "1e308",
    "NaN",
    "+Inf",
    "-Inf",
    "1e999",
    "9" * 400,
    "-1",
    "0",
    "",
    "{",
    "}",
    '"',
    "\\",
    "\n",
    "#",
)


def _mutate_exposition(rng: random.Random, text: str) -> str:
    """A server's exposition with hostile values, labels, duplicated engines and cut or broken lines."""
    lines = text.split("\n")
    kind = rng.random()
    if kind < 0.15:  # every series twice more, as two more engines at an extreme value
        out = []
        for ln in lines:
            out.append(ln)
            if ln and not ln.startswith("#") and rng.random() < 0.5:
                v = rng.choice(("1e308", "NaN", "+Inf", "1.7e308"))
                out += [ln.rsplit(" ", 1)[0].replace('engine="0"', f'engine="{e}"') + " " + v for e in (1, 2)]
        return "\n".join(out)
    if kind < 0.2:
        return text[: rng.randrange(1, len(text))]
    if kind < 0.25:  # a long label value or a long line
        i = rng.randrange(len(lines))
        lines[i] = lines[i].replace('="', '="' + "x" * rng.choice([1000, 100_000]), 1)
        return "\n".join(lines)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        if not lines[i]:
            continue
        head, _, tail = lines[i].rpartition(" ")
        if rng.random() < 0.6 and head:
            lines[i] = head + " " + rng.choice(_EXPO_TOKENS)
        else:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + rng.choice(_EXPO_TOKENS) + lines[i][j:]
    return "\n".join(lines)


def fuzz_serving_answers(rng: random.Random, n: int, crash, stats: Counter) -> None:
    """Hostile lines, labels, engines at 1e308/NaN/+Inf and nested /api/ps through the serving parsers, a
    ServingReading over the real scrape before it, strict JSON and the trace-v1 check."""
    from spark_watchd.sample.codec import dumps_strict
    from spark_watchd.sample.model import check_sample
    from spark_watchd.sample.validate import FieldError
    from spark_watchd.sources.serving import reading
    from spark_watchd.sources.serving_endpoints import Endpoint
    from spark_watchd.sources.serving_parse import ExpositionError, parse_metrics, parse_ollama

    bases = serving_bases(30.0)
    first = {k: parse_metrics(k, t) for k, t in bases.items() if k != "ollama"}
    ps = json.loads(bases["ollama"])
    ps_paths = [p for p in json_paths(ps) if p]
    for i in range(n):
        kind = list(bases)[i % len(bases)]
        try:
            if kind == "ollama":
                cur = parse_ollama(_mutate_doc(rng, ps, ps_paths, ps_paths).decode())
            else:
                cur = parse_metrics(kind, _mutate_exposition(rng, bases[kind]))
        except ExpositionError:
            stats["server answers refused (that server down)"] += 1
            continue
        except Exception:
            crash(f"parse {kind}", traceback.format_exc(limit=-2))
            continue
        stats["server answers parsed"] += 1
        try:
            ep = Endpoint(f"{kind}:8000", kind, "http://127.0.0.1:8000", 4242)
            r = reading(ep, 1030.0, cur, first.get(kind), 1000.0)
            row = _strict_json(dumps_strict(r.to_dict()))
            check_sample({"v": 1, "ts": 1030.0, "serving": [row]})
            stats["readings written as strict JSON and read back"] += 1
        except FieldError:  # a finite figure past the trace's bounds: the trace reader skips that line
            stats["readings the trace reader refuses (out of range)"] += 1
        except ValueError as exc:
            crash(f"reading of {kind} not JSON", str(exc)[:200])
        except Exception:
            crash(f"reading of {kind}", traceback.format_exc(limit=-2))


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--n", type=int, default=10_000, help="mutated trace lines (proc and config get n/4 each)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--manifests", type=int, default=None, help="mutated bundle manifests (default n/4)")
    ap.add_argument(
        "--pages-every", type=int, default=200, help="every Nth line also through a daemon's pages"
    )
    ap.add_argument(
        "--peers-http-every", type=int, default=50, help="every Nth peer document read over loopback HTTP"
    )
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    lines = TRACE.read_text().splitlines()
    bases = [json.loads(x) for x in lines[:50]]
    paths = [p for p in json_paths(bases[0]) if p and p != ("v",)]
    stats: Counter = Counter()
    crashes: Counter = Counter()
    examples: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix="sw-fuzz-"))
    settings = load_settings(None, environ={})

    def crash(site: str, detail: str) -> None:
        crashes[site] += 1
        examples.setdefault(site, detail[:300])

    t0 = time.perf_counter()
    for i in range(args.n):
        line = mutate_line(rng, rng.choice(bases), paths)
        try:
            obj = parse_line(line, "fuzz.jsonl", i + 1)
        except TraceError:
            stats["trace refused (exit 65 / skipped)"] += 1
            continue
        except Exception:
            crash("parse_line", traceback.format_exc(limit=-2))
            continue
        try:
            eng = Diagnoser()
            for b in bases[:3]:
                eng.observe(Sample.from_dict(b))
            eng.observe(Sample.from_dict(obj))
            stats["trace accepted and judged"] += 1
        except Exception:
            crash("Sample/Diagnoser", traceback.format_exc(limit=-2))
            continue
        if args.pages_every and stats["trace accepted and judged"] % args.pages_every == 1:
            trace = tmp / "t.jsonl"
            trace.write_text("\n".join([lines[0], line, lines[1]]) + "\n")
            d = build(settings, replay=ReplayFeed(str(trace), speed=1e6), state_dir=None)
            try:
                table = {r.path: r for r in d.routes if r.method == "GET"}
                for _ in range(3):
                    d.tick()
                for page in PAGES:
                    req = Request("GET", page, {}, {"accept": "text/plain"}, b"", "127.0.0.1")
                    status = table[page].handler(req).status
                    stats[f"daemon page answers ({page})"] += 1
                    if status != 200:
                        crash(f"page {page} {status}", line[:200])
            except Exception:
                crash("daemon", traceback.format_exc(limit=-2))
            finally:
                d.close()
    trace_s = time.perf_counter() - t0

    texts = {
        "meminfo": (parsers.parse_meminfo, (HOST / "meminfo").read_text()),
        "vmstat": (parsers.parse_vmstat, (HOST / "vmstat").read_text()),
        "pressure": (parsers.parse_psi, (HOST / "pressure" / "memory").read_text()),
        "uptime": (parsers.parse_uptime, "18000.52 71234.10\n"),
        "stat": (
            parse_stat,
            "100 (python3) S 1 100 100 0 -1 4194304 97 0 0 0 0 0 0 0 20 0 1 0 71380 3133440 381 5\n",
        ),
    }
    for i in range(args.n // 4):
        name = list(texts)[i % len(texts)]
        parse, text = texts[name]
        try:
            out = parse(mutate_text(rng, text))
        except ValueError:
            stats["/proc text refused (source down)"] += 1
            continue
        except Exception:
            crash(f"parse {name}", traceback.format_exc(limit=-2))
            continue
        if not _in_range(out):
            crash(f"parse {name} let an impossible value through", repr(out)[:200])
        stats["/proc text parsed"] += 1

    fuzz_expositions(rng, args.n // 4, stats, crash)

    cfg = tmp / "c.toml"
    for _ in range(args.n // 4):
        cfg.write_text(mutate_text(rng, CONFIG), encoding="utf-8", errors="surrogatepass")
        try:
            load_settings(str(cfg), environ={})
            stats["config loaded"] += 1
        except ConfigError:
            stats["config refused (exit 78)"] += 1
        except Exception:
            crash("load_settings", traceback.format_exc(limit=-2))
    m = args.n // 4 if args.manifests is None else args.manifests
    fuzz_bundle_manifests(rng, m, tmp, crash, stats)
    t1 = time.perf_counter()
    fuzz_peers(rng, args.n // 4, args.peers_http_every, crash, stats)
    fuzz_serving_answers(rng, args.n // 4, crash, stats)
    issue29_s = time.perf_counter() - t1
    total_s = time.perf_counter() - t0

    print(
        f"seed {args.seed}: {args.n} trace lines ({trace_s:.0f} s), {args.n // 4} /proc texts, {args.n // 4} "
        f"expositions, {args.n // 4} configs, {m} bundle manifests, {args.n // 4} peer documents and"
        f" {args.n // 4} hostile server answers ({issue29_s:.0f} s for those two); {total_s:.0f} s"
    )
    for k, v in sorted(stats.items()):
        print(f"  {k}: {v}")
    print(f"crashes: {sum(crashes.values())}")
    for site, n in crashes.most_common():
        print(f"  {site}: {n}\n    {examples[site]}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
