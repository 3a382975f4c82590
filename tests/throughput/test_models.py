"""The progress report model: strict types, bounded job names, Unix-second timestamps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from spark_watchd.throughput.models import ProgressReport, describe_errors, is_valid_job, sanitize_job


def errors_of(data) -> dict[str, str]:
    with pytest.raises(ValidationError) as exc:
        ProgressReport.model_validate(data)
    return {e["field"]: e["reason"] for e in describe_errors(exc.value)}


def test_minimal_and_full_reports_are_accepted():
    r = ProgressReport.model_validate({"job": "llama-8b/sft@r16", "step": 0})
    assert (r.job, r.step, r.tokens, r.ts, r.event) == ("llama-8b/sft@r16", 0, None, None, None)
    r = ProgressReport.model_validate(
        {"job": "j", "step": 10, "tokens": 40960, "samples": 20, "ts": 1764403200, "event": "end"}
    )
    assert r.ts == 1764403200.0 and isinstance(r.ts, float) and r.event == "end"


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"job": "j", "step": "12"}, "step", "valid integer"),
        ({"job": "j", "step": 1.0}, "step", "valid integer"),
        ({"job": "j", "step": True}, "step", "valid integer"),
        ({"job": "j", "step": -1}, "step", "greater than or equal to 0"),
        ({"job": "j", "step": 1, "tokens": -5}, "tokens", "greater than or equal to 0"),
        ({"job": "j", "step": 1, "tokens": "40960"}, "tokens", "valid integer"),
        ({"job": "", "step": 1}, "job", "at least 1"),
        ({"job": "x" * 129, "step": 1}, "job", "at most 128"),
        ({"job": "bad job", "step": 1}, "job", "pattern"),
        ({"job": "a\nb", "step": 1}, "job", "pattern"),
        ({"job": 5, "step": 1}, "job", "valid string"),
        ({"step": 1}, "job", "required"),
        ({"job": "j"}, "step", "required"),
        ({"job": "j", "step": 1, "ts": 1764403200000}, "ts", "milliseconds"),
        ({"job": "j", "step": 1, "ts": 12.5}, "ts", "before 2000"),
        ({"job": "j", "step": 1, "ts": float("nan")}, "ts", "finite"),
        ({"job": "j", "step": 1, "ts": "1764403200"}, "ts", "valid number"),
        ({"job": "j", "step": 1, "event": "stop"}, "event", "'start' or 'end'"),
        ({"job": "j", "step": 1, "loss": 0.5}, "loss", "unknown field"),
        ({"job": "j", "step": 2**63}, "step", "less than or equal"),
    ],
)
def test_malformed_reports_name_the_field_and_the_reason(data, field, words):
    errors = errors_of(data)
    assert field in errors, errors
    assert words in errors[field], errors[field]


def test_sanitize_job_always_yields_an_accepted_name():
    for raw in ["my run (v2)", "  ", "é-ü", "/tmp/out/", "x" * 300, "ok-name"]:
        name = sanitize_job(raw)
        assert is_valid_job(name), (raw, name)
    assert sanitize_job("my run (v2)") == "my-run-v2"
    assert sanitize_job("ok-name") == "ok-name"


_VALUE = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
_BODY = st.dictionaries(
    st.sampled_from(["job", "step", "tokens", "samples", "ts", "event", "extra"]), _VALUE, max_size=6
) | st.fixed_dictionaries(
    {"job": st.sampled_from(["sft", "a/b", "x" * 129, ""]), "step": _VALUE},
    optional={"ts": st.floats(min_value=9e8, max_value=5e9) | _VALUE, "event": _VALUE, "tokens": _VALUE},
)


@settings(max_examples=300, deadline=None)
@given(bodies=st.lists(_BODY, min_size=1, max_size=5))
def test_any_progress_body_is_refused_with_named_fields_or_tracked_with_bounded_values(bodies):
    from spark_watchd.throughput.settings import ProgressSettings
    from spark_watchd.throughput.tracker import JobTracker, ReportRejected, TooManyJobs

    tracker = JobTracker(ProgressSettings(), clock=lambda: 1.8e9)
    for body in bodies:
        try:
            r = ProgressReport.model_validate(body)
        except ValidationError as err:
            described = describe_errors(err)
            assert described and all(d["field"] and d["reason"] for d in described)
            continue
        assert 0 <= r.step < 2**63 and (r.ts is None or 946684800.0 <= r.ts <= 4102444800.0)
        try:
            tracker.report(r)
        except (ReportRejected, TooManyJobs):
            continue
    for reading in tracker.collect({})["throughput"]:
        for v in (reading.step_seconds, reading.tokens_per_second):
            assert v is None or (v == v and v >= 0 and v != float("inf"))
