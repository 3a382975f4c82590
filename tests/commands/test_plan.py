"""`spark-watchd plan`: the worksheet table against today's budget, JSON and exit codes, usage errors."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, run_cli

GB10_BARE = FIXTURES / "hosts" / "gb10-operator-bare"
GB = 1e9 / 2**30  # the worksheet's decimal GB in the GiB the plan prints


def test_plan_cli_prints_the_table_against_todays_budget():
    proc = run_cli("plan", "--params", "70B", "--method", "qlora", "--root", str(GB10_BARE))
    assert proc.returncode == 0, proc.stderr
    assert "weights" in proc.stdout and "32.60 GiB" in proc.stdout  # 35 GB
    assert "109.02 GiB" in proc.stdout  # 118,505,911 kB available minus the 4 GiB reserve
    assert " GB " not in proc.stdout.replace("(40 GB)", "")  # GiB everywhere, the anchor's quote aside
    assert "no --method" not in proc.stderr
    assert "verdict: fits" in proc.stdout
    assert "70B QLoRA" in proc.stdout


def test_plan_cli_json_and_exit_code_when_it_does_not_fit():
    proc = run_cli("plan", "--params", "9B", "--method", "full", "--budget-gib", "60", "--json")
    assert proc.returncode == 3
    plan = json.loads(proc.stdout)
    assert plan["verdict"] == "does not fit"
    assert plan["lines"]["optimizer states"] == pytest.approx(72.0 * GB, abs=1e-3)
    assert plan["advice"]


def test_plan_cli_usage_errors_exit_2():
    proc = run_cli("plan", "--params", "70", "--method", "qlora")
    assert proc.returncode == 2
    assert "parameter count '70'" in proc.stderr


def test_plan_says_which_method_it_assumed():
    proc = run_cli("plan", "--params", "8B", "--budget-gib", "100")
    assert proc.returncode == 0, proc.stderr
    assert "no --method given: planning qlora" in proc.stderr
    assert "nearest anchor: 70B QLoRA" in proc.stdout


@pytest.mark.parametrize("text", ["0", "-5B", "0B"])
def test_plan_refuses_zero_and_negative_sizes_clearly(text):
    proc = run_cli("plan", "--params", text, "--method", "lora", "--budget-gib", "100")
    assert proc.returncode == 2
    assert f"parameter count '{text}' must be positive" in proc.stderr
    assert proc.stdout == ""


def test_the_ladder_names_the_gpu_residents_running_now_and_skips_the_rung_when_there_are_none(tmp_path):
    from tests.preflight.test_gather import _proc_tree

    def advice(root):
        p = run_cli("plan", "--params", "70B", "--method", "full", "--root", str(root), "--json")
        assert p.returncode == 3, p.stderr
        return " ".join(json.loads(p.stdout)["advice"])

    assert "GPU residents" not in advice(GB10_BARE)  # nothing else on the GPU: no "stop the residents"
    host = tmp_path / "host"
    _proc_tree(host, {4101: ["/opt/vllm/bin/python3", "/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-32B"]})
    (host / "proc" / "meminfo").write_text((GB10_BARE / "proc" / "meminfo").read_text())
    assert "Stop or cap the GPU residents running now first: vllm (pid 4101, uncapped)" in advice(host)
