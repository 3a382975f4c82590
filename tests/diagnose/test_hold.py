"""A serving engine's true hold (the usable-memory step) against what it declared, and the check before its
first long prefill (issue 31, items 2 and 7)."""

from __future__ import annotations

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.diagnose.hold import declared
from spark_watchd.diagnose.thresholds import Thresholds
from tests.diagnose.diag_builders import Host, proc
from tests.diagnose.diag_builders import vllm_engine as _vllm

GIB = 1024**3
MEM_TOTAL = int(121.7 * GIB)


def _events(steps):
    """steps: (processes, MemAvailable GiB, Cached GiB) per 30 s sample; every hold and hold_check event."""
    h, d, out = Host(), Diagnoser(Thresholds()), []
    for procs, avail, cached in steps:
        out += [e for e in d.observe(h.sample(processes=procs, avail_gib=avail, cached_gib=cached)).events
                if e.kind in ("hold", "hold_check")]  # fmt: skip
    return out


def test_the_declared_hold_is_the_flag_times_the_pool_or_the_kv_cache_bytes():
    assert declared("vllm", ["vllm", "serve", "m"], MEM_TOTAL)[0] == int(0.9 * MEM_TOTAL)  # vLLM's default
    assert declared("vllm", ["vllm", "serve", "--gpu-memory-utilization", "0.5"], MEM_TOTAL)[0] == int(
        0.5 * MEM_TOTAL
    )
    b, words = declared("vllm", ["vllm", "serve", "--kv-cache-memory-bytes", "40G"], MEM_TOTAL)
    assert b == 40 * GIB and "plus the weights" in words
    assert declared(
        "sglang", ["python3", "-m", "sglang.launch_server", "--mem-fraction-static", "0.7"], MEM_TOTAL
    )[0]
    assert declared("ollama", ["ollama", "serve"], MEM_TOTAL) == (None, "")


def test_before_the_first_long_prefill_a_hold_that_will_not_fit_is_said_with_the_page_cache():
    """tobias-weiss.org: a vLLM OOM-killed at KV-cache allocation on its first launch, page cache holding the pool."""
    steps = [([], 96.0, 40.0)] * 3 + [(_vllm([], 20.0), 90.0, 40.0)]
    (check,) = _events(steps)
    assert check.kind == "hold_check"
    assert check.summary.startswith(
        "vLLM (pid 4100) at 0.9 of 121.7 GiB will hold 109.5 GiB; usable 96.0 GiB, 40.0 GiB of it page cache: "
        "the first long prefill will not fit; drop caches"
    )
    assert "lower --gpu-memory-utilization" in check.summary
    fits = [([], 110.0, 3.0)] * 3 + [(_vllm(["--gpu-memory-utilization", "0.5"], 20.0), 100.0, 3.0)]
    assert _events(fits) == []


def test_the_true_hold_is_the_usable_memory_step_and_the_gap_to_the_declared_is_said():
    """Issue 31: one engine held 109 GiB against 71 GiB declared; NVML per-process under-counts by ~10 GiB."""
    flags = ["--gpu-memory-utilization", "0.583"]  # 71 GiB of 121.7
    steps = [([], 118.6, 3.0)] * 3
    steps += [(_vllm(flags, 40.0 + 10 * i), 118.6 - 25 * i, 3.0) for i in range(1, 5)]  # the load: -100 GiB
    steps += [(_vllm(flags, 99.0), 9.6, 3.0)] * 12  # settled: 109 GiB held, NVML says 99 + 1.2 + 1.8
    steps += [([], 118.6, 3.0)] * 3  # it stopped: the step back
    settled, stopped = _events(steps)
    assert abs(settled.details["measured_bytes"] - 109 * GIB) < GIB / 4
    assert "holds 109.0 GiB by the usable-memory step after its load settled" in settled.summary
    assert "declared 70.9 GiB at 0.583 of 121.7 GiB" in settled.summary
    assert "38.1 GiB more than it declared" in settled.summary
    assert settled.details["nvml_bytes"] < settled.details["measured_bytes"] - 5 * GIB  # NVML under-counts
    assert (
        stopped.details["when"] == "when it stopped"
        and abs(stopped.details["measured_bytes"] - 109 * GIB) < GIB
    )


def test_the_measured_hold_is_in_g3s_evidence_and_on_metrics_beside_the_declared_and_nvml():
    from types import SimpleNamespace

    from spark_watchd.export import runway

    flags = ["--gpu-memory-utilization", "0.583"]
    steps = [([], 118.6, 3.0)] * 3 + [(_vllm(flags, 40.0 + 10 * i), 118.6 - 25 * i, 3.0) for i in range(1, 5)]
    steps += [(_vllm(flags, 99.0), 9.6, 3.0)] * 12
    h, d = Host(), Diagnoser(Thresholds())
    for procs, avail, cached in steps:
        last = d.observe(h.sample(processes=procs, avail_gib=avail, cached_gib=cached))
    (row,) = last.findings["G3"].evidence["serving_holds"]
    assert abs(row["measured_bytes"] - 109 * GIB) < GIB / 4 and row["undeclared_bytes"] > 38 * GIB
    fams = {f.name: f for f in runway.families(SimpleNamespace(diagnosis=last, extras={}))}
    got = {tuple(s.labels.values()): s.value for s in fams["sparkwatchd_workload_hold_bytes"].samples}
    assert abs(got[("vllm", "measured")] - 109 * GIB) < GIB / 4
    assert got[("vllm", "declared")] == row["declared_bytes"] == int(0.583 * 127600748 * 1024)
    assert got[("vllm", "nvml")] == row["nvml_bytes"]
    assert got[("sglang", "measured")] == 0.0
    # The status page and the terminal show G3's evidence by the same rules: the hold is on the G3 card.
    from spark_watchd.commands.term import evidence_lines

    (line,) = [x for x in evidence_lines(last.findings["G3"].evidence) if x.startswith("serving holds")]
    assert "vllm pid 4100" in line and "measured 109" in line and "declared 70.9 GiB" in line
    assert "nvml 99.0 GiB" in line and "undeclared 38.1 GiB" in line


T0 = Host().ts  # the samples' clock: a trainer started after the third sample


def _trainer(gpu_gib, started=T0 + 100.0):
    return [proc(5120, ["python3", "train.py", "--bf16"], 2.0, gpu_gib, create_time=started, ppid=1)]


def test_a_trainers_hold_is_measured_the_same_way_when_nothing_else_starts_or_stops():
    """A trainer declares nothing; its start and exit steps are measured like an engine's. No owner's log gives a
    trainer's figures: the gap is Syllo/nvtop#511's (NVML 89.28 against 98.70 GiB), the same driver accounting."""
    missed = 98.70 - 89.28
    steps = [([], 118.6, 3.0)] * 3
    steps += [(_trainer(5.0 * i), 118.6 - (20.0 + missed) * i / 4, 3.0) for i in range(1, 5)]
    steps += [(_trainer(20.0), 118.6 - 20.0 - missed, 3.0)] * 12
    steps += [([], 118.6, 3.0)] * 2
    settled, stopped = _events(steps)
    assert settled.summary.startswith(
        "trainer (pid 5120) holds 29.4 GiB by the usable-memory step after its load settled "
        "(NVML per-process 20.0 GiB)"
    )
    assert settled.details["declared_bytes"] is None and "declared" not in settled.summary
    assert (
        stopped.details["when"] == "when it stopped"
        and abs(stopped.details["measured_bytes"] - 29.42 * GIB) < GIB
    )
    # While it runs: in G3's evidence (trainer_holds) and on /metrics under kind="trainer".
    from types import SimpleNamespace

    from spark_watchd.export import runway

    h, d = Host(), Diagnoser(Thresholds())
    for procs, avail, cached in steps[:-2]:
        last = d.observe(h.sample(processes=procs, avail_gib=avail, cached_gib=cached))
    (row,) = last.findings["G3"].evidence["trainer_holds"]
    assert row["kind"] == "trainer" and abs(row["measured_bytes"] - 29.42 * GIB) < GIB / 4
    fams = {f.name: f for f in runway.families(SimpleNamespace(diagnosis=last, extras={}))}
    got = {tuple(s.labels.values()): s.value for s in fams["sparkwatchd_workload_hold_bytes"].samples}
    assert got[("trainer", "measured")] == row["measured_bytes"] and got[("trainer", "nvml")] == 20 * GIB


def test_a_step_another_workload_started_or_stopped_in_is_no_ones_hold():
    """The step is the whole pool's: a vLLM that starts while the trainer settles, or leaves with it, spoils it."""
    steps = [([], 118.6, 3.0)] * 3
    steps += [(_trainer(5.0 * i), 118.6 - 7.0 * i, 3.0) for i in range(1, 5)]
    steps += [(_trainer(20.0) + _vllm(["--gpu-memory-utilization", "0.3"], 30.0), 50.0, 3.0)] * 14
    assert [e.summary for e in _events(steps) if e.kind == "hold" and e.details["kind"] == "trainer"] == []
    alone = [([], 118.6, 3.0)] * 3 + [(_trainer(20.0), 90.0, 3.0)] * 14
    alone += [(_vllm(["--gpu-memory-utilization", "0.3"], 30.0), 60.0, 3.0)] * 2  # it left as the vLLM came
    (settled,) = [e for e in _events(alone) if e.kind == "hold"]
    assert settled.details["when"] == "after its load settled"
    # A trainer is a workload once it holds GPU memory: one that began (reading its data) before the sample
    # ahead of that already held part of its hold there.
    early = [([], 118.6, 3.0)] * 3 + [(_trainer(20.0, started=T0 - 600.0), 90.0, 3.0)] * 14
    assert _events(early) == []


def test_the_others_drift_while_an_engine_settles_is_taken_off_its_step():
    """A trainer beside a starting vLLM grows 4 GiB meanwhile: the pool's step is 4 GiB more than the engine's."""
    flags = ["--gpu-memory-utilization", "0.583"]
    steps = [(_trainer(20.0), 98.6, 3.0)] * 3
    steps += [(_trainer(20.0 + i) + _vllm(flags, 25.0 * i), 98.6 - 28.0 * i, 3.0) for i in range(1, 5)]
    steps += [(_trainer(24.0) + _vllm(flags, 99.0), 98.6 - 112.0 + 25.0, 3.0)] * 12
    (settled,) = [e for e in _events(steps) if e.kind == "hold"]
    assert abs(settled.details["measured_bytes"] - (112.0 - 25.0 - 4.0) * GIB) < GIB / 4


def test_a_trainer_that_read_its_data_before_touching_the_gpu_is_measured_from_before_it_began():
    """A trainer joins the table once it holds GPU memory; minutes of reading its data (6 GiB of RSS) before
    that are its hold too: the step is taken from the last sample before its process was created."""
    missed = 98.70 - 89.28  # Syllo/nvtop#511
    reading = [proc(5120, ["python3", "train.py"], 6.0, 0.0, resident=False, create_time=T0 + 100.0, ppid=1)]
    steps = [([], 118.6, 3.0)] * 3 + [(reading, 112.6, 3.0)] * 10
    steps += [(_trainer(20.0, started=T0 + 100.0), 118.6 - 6.0 - 20.0 - missed, 3.0)] * 14
    (settled,) = _events(steps)
    assert abs(settled.details["measured_bytes"] - (26.0 + missed) * GIB) < GIB / 4
    # ...and one created before the history begins (before the daemon started) is never measured.
    before = [proc(5120, ["python3", "train.py"], 6.0, 0.0, resident=False, create_time=T0 - 600.0, ppid=1)]
    assert _events([(before, 112.6, 3.0)] * 3 + [(_trainer(20.0, started=T0 - 600.0), 83.2, 3.0)] * 14) == []
