"""The probe run inside the interpreter under test: standard library only, one JSON object, never a raise."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from spark_watchd.preflight.gather import PROBE


def _probe(*prelude: str) -> dict:
    """Run probe.py in a fresh interpreter, optionally with modules blocked first; its JSON object."""
    code = "".join(f"import sys; sys.modules[{name!r}] = None\n" for name in prelude)
    code += f"import runpy; runpy.run_path({PROBE!r}, run_name='__main__')\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    (line,) = out.stdout.splitlines()
    return json.loads(line)


def test_the_probe_imports_only_the_standard_library():
    tree = ast.parse(Path(PROBE).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    third_party = {m for m in imported if m not in sys.stdlib_module_names}
    assert third_party <= {"torch", "flash_attn"}, third_party  # the two it looks for, inside try blocks
    assert "spark_watchd" not in imported  # a training venv need not have spark-watchd installed


def test_without_torch_the_probe_still_answers_with_the_reason():
    doc = _probe("torch")
    assert doc["python"] and doc["executable"] and doc["machine"]
    assert doc["torch"] is None and doc["torch_error"] and doc["flash_attn"] is None
    assert isinstance(doc["cudart12"], list)
