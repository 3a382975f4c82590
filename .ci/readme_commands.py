#!/usr/bin/env python3
"""Print one of the README's two opening commands exactly as written (`install` or `test`).

.ci/run executes what this prints, so CI runs the README's commands verbatim and cannot drift from them.
"""

import sys
from pathlib import Path

MARKERS = {"install": "# install and run the daemon", "test": "# run the tests"}


def command(which: str, readme: str) -> str:
    """The README line whose trailing comment starts with MARKERS[which], without that comment."""
    marker = MARKERS[which]
    for line in readme.splitlines():
        if marker in line:
            return line.split(marker, 1)[0].strip()
    raise SystemExit(f"README.md has no line with {marker!r}")


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in MARKERS:
        raise SystemExit(f"usage: {sys.argv[0]} {{{'|'.join(MARKERS)}}}")
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    print(command(sys.argv[1], readme))
