#!/usr/bin/env python3
"""Print a help2man include file (stdout) holding every verb's own `--help`, word for word.

build.sh runs `help2man --include` with it: spark-watchd(1) then carries the top-level `--help` as its
description and, under VERBS, each verb's usage, options and exit codes as `spark-watchd VERB --help` prints
them (argparse wraps at $COLUMNS; build.sh sets 80).
"""

from __future__ import annotations

import argparse

from spark_watchd.cli import VERBS, build_parser


def roff_literal(text: str) -> str:
    """Text shown as is in a no-fill block: backslashes escaped, no line read as a request."""
    lines = []
    for line in text.replace("\\", "\\e").replace("-", "\\-").splitlines():
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def verb_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def include() -> str:
    parser, _modules = build_parser()
    parsers = verb_parsers(parser)
    out = [
        "[VERBS]",
        "Each verb's own \\fB\\-\\-help\\fR (\\fBspark\\-watchd\\fR \\fIVERB\\fR \\fB\\-\\-help\\fR).",
    ]
    for verb, _module, _help in VERBS:
        out += [f".SS {verb}", ".nf", roff_literal(parsers[verb].format_help().rstrip()), ".fi"]
    out += [
        "[FILES]",
        ".TP",
        "\\fI/etc/spark\\-watchd/config.toml\\fR",
        "the configuration (every key, commented: \\fBpython \\-m spark_watchd.service.configdoc\\fR)",
        ".TP",
        "\\fI/var/lib/spark\\-watchd\\fR",
        "state: event journal, run ledger, post\\-mortem bundles",
        ".TP",
        "\\fI/usr/share/spark\\-watchd\\fR",
        "Prometheus alert rules and example configurations, Alertmanager example, Grafana dashboards",
        "[SEE ALSO]",
        "\\fI/usr/share/doc/spark\\-watchd/README.md.gz\\fR,",
        ".br",
        "\\fI/usr/share/doc/spark\\-watchd/operator.md.gz\\fR",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(include(), end="")
