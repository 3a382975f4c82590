"""The engine never crashes on sparse or odd (but trace-v1 valid) samples: Not Supported is None."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.diagnose.engine import Diagnoser
from spark_watchd.sample.model import SEVERITIES, Sample

maybe_f = st.one_of(st.none(), st.floats(min_value=0, max_value=300, allow_nan=False))
maybe_i = st.one_of(st.none(), st.integers(min_value=0, max_value=10**12))
gpu = st.fixed_dictionaries(
    {
        "index": st.just(0),
        "power_w": maybe_f,
        "temp_c": maybe_f,
        "sm_clock_mhz": st.one_of(st.none(), st.integers(0, 3000)),
        "clocks_event_reasons": st.one_of(st.none(), st.integers(0, 255)),
        "clocks_event_counters_us": st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["sw_thermal", "hw_thermal", "hw_slowdown"]), maybe_i)
        ),
        "applications_clock_mhz": st.one_of(st.none(), st.integers(1, 3000)),
        "slowdown_temp_c": maybe_f,
        "shutdown_temp_c": maybe_f,
        "util_pct": maybe_f,
    }
)
sample = st.fixed_dictionaries(
    {
        "boot_id": st.one_of(st.none(), st.sampled_from(["a", "b"])),
        "uptime_s": maybe_f,
        "gpus": st.lists(gpu, max_size=1),
        "meminfo": st.dictionaries(
            st.sampled_from(["MemTotal", "MemAvailable", "Cached", "AnonPages"]), st.integers(0, 2**27)
        ),
        "mem_available_min_kb": st.one_of(st.none(), st.integers(0, 2**27)),
        "vmstat": st.dictionaries(
            st.sampled_from(["pgmajfault", "pswpout", "oom_kill"]), st.integers(0, 10**9)
        ),
        "psi_memory": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {"some": st.fixed_dictionaries({"avg60": maybe_f, "total": maybe_i}), "full": st.just({})}
            ),
        ),
        "processes": st.lists(
            st.fixed_dictionaries(
                {
                    "pid": st.integers(1, 5),
                    "create_time": st.just(1.0),
                    "cmdline": st.sampled_from(
                        [[], ["ollama", "serve"], ["vllm", "serve", "--gpu-memory-utilization", "x"]]
                    ),
                    "rss_bytes": st.integers(0, 2**36),
                    "gpu_mem_bytes": maybe_i,
                    "gpu_resident": st.booleans(),
                }
            ),
            max_size=3,
        ),
        "throughput": st.lists(
            st.fixed_dictionaries(
                {"job": st.just("j"), "ts": maybe_f, "step": st.just(1), "step_seconds": maybe_f}
            ),
            max_size=1,
        ),
    }
)


@settings(max_examples=30, deadline=None)
@given(st.lists(sample, min_size=1, max_size=8))
def test_engine_survives_sparse_samples(objs):
    d = Diagnoser()
    for i, o in enumerate(objs):
        o = dict(o, v=1, ts=1000.0 + 30 * i)
        out = d.observe(Sample.from_dict(o))
        assert set(out.findings) == {"G3", "G4", "G6"}
        for f in out.findings.values():
            assert f.severity in SEVERITIES
            assert isinstance(f.summary, str) and f.summary


def test_the_engine_keeps_no_sample_window_and_drives_every_tracker_through_one_interface():
    """Each tracker offers the Tracker methods; the engine keeps no per-sample history of its own."""
    import inspect

    from spark_watchd.diagnose.tracker import Tracker, Verdict

    eng = Diagnoser()
    assert [t.gotcha for t in eng.trackers] == ["G4", "G3", "G6"]
    wanted = {n for n, _ in inspect.getmembers(Tracker, inspect.isfunction) if not n.startswith("_")}
    assert wanted == {"observe", "reboot", "time_jump", "state", "restore", "set_thresholds"}
    for t in eng.trackers:
        for name in wanted:
            ours = inspect.signature(getattr(Tracker, name)).parameters
            theirs = inspect.signature(getattr(type(t), name)).parameters
            assert list(theirs) == list(ours), (t.gotcha, name)
    assert not hasattr(eng, "window")
    v = eng.trackers[2].observe(Sample(ts=1.0, meminfo={"MemTotal": 1000, "MemAvailable": 500}), _features())
    assert isinstance(v, Verdict) and v.finding.gotcha == "G6"


def _features():
    from spark_watchd.diagnose import features as feat
    from spark_watchd.diagnose.thresholds import Thresholds

    return feat.compute(None, Sample(ts=1.0, meminfo={"MemTotal": 1000, "MemAvailable": 500}), Thresholds())
