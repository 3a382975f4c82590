"""External programs: an argv list (no shell), captured text, and at the timeout the whole group killed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spark_watchd.sources.command import run_argv
from tests.support.poll import wait_until


def test_output_and_exit_code_are_captured_and_arguments_are_not_a_shell_line():
    res = run_argv(
        [sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", "$(echo no) ; x"], 10
    )
    assert res.returncode == 3 and res.stdout == "$(echo no) ; x\n"


def test_a_program_that_cannot_start_raises_oserror():
    with pytest.raises(OSError):
        run_argv(["/nonexistent/nvidia-smi"], 5)


def test_at_the_timeout_the_program_and_its_children_are_killed(tmp_path):
    pidfile = tmp_path / "child.pid"
    # The grandchild keeps the pipes open: killing only the direct child would leave it (and us) waiting.
    code = (
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_argv([sys.executable, "-c", code], 5)  # time enough to start two interpreters on a busy box
    child = int(pidfile.read_text())

    def gone() -> bool:
        try:
            with open(f"/proc/{child}/stat") as f:
                return f.read().split(") ", 1)[1].startswith("Z")  # killed, waiting for its reaper
        except FileNotFoundError:
            return True

    wait_until(gone, timeout=5, what="the grandchild killed with its group")
