"""The GB10-shaped libnvidia-ml.so.1 (tests/nvmlshim/): built once per session, loaded through LD_LIBRARY_PATH.

    def test_x(shim_gpu):                      # a fresh scenario file per test
        shim_gpu.write("temp=86\\n@5 fault=GPU_IS_LOST\\n")
        run_cli("once", env=shim_gpu.env())    # the real daemon, the real nvidia-ml-py, the shim underneath

The library is compiled from tests/nvmlshim/*.c against NVIDIA's nvml.h from the `nvidia-nvml-dev` wheel
(the `test` extra) with the system C compiler. Without either the tests skip, except in CI
(SPARK_WATCHD_REQUIRE_E2E=1), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from importlib import metadata
from pathlib import Path

import pytest

from tests.conftest import REPO, require_binary

SOURCE_DIR = REPO / "tests" / "nvmlshim"
SOURCES = ("shim.c", "events.c", "scenario.c")
LIBRARY = "libnvidia-ml.so.1"
# -Wmissing-prototypes -Werror: every exported function must match a declaration in NVIDIA's header.
CFLAGS = ("-shared", "-fPIC", "-O1", "-Wall", "-Wextra", "-Werror", "-Wmissing-prototypes", "-pthread")


def nvml_header_dir() -> Path | None:
    """The include directory of the installed nvidia-nvml-dev wheel (None when it is not installed)."""
    try:
        files = metadata.files("nvidia-nvml-dev") or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if f.name == "nvml.h" and f.parent.name == "include":
            return Path(str(f.locate())).parent
    return None


def build_shim(out_dir: Path, *, legacy: bool = False, cc: str = "cc", include: Path | None = None) -> Path:
    """Compile the shim into out_dir/libnvidia-ml.so.1 and return out_dir (what LD_LIBRARY_PATH names).

    legacy: a pre-R510 library (no _v3 process lists, no nvmlDeviceGetTemperatureV, no ...EventReasons).
    """
    include = include or nvml_header_dir()
    if include is None:
        raise FileNotFoundError("nvml.h not found: install nvidia-nvml-dev (the `test` extra)")
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [cc, *CFLAGS, f"-I{include}", f"-Wl,-soname,{LIBRARY}", "-o", str(out_dir / LIBRARY)]
    argv += ["-DSHIM_LEGACY"] if legacy else []
    argv += [str(SOURCE_DIR / s) for s in SOURCES]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"building the NVML shim failed:\n{' '.join(argv)}\n{done.stderr}")
    return out_dir


class ShimGpu:
    """One test's GPU: the scenario file (rewritten atomically; each rewrite restarts its clock) and the
    environment that makes a subprocess load the shim instead of any installed driver."""

    def __init__(self, lib_dir: Path, scenario: Path):
        self.lib_dir = lib_dir
        self.scenario = scenario
        self.write("")

    def write(self, text: str) -> None:
        tmp = self.scenario.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.scenario)

    def env(self, **extra: str) -> dict:
        """For run_cli / running_daemon: the shim first on the library path, no fake NVML, no journal."""
        path = os.environ.get("LD_LIBRARY_PATH")
        env = {
            "LD_LIBRARY_PATH": str(self.lib_dir) + (os.pathsep + path if path else ""),
            "NVML_SHIM_SCENARIO": str(self.scenario),
            "SPARK_WATCHD_FAKE_NVML": "",
            "SPARK_WATCHD_SOURCES__JOURNALCTL_PATH": "",  # this machine's kernel log is not the test's
        }
        env.update(extra)
        return env


def _built(tmp_path_factory, legacy: bool) -> Path:
    cc = shutil.which("cc") or require_binary("gcc")  # Debian's gcc package provides cc
    if nvml_header_dir() is None:
        if os.environ.get("SPARK_WATCHD_REQUIRE_E2E"):
            pytest.fail("nvml.h is required in CI: install the `test` extra (nvidia-nvml-dev)")
        pytest.skip("nvidia-nvml-dev not installed (no nvml.h)")
    t0 = time.monotonic()
    out = build_shim(
        tmp_path_factory.mktemp("nvmlshim-legacy" if legacy else "nvmlshim"), legacy=legacy, cc=cc
    )
    print(f"NVML shim built in {time.monotonic() - t0:.2f} s: {out / LIBRARY}")
    return out


@pytest.fixture(scope="session")
def nvml_shim_lib(tmp_path_factory) -> Path:
    """The directory holding the built GB10-shaped libnvidia-ml.so.1."""
    return _built(tmp_path_factory, legacy=False)


@pytest.fixture(scope="session")
def nvml_shim_legacy_lib(tmp_path_factory) -> Path:
    """The same shim built as a pre-R510 library (symbols nvidia-ml-py 13 wants are missing)."""
    return _built(tmp_path_factory, legacy=True)


@pytest.fixture
def shim_gpu(nvml_shim_lib, tmp_path) -> ShimGpu:
    return ShimGpu(nvml_shim_lib, tmp_path / "scenario.nvml")


@pytest.fixture
def legacy_shim_gpu(nvml_shim_legacy_lib, tmp_path) -> ShimGpu:
    return ShimGpu(nvml_shim_legacy_lib, tmp_path / "scenario.nvml")
