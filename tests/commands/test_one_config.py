"""One configuration everywhere: every verb reads [thresholds] from --config and the environment, and gets
its parts from the composition root (issue 19 §7)."""

from __future__ import annotations

import ast
import json

from tests.conftest import FIXTURES, REPO, SCENARIOS, run_cli
from tests.preflight.test_gather import _proc_tree

TIB = 2**40
GB10_BARE = FIXTURES / "hosts" / "gb10-operator-bare"


def _g3(out: str) -> list[str]:
    return [json.loads(ln)["findings"]["G3"]["severity"] for ln in out.splitlines()]


def test_replay_judges_with_the_thresholds_of_the_config_file_and_the_environment(tmp_path):
    trace = str(SCENARIOS / "throttle.jsonl")
    base = run_cli("replay", trace, "--format", "jsonl")
    assert base.returncode == 0, base.stderr
    assert set(_g3(base.stdout)) == {"ok"}
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"[thresholds]\nbudget_warn_bytes = {TIB}\n")
    # A 1 TiB "thin budget" line: every sample's budget is thin, as `run --replay` with this file says.
    by_file = run_cli("replay", trace, "--format", "jsonl", "--config", str(cfg))
    assert by_file.returncode == 0, by_file.stderr
    assert set(_g3(by_file.stdout)) == {"warning"}
    by_env = run_cli(
        "replay", trace, "--format", "jsonl", env={"SPARK_WATCHD_THRESHOLDS__BUDGET_WARN_BYTES": str(TIB)}
    )
    assert by_env.stdout == by_file.stdout


def test_replay_with_a_bad_configuration_exits_78_naming_the_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[thresholds]\nbudget_warn_byte = 1\n")
    p = run_cli("replay", str(SCENARIOS / "throttle.jsonl"), "--config", str(cfg))
    assert p.returncode == 78 and "budget_warn_byte" in p.stderr and p.stdout == ""


def test_plan_takes_the_os_reserve_from_the_configuration(tmp_path):
    def budget(*extra, env=None):
        p = run_cli(
            "plan", "--params", "8B", "--method", "lora", "--root", str(GB10_BARE), "--json", *extra, env=env
        )
        assert p.returncode in (0, 1, 3), p.stderr
        return json.loads(p.stdout)["budget_gib"]

    default = budget()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f"[thresholds]\nos_reserve_bytes = {20 * 2**30}\n")
    assert abs(default - budget("--config", str(cfg)) - 16) < 0.01  # 20 GiB instead of the default 4
    assert budget(env={"SPARK_WATCHD_THRESHOLDS__OS_RESERVE_BYTES": str(20 * 2**30)}) == budget(
        "--config", str(cfg)
    )
    assert budget("--config", str(cfg), "--reserve-gib", "4") == default  # the flag still wins


def test_preflight_judges_caps_with_the_configured_line(tmp_path):
    root = tmp_path / "host"
    _proc_tree(
        root,
        {4202: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--gpu-memory-utilization", "0.6"]},
    )
    (root / "proc" / "meminfo").write_text((GB10_BARE / "proc" / "meminfo").read_text())

    def g6(env=None):
        p = run_cli("preflight", "--root", str(root), "--python", "/nonexistent/python", env=env)
        return [ln for ln in p.stdout.splitlines() if ln.startswith("G6 ") and "4202" in ln]

    assert g6()[0].startswith("G6 WARN: vllm (pid 4202) is uncapped")
    relaxed = g6(env={"SPARK_WATCHD_THRESHOLDS__CAPPED_UTILIZATION_MAX": "0.7"})
    assert relaxed[0].startswith("G6 PASS: vllm (pid 4202) running, capped"), relaxed


def test_no_verb_wires_parts_or_builds_thresholds_itself():
    # The composition root (app.py) builds the HTTP server, its web config, the runner and the classifiers.
    wired = {"HttpServer", "Runner", "load_web_config", "Diagnoser", "Thresholds", "load_settings"}
    offenders = {}
    for path in sorted((REPO / "spark_watchd" / "commands").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = {
            n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", "")
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
        }
        if names & wired:
            offenders[path.name] = sorted(names & wired)
    assert offenders == {}
