"""`spark-watchd preflight`: fixed-format lines, the report and verdict, probes of another interpreter."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from spark_watchd import cli
from spark_watchd.preflight import LINE_RE, VERDICTS, checks
from tests.conftest import FIXTURES, run_cli

HOSTS = FIXTURES / "hosts"
BARE = HOSTS / "gb10-operator-bare"


def _fake_python(tmp_path, torch=None, flash_attn=None, cudart12=(), name="python"):
    """An executable that answers like probe.py would in a training venv (canned JSON)."""
    payload = {
        "python": "3.12.3",
        "executable": f"/opt/venv/bin/{name}",
        "machine": "aarch64",
        "torch": torch,
        "torch_error": None if torch else "ModuleNotFoundError: No module named 'torch'",
        "flash_attn": flash_attn if torch else None,
        "cudart12": list(cudart12),
    }
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(payload)}\nEOF\n")
    path.chmod(0o755)
    return str(path)


def _torch(cuda="13.0", cap=(12, 1), archs=("sm_80", "sm_90", "sm_100", "sm_120", "sm_121a"), available=True):
    return {
        "version": f"2.9.0+cu{cuda.replace('.', '')}" if cuda else "2.9.0+cpu",
        "cuda": cuda,
        "cuda_available": available,
        "device_count": 1,
        "device_name": "NVIDIA GB10",
        "capability": list(cap),
        "arch_list": list(archs),
    }


@pytest.fixture
def preflight(capsys):
    """Run `spark-watchd preflight --root ROOT ARGS` in this process; returns (exit code, stdout lines)."""

    def call(*args, root=BARE):
        code = cli.main(["preflight", "--root", str(root), *args])
        return code, capsys.readouterr().out.splitlines()

    return call


def _lines_for(lines, gotcha):
    return [ln for ln in lines if ln.startswith(gotcha + " ")]


def test_plain_machine_prints_every_required_gotcha_in_the_fixed_format(tmp_path):
    report_path = tmp_path / "env-report.json"
    proc = run_cli("preflight", "--report", str(report_path))
    assert proc.returncode in (0, 1, 3), proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(LINE_RE.match(ln) for ln in lines), lines
    for g in ("G1", "G3", "G4", "G7", "G9"):
        assert _lines_for(lines, g), f"no {g} line in {lines}"
    report = json.loads(report_path.read_text())
    assert report["verdict"] in VERDICTS
    assert {"G1", "G3", "G4", "G7", "G9"} <= report["checks"].keys()
    assert report["host"] and report["generated_at"]
    # The report and the printed lines say the same thing.
    flat = [f"{g} {c['status']}: {c['message']}" for g, cs in report["checks"].items() for c in cs]
    assert sorted(flat) == sorted(lines)
    assert {0: "ready", 1: "ready-with-warnings", 3: "blocked"}[proc.returncode] == report["verdict"]
    # The real probe ran in this interpreter and saw its torch (if any), without importing it here.
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        assert report["checks"]["G1"][0]["message"].startswith("torch not installed")
    else:
        assert f"torch {torch_version}" in report["checks"]["G1"][0]["message"]


def test_cuda13_build_on_gb10_passes_g1_and_g7(preflight, tmp_path):
    py = _fake_python(tmp_path, torch=_torch(), flash_attn={"installed": True, "version": "2.8.3"})
    code, lines = preflight("--python", py)
    assert "G1 PASS: torch 2.9.0+cu130 built for CUDA 13.0" in lines
    assert "G7 PASS: NVIDIA GB10 compute capability 12.1" in lines
    assert "G7 PASS: torch kernels target sm_121a" in lines
    assert "G2 PASS: flash-attn 2.8.3 imports" in lines
    assert "G9 WARN: bare host" in " ".join(lines)  # the community's contract: train in a container
    assert [ln for ln in lines if " WARN: " in ln or " FAIL: " in ln] == [_lines_for(lines, "G9")[0]]
    assert code == 1, lines


def test_cuda12_build_blocks_the_launch(preflight, tmp_path):
    py = _fake_python(tmp_path, torch=_torch(cuda="12.8", archs=("sm_80", "sm_90", "sm_120")))
    code, lines = preflight("--python", py, "--report", str(tmp_path / "r.json"))
    assert _lines_for(lines, "G1")[0].startswith("G1 FAIL: torch 2.9.0+cu128 built for CUDA 12.8")
    assert _lines_for(lines, "G7")[1].startswith("G7 WARN: no sm_121 kernels: running sm_120 binaries")
    assert code == 3
    assert json.loads((tmp_path / "r.json").read_text())["verdict"] == "blocked"


def test_no_kernels_for_sm121_fails_g7_and_stray_cudart12_warns(preflight, tmp_path):
    py = _fake_python(
        tmp_path,
        torch=_torch(archs=("sm_80", "sm_90")),
        cudart12=["/opt/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"],
    )
    code, lines = preflight("--python", py)
    assert any(ln.startswith("G7 FAIL: torch has no kernels for sm_121") for ln in lines)
    assert any(ln.startswith("G1 WARN: stray libcudart.so.12 at /opt/venv/") for ln in lines)
    assert code == 3


def test_stray_cudart12_alone_is_ready_with_warnings(preflight, tmp_path):
    py = _fake_python(tmp_path, torch=_torch(), cudart12=["/usr/local/cuda-12.8/lib64/libcudart.so.12"])
    code, lines = preflight("--python", py, "--json")
    report = json.loads("\n".join(lines))
    assert report["verdict"] == "ready-with-warnings"
    assert code == 1
    assert [c["status"] for c in report["checks"]["G1"]] == ["PASS", "WARN"]


def test_without_torch_the_torch_checks_skip_and_the_launch_is_not_ready(preflight, tmp_path, capsys):
    code, lines = preflight("--python", _fake_python(tmp_path, torch=None))
    assert _lines_for(lines, "G1")[0].startswith("G1 SKIP: torch not installed")
    assert _lines_for(lines, "G7") == ["G7 SKIP: torch not installed: sm_121 kernels not checked"]
    assert code == 1
    assert _lines_for(lines, "G2") == ["G2 SKIP: torch not installed"]
    assert all(LINE_RE.match(ln) for ln in lines)


def test_cuda_not_available_warns_g7(preflight, tmp_path):
    torch = _torch(available=False)
    torch["cuda_error"] = "RuntimeError: Found no NVIDIA driver on your system"
    _, lines = preflight("--python", _fake_python(tmp_path, torch=torch))
    assert _lines_for(lines, "G7") == [
        "G7 WARN: torch.cuda not available (RuntimeError: Found no NVIDIA driver on your system): "
        "sm_121 kernels not checked"
    ]


@pytest.mark.parametrize("bad", ["/nonexistent/python3", "/etc/hostname"])
def test_a_named_interpreter_that_cannot_run_fails_g1(preflight, bad):
    code, lines = preflight("--python", bad)
    assert _lines_for(lines, "G1")[0].startswith("G1 FAIL: could not run the probe: " + bad)
    assert code == 3


@pytest.mark.parametrize(
    ("host", "marker"),
    [
        ("gb10-operator-docker", "/.dockerenv"),
        ("gb10-operator-podman", "/run/.containerenv"),
        ("gb10-operator-k8s", "kubepods"),
    ],
)
def test_container_fixture_roots_flip_g9(preflight, host, marker):
    _, lines = preflight("--python", "/nonexistent", root=HOSTS / host)
    (g9,) = _lines_for(lines, "G9")
    assert g9.startswith("G9 PASS: container (") and marker in g9


def test_g10_tensor_parallel_across_two_sparks(preflight, tmp_path):
    cfg = tmp_path / "launch.sh"
    cfg.write_text(
        "ray start --address=10.0.0.1:6379\nvllm serve meta-llama/Llama-3.1-70B --tensor-parallel-size 2\n"
    )
    _, lines = preflight("--python", "/nonexistent", "--launch-config", str(cfg))
    g10 = _lines_for(lines, "G10")
    assert g10[0] == f"G10 PASS: tensor parallel size 2 in {cfg}: spans 2 Sparks over the network"
    assert any("NCCL_SOCKET_IFNAME not set" in ln for ln in g10)
    single = checks.g10_tensor_parallel("vllm serve x --tensor-parallel-size=1", {})
    assert single[0].status == "PASS"
    assert checks.g10_tensor_parallel(None, {})[0].status == "SKIP"


@pytest.mark.parametrize(
    ("fake", "expected"),
    [
        ("gb10", "G4 INFO: GPU 0 NVIDIA GB10: 38 C 11.2 W (slowdown at 86 C) SM 2405 MHz"),
        (
            '{"temp_c": 80, "power_mw": 92000}',
            "G4 WARN: GPU 0 NVIDIA GB10: 80 C 92.0 W (slowdown at 86 C) SM 2405 MHz",
        ),
        (
            "fail-init",
            "G4 SKIP: no GPU readings: NVML missing (NVMLError_DriverNotLoaded: Driver Not Loaded)",
        ),
        ("none", "G4 SKIP: no GPU readings: NVML reports no GPU"),
    ],
)
def test_g4_reads_nvml_through_the_fake_gb10(preflight, monkeypatch, fake, expected):
    monkeypatch.setenv("SPARK_WATCHD_FAKE_NVML", fake)
    _, lines = preflight("--python", "/nonexistent")
    g4, *cap = _lines_for(lines, "G4")
    assert g4.startswith(expected)
    # With a GPU the next line says whether a clock cap is applied at boot; without one there is none.
    assert [c.split(":")[0] for c in cap] == (["G4 INFO"] if "GPU 0" in expected else [])


def test_the_clock_cap_line_names_an_installed_cap_and_says_gb10_takes_no_power_limit(tmp_path):
    from spark_watchd.preflight import gather
    from spark_watchd.service import clockcap

    assert gather.clock_cap_unit(str(tmp_path)) is None
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "etc/systemd/system" / clockcap.UNIT_NAME).write_text(clockcap.render_unit(2100))
    assert gather.clock_cap_unit(str(tmp_path)) == 2100
    (line,) = checks.g4_clock_cap(2100)
    assert line.line().startswith("G4 INFO: clock cap 2100 MHz applied at every boot")
    assert "GB10 accepts no power limit" in line.line()
    assert "install-service --clock-cap 2100" in checks.g4_clock_cap(None)[0].line()


def test_a_probe_that_hangs_is_killed_with_its_children_and_reported(preflight, tmp_path):
    hang = tmp_path / "python"
    # The child `sleep` inherits the pipes: killing only the shell would leave preflight waiting.
    hang.write_text("#!/bin/sh\nsleep 600 &\nsleep 600\n")
    hang.chmod(0o755)
    code, lines = preflight("--python", str(hang), "--probe-timeout", "1")
    assert _lines_for(lines, "G1") == [f"G1 FAIL: could not run the probe: {hang}: probe timed out after 1 s"]
    assert code == 3


def test_no_gpu_and_no_torch_is_never_ready(tmp_path, monkeypatch):
    # NVML absent and an interpreter without torch: the issue-14.5 case, run through the real CLI.
    py = _fake_python(tmp_path, torch=None)
    proc = run_cli("preflight", "--python", py, "--json", env={"SPARK_WATCHD_FAKE_NVML": "fail-init"})
    report = json.loads(proc.stdout)
    assert report["verdict"] != "ready" and proc.returncode != 0
    statuses = {g: {c["status"] for c in cs} for g, cs in report["checks"].items()}
    # The line contract: SKIP where a check is unavailable (no torch, no GPU readings); the verdict apart.
    assert statuses["G1"] == statuses["G4"] == statuses["G7"] == {"SKIP"}
    assert report["unchecked"] == ["G1", "G4", "G7"]
    assert (
        "verdict: ready-with-warnings"
        in run_cli("preflight", "--python", py, env={"SPARK_WATCHD_FAKE_NVML": "fail-init"}).stderr
    )
    # G1, G7 and G9 are verdicts (PASS/FAIL/WARN) or SKIP; only G3 and G4 say INFO.
    assert statuses["G9"] <= {"PASS", "WARN"}
    assert {g for g, st in statuses.items() if "INFO" in st} <= {"G3", "G4"}


def test_without_nvml_g4_reads_nvidia_smi_as_info_or_skips_naming_both(tmp_path):
    env = {
        "SPARK_WATCHD_FAKE_NVML": "fail-init",
        "SPARK_WATCHD_SOURCES__NVIDIA_SMI_PATH": str(tmp_path / "nvidia-smi"),
    }
    py = _fake_python(tmp_path, torch=None)
    none = run_cli("preflight", "--python", py, env=env)
    (g4,) = _lines_for(none.stdout.splitlines(), "G4")
    assert g4.startswith("G4 SKIP: no GPU readings: NVML missing (NVMLError_DriverNotLoaded") and g4.endswith(
        f"; {tmp_path / 'nvidia-smi'} not found"
    )
    # nvidia-smi answers as on a GB10 (`--format=csv,noheader`): its readings are G4's INFO line.
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '0, NVIDIA GB10, 41, 12.34 W, 2405 MHz'\n")
    smi.chmod(0o755)
    found = run_cli("preflight", "--python", py, "--json", env=env)
    report = json.loads(found.stdout)
    assert report["checks"]["G4"][0] == {
        "status": "INFO",
        "message": "GPU 0 NVIDIA GB10: 41 C 12.3 W SM 2405 MHz (from nvidia-smi: NVML missing, "
        "NVMLError_DriverNotLoaded: Driver Not Loaded)",
    }
    # then whether a clock cap is applied at boot (none on this machine), said for any GPU read
    assert [c["message"].split(":")[0] for c in report["checks"]["G4"][1:]] == ["no clock cap at boot"]
    assert "G4" not in report["unchecked"]
