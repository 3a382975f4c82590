"""Probe run INSIDE the interpreter under test (`preflight --python PATH`): prints one JSON object.

Standard library only and no spark_watchd imports: it runs in the training venv or a container's
python, which need not have spark-watchd installed. Never raises: every failure is a field.
"""

import glob
import json
import os
import platform
import site
import sys

CUDART12 = "libcudart.so.12*"


def _site_dirs():
    dirs = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # old virtualenv's site module
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    dirs.extend(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    seen = []
    for d in dirs:
        if d and os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def _cudart12():
    """libcudart.so.12 files in site-packages (nvidia-cuda-runtime-cu12, bundled wheels) and LD_LIBRARY_PATH."""
    hits = []
    for d in _site_dirs():
        # Wheels put CUDA runtimes at nvidia/<pkg>/lib/ or <pkg>.libs/ or <pkg>/lib/: two levels suffice.
        for pattern in (
            "nvidia/*/lib/" + CUDART12,
            "*.libs/" + CUDART12,
            "*/lib/" + CUDART12,
            "*/" + CUDART12,
        ):
            hits.extend(glob.glob(os.path.join(d, pattern)))
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep):
        if d:
            hits.extend(glob.glob(os.path.join(d, CUDART12)))
    return sorted(set(hits))


def _torch():
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken wheel raising OSError on a missing .so
        return None, f"{type(exc).__name__}: {exc}"
    out = {"version": str(torch.__version__), "cuda": torch.version.cuda, "cuda_available": False}
    try:
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["device_count"] = torch.cuda.device_count()
            out["device_name"] = torch.cuda.get_device_name(0)
            out["capability"] = list(torch.cuda.get_device_capability(0))
        out["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception as exc:  # CUDA init errors: driver too old, no device node in the container
        out["cuda_error"] = f"{type(exc).__name__}: {exc}"
    return out, None


def _flash_attn():
    try:
        import flash_attn
    except ModuleNotFoundError:
        return {"installed": False}
    except Exception as exc:  # installed but broken: undefined symbol, built for another torch/CUDA
        return {"installed": True, "error": f"{type(exc).__name__}: {exc}"}
    return {"installed": True, "version": str(getattr(flash_attn, "__version__", "unknown"))}


def main():
    torch_info, torch_error = _torch()
    result = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "machine": platform.machine(),
        "torch": torch_info,
        "torch_error": torch_error,
        "flash_attn": _flash_attn() if torch_info else None,
        "cudart12": _cudart12(),
    }
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
