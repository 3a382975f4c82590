"""Run an external program safely: an argv list (never a shell), its own process group, a hard timeout."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence


def run_argv(argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
    """Run argv capturing text output; at the timeout kill its whole group and raise TimeoutExpired.

    The group kill reaches children that still hold the pipes (a hung nvidia-smi, a probe whose
    CUDA init hangs). Raises OSError when the program cannot be started.
    """
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            # A child stuck in the driver (D state) is abandoned here and reaped by a later wait.
            proc.communicate(timeout=2)
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
