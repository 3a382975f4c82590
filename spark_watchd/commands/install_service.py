"""Placeholder for the `install_service` verb (being built)."""

import sys


def add_arguments(parser):
    parser.add_argument("rest", nargs="*")


def main(args):
    print("spark-watchd: this verb is not built yet", file=sys.stderr)
    return 1
