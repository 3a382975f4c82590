"""`spark-watchd VERB ...`: one module per verb under spark_watchd/commands, listed in VERBS."""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from spark_watchd import __version__
from spark_watchd.errors import EX_USAGE, EXIT_CODES, ConfigError

# Explicit list (no import side effects): (verb, module under spark_watchd.commands, one-line help).
VERBS = (
    ("run", "run", "the daemon: sample, classify, serve HTTP"),
    ("once", "once", "take one sample, classify it, print it"),
    ("record", "record", "write a trace-v1 file from live sources"),
    ("replay", "replay", "classify a recorded trace offline"),
    ("demo", "demo", "run the daemon over a bundled GB10 scenario"),
    ("status", "status", "ask the running daemon what is wrong and what to do"),
    ("ack", "ack", "acknowledge a finding you accept, for a while"),
    ("preflight", "preflight", "launch checks, one line per gotcha"),
    ("plan", "plan", "UMA memory worksheet for a training job"),
    ("fabric-test", "fabric_test", "measure the fabric's throughput to a [fleet] peer (it must agree)"),
    ("thermal-log", "thermal_log", "the community's thermal CSV, from NVML"),
    ("runs", "runs", "the per-run training ledger"),
    ("report", "report", "post-mortem bundles: list them, write or open one"),
    ("install-service", "install_service", "install (or --uninstall) the systemd unit, user and config"),
)


def build_parser(only: str | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The parser of every verb, or with `only`, of that verb alone (the others listed by their help line:
    a daemon does not import the modules of the ten verbs it is not running, about 0.7 MiB)."""
    parser = argparse.ArgumentParser(
        prog="spark-watchd",
        description="Monitoring daemon for NVIDIA DGX Spark (GB10).",
        epilog=EXIT_CODES[0].upper() + EXIT_CODES[1:] + ".",
    )
    parser.add_argument("--version", action="version", version=f"spark-watchd {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    modules = {}
    for verb, modname, help_text in VERBS:
        if only is not None and verb != only:
            sub.add_parser(verb, help=help_text)
            continue
        mod = importlib.import_module(f"spark_watchd.commands.{modname}")
        p = sub.add_parser(
            verb,
            help=help_text,
            description=(mod.__doc__ or help_text).strip().splitlines()[0],
            epilog=_exit_codes(mod.__doc__ or ""),
            formatter_class=_Help,
        )
        mod.add_arguments(p)
        modules[verb] = mod
    return parser, modules


def _exit_codes(doc: str) -> str:
    """A verb's own "Exit status: ..." paragraph from its docstring, then the codes every verb shares."""
    m = re.search(r"^Exit status[^\n]*(?:\n(?!\s*\n)[^\n]*)*", doc, re.M)
    return " ".join(m.group(0).split()) if m else EXIT_CODES[0].upper() + EXIT_CODES[1:]


class _Help(argparse.HelpFormatter):
    """Each option's default where it has one worth saying (not None, False or an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        d = action.default
        if "default" in text or d is None or isinstance(d, bool) or d == [] or d is argparse.SUPPRESS:
            return text
        return text + " (default: %(default)s)"


def _unknown_verb(argv: list[str]) -> str | None:
    """A usage message for a first word that names no verb, with the closest verb when one is close."""
    word = next((a for a in argv if not a.startswith("-")), None)
    verbs = [v for v, _m, _h in VERBS]
    if word is None or word in verbs:
        return None
    import difflib  # only for a mistyped verb: the daemon does not carry it

    close = difflib.get_close_matches(word, verbs, n=1, cutoff=0.6)
    hint = f" (did you mean '{close[0]}'?)" if close else ""
    return f"spark-watchd: unknown verb '{word}'{hint}; the verbs: {', '.join(verbs)}"


def _verb(argv: list[str]) -> str | None:
    """The verb argv names (the first word that is not an option), if it is one."""
    verbs = {v for v, _m, _h in VERBS}
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in verbs else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    unknown = _unknown_verb(argv)
    if unknown is not None:
        print(unknown, file=sys.stderr)
        return EX_USAGE
    verb = _verb(argv)
    parser, modules = build_parser(verb) if verb is not None else build_parser()
    args = parser.parse_args(argv)
    if not args.verb:
        parser.print_help(sys.stderr)
        return EX_USAGE
    try:
        return int(modules[args.verb].main(args) or 0)
    except ConfigError as exc:  # e.g. a bad SPARK_WATCHD_FAKE_NVML met deep inside a verb: no traceback
        print(f"spark-watchd {args.verb}: bad configuration: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
