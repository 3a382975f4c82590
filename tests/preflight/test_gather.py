"""What preflight gathers: ldconfig's cudart list, the workload scan of /proc judged like the daemon, hidepid."""

from __future__ import annotations

import subprocess

from spark_watchd.preflight import checks, gather


def test_ldconfig_cache_lines_are_parsed():
    out = (
        "1234 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibcudart.so.12 (libc6,AArch64) => /usr/local/cuda-12.8/targets/sbsa-linux/lib/libcudart.so.12\n"
        "\tlibcudart.so.13 (libc6,AArch64) => /usr/local/cuda-13.0/targets/sbsa-linux/lib/libcudart.so.13\n"
        "\tlibc.so.6 (libc6,AArch64) => /lib/aarch64-linux-gnu/libc.so.6\n"
    )
    calls = []

    def runner(argv, timeout):
        calls.append(list(argv))
        return subprocess.CompletedProcess(argv, 0, out, "")

    assert gather.ldconfig_cudart12(runner) == ["/usr/local/cuda-12.8/targets/sbsa-linux/lib/libcudart.so.12"]
    assert calls == [["ldconfig", "-p"]]


def _proc_tree(tmp_path, cmdlines):
    root = tmp_path / "proc"
    for pid, argv in cmdlines.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(root)


def test_workload_scan_judges_kind_and_cap_like_the_daemon(tmp_path):
    root = _proc_tree(
        tmp_path,
        {
            4101: ["/opt/vllm/bin/python3", "/opt/vllm/bin/vllm", "serve", "Qwen/Qwen3-32B"],
            4202: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--gpu-memory-utilization", "0.3"],
            4303: ["/usr/local/bin/ollama", "serve"],
            4404: ["python3", "train.py"],
            4505: ["bash"],
            4606: ["python3", "sft_train.py"],  # not on the GPU yet: not a workload
        },
    )
    found, err = gather.scan_workloads(root, nvml_processes=[(4404, 19135 * 2**20)])
    assert err is None
    by_pid = {w["pid"]: w for w in found}
    assert set(by_pid) == {4101, 4202, 4303, 4404}
    assert by_pid[4101]["kind"] == "vllm" and by_pid[4101]["capped"] is False
    assert by_pid[4202]["capped"] is True and by_pid[4202]["cap"] == "--gpu-memory-utilization 0.3"
    assert by_pid[4303]["kind"] == "ollama" and by_pid[4303]["capped"] is False
    assert by_pid[4404]["kind"] == "trainer" and by_pid[4404]["gpu_memory_bytes"] == 19135 * 2**20
    lines = [c.line() for c in checks.g6_contention(found)]
    assert lines[0].startswith("G6 WARN: vllm (pid 4101) is uncapped: vLLM takes 0.9 of the whole pool")
    assert "G6 PASS: vllm (pid 4202) running, capped: --gpu-memory-utilization 0.3" in lines
    assert lines[2].startswith("G6 WARN: ollama (pid 4303) is uncapped: Ollama takes what it finds")
    assert "G6 PASS: trainer (pid 4404, 18.7 GiB) running" in lines


def test_hidepid_on_proc_warns_that_other_users_processes_are_hidden(tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "mountinfo").write_text(
        "21 26 0:5 / /dev rw,nosuid - devtmpfs udev rw,size=65536k\n"
        "22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw,hidepid=invisible\n"
    )
    assert gather.proc_hidepid(str(tmp_path)) == "invisible"
    first = checks.g6_contention([], hidepid="invisible")[0]
    assert first.line() == "G6 WARN: /proc is mounted hidepid=invisible: other users' processes are hidden"
    (tmp_path / "self" / "mountinfo").write_text("22 27 0:21 / /proc rw,relatime - proc proc rw\n")
    assert gather.proc_hidepid(str(tmp_path)) is None
