"""Ask the running daemon what is wrong and what to do: findings, evidence and advice at a glance.

Exit status (monitoring-plugin convention, for scripts): 0 ok, 1 warning, 2 critical,
3 unknown (daemon unreachable, no sample yet, stale sample, or an answer that is not a status);
a finding covered by an acknowledgement (`spark-watchd ack`) no longer counts.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import sys
import urllib.error
import urllib.request
from typing import Any

from spark_watchd.commands import term
from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.text import printable_tree

DEFAULT_URL = "http://127.0.0.1:9761"
EXIT = {"ok": 0, "warning": 1, "critical": 2, "unknown": 3}
RANK = {"unknown": -1, "ok": 0, "warning": 1, "critical": 2}
COLOUR = {"ok": "32", "warning": "33", "critical": "1;31", "unknown": "2"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `spark-watchd status`."""
    connection_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the daemon's status document as JSON")
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the severities: auto on a terminal without NO_COLOR, always, or never",
    )
    parser.add_argument(
        "--fleet", action="store_true", help="the pair view: this Spark and its [fleet] peers side by side"
    )


def connection_arguments(parser: argparse.ArgumentParser) -> None:
    """How a verb reaches the running daemon: URL, basic auth or token, CA bundle, timeout."""
    parser.add_argument(
        "--url",
        default=os.environ.get("SPARK_WATCHD_URL") or DEFAULT_URL,
        help="daemon base URL, or HOST:PORT for plain HTTP ($SPARK_WATCHD_URL)",
    )
    parser.add_argument("--user", default=os.environ.get("SPARK_WATCHD_USER"), help="basic-auth user")
    parser.add_argument(
        "--password-env",
        default="SPARK_WATCHD_PASSWORD",
        metavar="VAR",
        help="environment variable holding the basic-auth password (never on the command line)",
    )
    parser.add_argument(
        "--token-env", default="SPARK_WATCHD_TOKEN", metavar="VAR", help="bearer token variable"
    )
    parser.add_argument("--cacert", help="CA bundle for an https:// daemon with its own certificate")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for the daemon")


def fetch_status(
    args: argparse.Namespace, path: str = "/api/v1/status", key: str = "findings"
) -> dict[str, Any]:
    """GET /api/v1/status (or `path`); raises OSError/ValueError with a message naming what went wrong."""
    return call(args, "GET", path, key=key)


def call(
    args: argparse.Namespace, method: str, path: str, payload: dict | None = None, key: str | None = None
) -> dict[str, Any]:
    """One request to the daemon's API with the verb's URL, auth and TLS flags; the JSON answer.

    Raises OSError (unreachable, HTTP error with the daemon's own reason) or ValueError (not an answer).
    """
    base = args.url.strip().rstrip("/")
    if "://" not in base:  # `--url 127.0.0.1:9761`, as `--listen` is written: plain HTTP
        base = "http://" + base
    url = base + path
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Accept": "application/json"})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    password, token = os.environ.get(args.password_env), os.environ.get(args.token_env)
    if args.user:
        cred = base64.b64encode(f"{args.user}:{password or ''}".encode()).decode()
        req.add_header("Authorization", f"Basic {cred}")
    elif token:
        req.add_header("Authorization", f"Bearer {token}")
    ctx = ssl.create_default_context(cafile=args.cacert) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=args.timeout, context=ctx) as resp:
            body = resp.read(8 * 1024 * 1024)
    except urllib.error.HTTPError as exc:
        hint = f" (set --user and ${args.password_env})" if exc.code == 401 else ""
        reason = _error_of(exc.read(4096)) or exc.reason
        raise OSError(f"{url}: HTTP {exc.code} {reason}{hint}") from None
    except urllib.error.URLError as exc:
        raise OSError(f"{url}: {exc.reason}") from None
    except TimeoutError:
        raise OSError(f"{url}: no answer in {args.timeout:g} s") from None
    try:
        doc = json.loads(body)
    except ValueError:
        raise ValueError(f"{url}: answer is not JSON") from None
    except RecursionError:  # `[[[[...` 200,000 deep
        raise ValueError(f"{url}: answer is JSON nested too deep") from None
    if not isinstance(doc, dict) or (key is not None and key not in doc):
        raise ValueError(f"{url}: answer has no {key} (is this spark-watchd?)")
    return doc


def _error_of(body: bytes) -> str | None:
    """The daemon's {"error": ...} reason from an HTTP error body, if it gave one."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return str(doc["error"]) if isinstance(doc, dict) and doc.get("error") else None


def worst(doc: dict[str, Any], *, acknowledged: bool = False) -> str:
    """Overall severity: unknown when stale or without a sample, else the worst finding (with acknowledged
    True, the worst of those no acknowledgement covers: what the exit code reports)."""
    if doc.get("fresh") is False:
        return "unknown"
    findings = (doc.get("findings") or {}).values()
    known = [f.get("severity") for f in findings if f.get("severity") in RANK]
    if not known:
        return "unknown"
    if acknowledged:
        known = [
            f.get("severity") for f in findings if f.get("severity") in RANK and not f.get("acknowledged")
        ]
        return max(known, key=RANK.__getitem__) if known else "ok"
    return max(known, key=RANK.__getitem__)


def _workloads(rows: list[dict[str, Any]], cols: int) -> list[str]:
    """The workload table: kind, launcher pid and members, footprint, cap, the launcher's command line."""
    if not rows:
        return []
    columns = (
        term.Column("KIND"),
        term.Column("PID"),
        term.Column("MEMORY", ">"),
        term.Column("CAP", flex=True, min_width=10),
        term.Column("COMMAND", flex=True, min_width=12),
    )
    body = []
    for w in sorted(rows, key=lambda r: -(r.get("footprint_bytes") or 0)):
        members = w.get("members") or []
        who = f"{w.get('pid')}" + (f" +{len(members) - 1}" if len(members) > 1 else "")
        if w.get("capped") is None:
            cap = "-"
        elif w.get("capped"):
            cap = w.get("cap") or "capped"
        else:
            cap = "uncapped" + (f" {w['cap']}" if w.get("cap") else "")
        body.append(
            (
                w.get("kind", "?"),
                who,
                term.human_bytes(w.get("footprint_bytes") or 0),
                cap,
                w.get("cmdline") or "",
            )
        )
    return ["", "workloads:", *term.table(columns, body, cols)]


def _runway_line(doc: dict[str, Any]) -> str | None:
    """The budget's runway and the workloads growing fastest, from the G3 evidence (None before history)."""
    ev = ((doc.get("findings") or {}).get("G3") or {}).get("evidence") or {}
    if not ev.get("runway_known"):
        return None
    secs = ev.get("runway_s")
    mins = round((ev.get("runway_window_s") or 0) / 60)
    line = (
        "runway: budget not falling steadily"
        if secs is None
        else f"runway: {term.human_seconds(secs)} at the last {mins} minutes' rate"
    )
    growing = sorted(ev.get("workload_growth") or (), key=lambda g: -(g.get("growth_gib_per_h") or 0))
    grow = [
        f"{g.get('name', '?')} {g['growth_gib_per_h']:+.1f} GiB/h"
        for g in growing[:3]
        if g.get("growth_gib_per_h")
    ]
    return line + (f"; growth {', '.join(grow)}" if grow else "")


def _serving(rows: list[dict[str, Any]], cols: int) -> list[str]:
    """The inference servers as their own telemetry says: throughput, queue, KV use, latency, J/token."""
    if not rows:
        return []
    columns = (
        term.Column("SERVER"),
        term.Column("TOKENS/S", ">"),
        term.Column("RUN/QUEUE", ">"),
        term.Column("KV", ">"),
        term.Column("TTFT P95", ">"),
        term.Column("ITL P95", ">"),
        term.Column("J/TOKEN", ">"),
        term.Column("MODEL", flex=True, min_width=8),
    )

    def opt(v: Any, fmt: str) -> str:
        return fmt.format(v) if isinstance(v, (int, float)) else "-"

    body = []
    for r in rows:
        if not r.get("up"):
            state = "LOADING" if r.get("loading") else "DOWN"
            body.append((r.get("server", "?"), state, "", "", "", "", "", r.get("error") or "no answer"))
            continue
        models = r.get("models") or ()
        body.append(
            (
                r.get("server", "?"),
                opt(r.get("generation_tokens_per_s"), "{:,.1f}"),
                f"{opt(r.get('requests_running'), '{:.0f}')}/{opt(r.get('requests_waiting'), '{:.0f}')}",
                opt(r.get("kv_usage"), "{:.0%}"),
                opt(r.get("ttft_p95_s"), "{:.2f} s"),
                opt(
                    r.get("itl_p95_s") * 1000 if isinstance(r.get("itl_p95_s"), (int, float)) else None,
                    "{:.0f} ms",
                ),
                opt(r.get("joules_per_token"), "{:.2f}"),
                r.get("model") or (f"{len(models)} loaded" if models else r.get("kind", "")),
            )
        )
    return ["", "serving:", *term.table(columns, body, cols)]


def _head(doc: dict[str, Any]) -> list[str]:
    """Host line, memory line, one line per GPU and per training job."""
    out = []
    age = doc.get("age_seconds")
    fresh = "fresh" if doc.get("fresh") else "STALE"
    head = f"spark-watchd {doc.get('version', '?')} on {doc.get('host') or '?'} ({doc.get('mode', '?')}"
    out.append(head + (f", sample {age:.0f} s ago, {fresh})" if age is not None else ", no sample yet)"))
    mem = doc.get("memory") or {}
    if mem.get("available_bytes") is not None and mem.get("total_bytes"):
        line = f"memory: {term.human_bytes(mem['available_bytes'])} available of {term.human_bytes(mem['total_bytes'])}"
        if mem.get("budget_bytes") is not None:
            line += f" (training budget {term.human_bytes(mem['budget_bytes'])})"
        if mem.get("cma_free_bytes"):
            line += f", CmaFree {term.human_bytes(mem['cma_free_bytes'])}"
        if mem.get("swap_used_bytes") is not None:
            line += f", swap used {term.human_bytes(mem['swap_used_bytes'])}"
        out.append(line)
    if (runway := _runway_line(doc)) is not None:
        out.append(runway)
    for g in doc.get("gpus") or ():
        parts = [f"GPU {g.get('index', 0)} {g.get('name', '?')}:"]
        if g.get("temp_c") is not None:
            slow = f" (slowdown {g['slowdown_temp_c']:.0f} C)" if g.get("slowdown_temp_c") is not None else ""
            parts.append(f"{g['temp_c']:.0f} C{slow}")
        if g.get("power_w") is not None:
            parts.append(f"{g['power_w']:.1f} W")
        if g.get("sm_clock_mhz") is not None:
            parts.append(f"SM {g['sm_clock_mhz']} MHz")
        out.append(" ".join(parts))
    extras = doc.get("extras") or {}
    if isinstance(link := extras.get("link"), dict) and link.get("summary"):
        out.append(f"ConnectX-7 {link['summary']}")
    if isinstance(cap := extras.get("clock_cap"), dict) and cap.get("summary"):
        out.append(f"clock cap: {cap['summary']}")
    if isinstance(cost := extras.get("daemon_cost"), dict) and cost.get("summary"):
        out.append(str(cost["summary"]))  # the daemon's own CPU share and memory
    if isinstance(plat := extras.get("platform"), dict) and plat.get("summary"):
        out.append(f"platform: {plat['summary']}")
        if isinstance(change := plat.get("change"), dict) and change.get("summary"):
            out.append(f"changed since the last boot: {change['summary']}")
        for p in plat.get("problems") or ():
            out.append(f"known bad: {p.get('summary')}. {p.get('advice')} ({p.get('source')})")
    for t in doc.get("throughput") or ():
        parts = [f"training {t.get('job', '?')}: step {t.get('step', '?')}"]
        if t.get("step_seconds") is not None:
            parts.append(f"{t['step_seconds']:.3g} s/step")
        if t.get("tokens_per_second") is not None:
            parts.append(f"{t['tokens_per_second']:,.0f} tokens/s")
        spent = ((doc.get("extras") or {}).get("job_energy") or {}).get(t.get("job")) or {}
        if isinstance(spent.get("joules_per_token"), (int, float)):
            parts.append(f"{spent['joules_per_token']:.3g} J/token")
        out.append(", ".join(parts))
    return out


def render(doc: dict[str, Any], colour: bool, cols: int | None = None) -> str:
    """The at-a-glance text, folded to the terminal: host, memory, GPUs, workloads, findings, events."""
    cols = cols or term.width()

    def paint(text: str, severity: str) -> str:
        return f"\033[{COLOUR.get(severity, '0')}m{text}\033[0m" if colour else text

    out = [ln for line in _head(doc) for ln in term.wrap(line, "    ", cols=cols)]
    out += _workloads(list(doc.get("workloads") or ()), cols)
    out += _serving(list(doc.get("serving") or ()), cols)
    out.append("")
    for gotcha, f in sorted((doc.get("findings") or {}).items()):
        sev = str(f.get("severity", "unknown"))
        label = f"{sev.upper():<8}"
        lines = term.wrap(f"{gotcha} {label} {f.get('summary', '')}", " " * 12, cols=cols)
        out.append(lines[0].replace(label, paint(label, sev), 1))
        out += lines[1:]
        if isinstance(ack := f.get("acknowledged"), dict):
            until = term.stamp(float(ack.get("until") or 0))
            note = f": {ack['note']}" if ack.get("note") else ""
            out += term.wrap(f"acknowledged until {until}{note}", " " * 14, first="    ", cols=cols)
        if sev == "ok":
            continue
        evidence = term.evidence_lines(f.get("evidence") or {})
        if evidence:
            out += term.wrap("; ".join(evidence), " " * 14, first="    evidence: ", cols=cols)
        for step in f.get("advice") or ():
            out += term.wrap(step, " " * 12, first="    advice: ", cols=cols)
    down = [(n, s) for n, s in (doc.get("sources") or {}).items() if not s.get("up", True)]
    if down:
        out.append("")
        for name, s in down:
            text = f"source down: {name}" + (f" ({s['error']})" if s.get("error") else "")
            out += term.wrap(text, "    ", cols=cols)
    events = list(doc.get("recent_events") or ())[-5:]
    if events:
        out.append("")
        out.append("recent events:")
        shift = float((doc.get("replay") or {}).get("shift_s") or 0.0)
        for e in events:
            when = term.stamp(float(e.get("ts", 0)), shift)
            tag = f" {e['gotcha']}" if e.get("gotcha") else ""  # a workload exit belongs to no gotcha
            text = f"{when} {e.get('kind', '?')}{tag}: {e.get('summary', '')}"
            out += term.wrap(text, "    ", first="  ", cols=cols)
    overall, open_ = worst(doc), worst(doc, acknowledged=True)
    out.append("")
    acked = f" ({open_} once acknowledged findings are set aside)" if open_ != overall else ""
    out.append(
        "overall: "
        + paint(overall, overall)
        + acked
        + ("" if doc.get("fresh", True) else " (sample is stale)")
    )
    return "\n".join(out) + "\n"


def main(args: argparse.Namespace) -> int:
    """Fetch, print, exit with the worst severity."""
    if getattr(args, "fleet", False):
        from spark_watchd.commands import status_fleet

        return status_fleet.run(args)
    try:
        doc = fetch_status(args)
    except (OSError, ValueError) as exc:
        print(f"spark-watchd status: UNKNOWN: {exc}", file=sys.stderr)
        return EXIT["unknown"]
    if args.json:
        sys.stdout.write(dumps_strict(doc, indent=2) + "\n")
    else:
        colour = args.color == "always" or (
            args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        )
        # Workload argv, job names and error texts come from other users: no escape reaches the terminal.
        sys.stdout.write(render(printable_tree(doc), colour))
    return EXIT[worst(doc, acknowledged=True)]  # an acknowledged finding no longer fails a scripted check
