"""POST /api/v1/progress handler, called with Request objects: status codes, reasons, derived values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from spark_watchd.web.http import Request
from spark_watchd.web.progress import PATH, make_handler, routes
from tests.support.progress import T0


def post(handler, body, client="127.0.0.1", headers=None):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"content-type": "application/json", **(headers or {})}
    resp = handler(Request("POST", PATH, {}, headers, raw, client))
    return resp.status, json.loads(resp.body), resp


@pytest.fixture
def api(clock):
    tracker = JobTracker(ProgressSettings(), clock)
    return tracker, make_handler(tracker, tracker.settings)


def test_accepted_report_answers_with_the_derived_values(api):
    tracker, h = api
    for i in range(6):
        status, body, resp = post(h, {"job": "sft", "step": 10 * i, "tokens": 40960 * i, "ts": T0 + 20 * i})
    assert status == 200 and resp.content_type == "application/json"
    assert body["accepted"] is True
    assert (body["job"], body["step"], body["step_seconds"], body["tokens_per_second"]) == (
        "sft",
        50,
        2.0,
        2048.0,
    )
    assert tracker.stats()[0].reports == 6


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[1, 2]", "JSON object, got list"),
        (b"[" * 30000 + b"]" * 30000, "nested too deeply"),
        ({"job": "sft", "step": "12"}, "step: Input should be a valid integer (got '12')"),
        ({"job": "sft", "step": 1, "extra": 1}, "extra: unknown field"),
        ({"job": "has space", "step": 1}, "job: String should match pattern"),
        ({"job": "sft", "step": 1, "ts": 1764403200123}, "ts: Value error, ts must be Unix seconds"),
        (b'{"job": "sft", "step": 1, "ts": NaN}', "ts:"),
    ],
)
def test_malformed_report_gets_400_naming_what_is_wrong(api, body, words):
    tracker, h = api
    status, reply, _ = post(h, body)
    assert status == 400
    assert words in reply["error"], reply["error"]
    assert tracker.stats() == ()


def test_validation_errors_are_listed_per_field(api):
    _, h = api
    status, reply, _ = post(h, {"job": "", "step": -1, "tokens": "x"})
    assert status == 400
    assert {e["field"] for e in reply["errors"]} == {"job", "step", "tokens"}


def test_oversized_body_gets_413_even_when_the_server_let_it_through(clock):
    tracker = JobTracker(ProgressSettings(max_body_bytes=1024), clock)
    h = make_handler(tracker, tracker.settings)
    status, reply, _ = post(h, {"job": "sft", "step": 1, "pad": "x" * 2000})
    assert status == 413 and "1024" in reply["error"]


def test_non_loopback_is_refused_without_a_configured_token(api):
    _, h = api
    status, reply, _ = post(h, {"job": "sft", "step": 1}, client="192.0.2.7")
    assert status == 403 and "loopback" in reply["error"]
    assert post(h, {"job": "sft", "step": 1}, client="::1")[0] == 200


def test_bearer_token_lets_remote_clients_in_and_a_wrong_one_gets_401(clock):
    tracker = JobTracker(ProgressSettings(token="s3cret-token"), clock)
    h = make_handler(tracker, tracker.settings)
    good = {"authorization": "Bearer s3cret-token"}
    assert post(h, {"job": "sft", "step": 1}, client="192.0.2.7", headers=good)[0] == 200
    status, reply, resp = post(
        h, {"job": "sft", "step": 2}, client="192.0.2.7", headers={"authorization": "Bearer nope"}
    )
    assert status == 401 and resp.headers["WWW-Authenticate"].startswith("Bearer")
    status, _, _ = post(h, {"job": "sft", "step": 2}, client="192.0.2.7")
    assert status == 401
    # loopback needs no token, but a wrong one is still refused (a misconfigured client)
    assert post(h, {"job": "sft", "step": 3})[0] == 200
    assert post(h, {"job": "sft", "step": 4}, headers={"authorization": "Bearer nope"})[0] == 401
    assert tracker.stats()[0].step == 3
    # Behind the server's basic auth, the token travels in X-Progress-Token.
    basic = {"authorization": "Basic dXNlcjpwYXNz", "x-progress-token": "s3cret-token"}
    assert post(h, {"job": "sft", "step": 5}, client="192.0.2.7", headers=basic)[0] == 200
    basic["x-progress-token"] = "wrong"
    assert post(h, {"job": "sft", "step": 6}, client="192.0.2.7", headers=basic)[0] == 401
    assert (
        post(h, {"job": "sft", "step": 6}, client="192.0.2.7", headers={"authorization": "Basic x"})[0] == 401
    )


def test_untrusted_loopback_needs_the_token_too(clock):
    tracker = JobTracker(ProgressSettings(token="s3cret-token", trust_loopback=False), clock)
    h = make_handler(tracker, tracker.settings)
    assert post(h, {"job": "sft", "step": 1})[0] == 401  # a reverse proxy's clients all come from loopback
    assert post(h, {"job": "sft", "step": 1}, headers={"authorization": "Bearer s3cret-token"})[0] == 200
    with pytest.raises(ValueError, match="needs a token"):
        ProgressSettings(trust_loopback=False)


def test_contradicting_report_gets_409_and_job_cap_429(clock):
    tracker = JobTracker(ProgressSettings(max_jobs=1), clock)
    h = make_handler(tracker, tracker.settings)
    assert post(h, {"job": "a", "step": 5, "ts": T0 + 10})[0] == 200
    status, reply, _ = post(h, {"job": "a", "step": 6, "ts": T0})
    assert status == 409 and "earlier" in reply["error"]
    status, reply, _ = post(h, {"job": "b", "step": 1})
    assert status == 429 and "max_jobs" in reply["error"]


def test_routes_expose_the_post_route_with_the_body_limit(clock):
    tracker = JobTracker(ProgressSettings(max_body_bytes=4096), clock)
    (route,) = routes(tracker)
    assert (route.method, route.path, route.max_body) == ("POST", "/api/v1/progress", 4096)
    assert post(route.handler, {"job": "sft", "step": 1})[0] == 200


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
report_like = st.fixed_dictionaries(
    {"job": st.text(max_size=12) | st.sampled_from(["sft", "a/b@1"]), "step": st.integers(-5, 2**64)},
    optional={
        "tokens": json_values, "samples": json_values, "ts": json_values | st.floats(1e9, 5e9),
        "event": st.sampled_from(["start", "end", "stop", 1]),
    },
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300) | report_like.map(lambda d: json.dumps(d).encode()))
def test_any_body_gets_an_answer_never_an_exception(body):
    tracker = JobTracker(ProgressSettings(max_jobs=8, job_expiry_s=1e9))
    status, reply, _ = post(make_handler(tracker, tracker.settings), body)
    assert status in (200, 400, 409, 429)
    assert ("error" in reply) == (status != 200)
