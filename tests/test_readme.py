"""The README's tables say what the code does: every exported family, the event kinds, the exit codes."""

from __future__ import annotations

import importlib.util
import re

from spark_watchd.errors import EX_CONFIG, EX_DATAERR, EX_NOINPUT, EX_NOPERM, EX_SOFTWARE, EX_USAGE
from spark_watchd.export.diagnosis import EVENT_KINDS
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _families() -> set[str]:
    names = set()
    for golden in (REPO / "tests" / "golden").glob("*.prom"):
        names |= set(re.findall(r"^# TYPE (sparkwatchd_\S+) ", golden.read_text(), re.M))
    return names


def test_every_exported_family_is_in_the_readme():
    names = _families()
    assert "sparkwatchd_thermal_throttle_active" in names
    # Rows shorten later names of a group to their tail (`sparkwatchd_memory_total_bytes`, `_available_bytes`).
    missing = [
        n for n in sorted(names)
        if n[len("sparkwatchd"):] not in README and n[len("sparkwatchd_memory"):] not in README
    ]  # fmt: skip
    assert missing == []


def test_the_event_kinds_listed_are_the_exported_ones():
    row = next(ln for ln in README.splitlines() if ln.startswith("| `sparkwatchd_events_total`"))
    listed = re.findall(r"`(\w+)`", row.split("|")[2])
    assert listed[0] == "kind" and tuple(listed[1:]) == EVENT_KINDS


def test_every_exit_code_is_listed():
    para = README[README.index("Exit codes:") :][:900]
    for code in (0, EX_SOFTWARE, EX_USAGE, EX_DATAERR, EX_NOINPUT, EX_NOPERM, EX_CONFIG):
        assert re.search(rf"(?<![\d.]){code}(?![\d.])", para), code


def test_the_training_job_label_rename_is_said():
    assert "exported_job" in README


def _readme_test_line() -> str:
    return next(ln for ln in README.splitlines() if ln.endswith("# run the tests"))


def test_the_readme_test_install_pulls_no_cuda_torch():
    # `train` brings accelerate, whose torch requirement pulls CUDA wheels (5.9 GB) unless CPU torch came first.
    line = _readme_test_line()
    extras = re.search(r"pip install -e '\.\[([\w,]+)\]'", line).group(1).split(",")
    assert "test" in extras and "train" not in extras
    assert "MB" in README[README.index(line) :][:600]  # the cost is said next to the command


def _readme_commands():
    spec = importlib.util.spec_from_file_location("readme_commands", REPO / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ci_takes_the_readme_commands_verbatim_from_the_readme():
    mod = _readme_commands()
    lines = README.split("```sh", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [mod.command(w, README) for w in ("install", "test")] == [ln.split("#")[0].strip() for ln in lines]
    assert mod.command("test", README) == _readme_test_line().split("#")[0].strip()


def test_ci_runs_the_readme_commands_before_anything_it_adds():
    ci = (REPO / ".ci" / "run").read_text()
    body = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    first_own_pip = next(i for i, ln in enumerate(body) if "pip install" in ln)
    ran = [i for i, ln in enumerate(body) if '"$install_cmd"' in ln or '"$test_cmd"' in ln]
    assert len(ran) >= 2 and max(ran) < first_own_pip
    assert "readme_commands.py install" in ci and "readme_commands.py test" in ci
    # CPU torch before the train extra: accelerate's torch requirement would pull CUDA wheels otherwise.
    steps = [ln for ln in body if "pip install" in ln]
    torch_at = next(i for i, ln in enumerate(steps) if "torch" in ln)
    train_at = next(i for i, ln in enumerate(steps) if "train" in ln.split("-e", 1)[-1])
    assert torch_at < train_at


def test_the_documented_nvml_down_reason_is_the_one_the_source_gives():
    import pynvml

    from spark_watchd.sources.nvml import describe_nvml_error

    reason = describe_nvml_error(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    page_doc = (REPO / "docs" / "status-page.md").read_text(encoding="utf-8")
    assert f"`nvml down: nvmlInit failed: {reason}`" in page_doc
    assert f"nvml missing: {reason}" in " ".join(README.split())


def _built_daemon(tmp_path):
    from spark_watchd import app
    from spark_watchd.config import Settings

    return app.build(Settings(), state_dir=str(tmp_path))


def test_every_source_of_a_default_daemon_is_named_in_the_source_up_row(tmp_path):
    daemon = _built_daemon(tmp_path)
    try:
        names = {src.name for src in daemon.collector.sources}
    finally:
        daemon.close()
    row = next(ln for ln in README.splitlines() if ln.startswith("| `sparkwatchd_source_up`"))
    assert {"nvml", "meminfo", "serving"} <= names
    assert sorted(n for n in names if f"`{n}`" not in row) == []


def test_every_route_a_default_daemon_serves_is_in_the_http_table(tmp_path):
    daemon = _built_daemon(tmp_path)
    try:
        routes = {(r.method, r.path) for r in daemon.routes if not r.path.startswith("/static/")}
    finally:
        daemon.close()
    table = README[README.index("## HTTP") : README.index("TLS and basic auth for every endpoint")]
    first_cells = [ln.split("|")[1] for ln in table.splitlines() if ln.startswith("| `")]
    listed = {m for cell in first_cells for m in re.findall(r"`(GET|POST|DELETE) (/[^` ?]*)", cell)}
    assert ("GET", "/postmortem/latest") in routes
    assert sorted(routes - listed) == []
