"""Basic auth under attack: equal work for unknown users, failures limited per client, verified logins cached."""

from __future__ import annotations

import base64
import statistics
import threading
import time

import bcrypt
import pytest

from spark_watchd.web.auth import load_web_config
from spark_watchd.web.credentials import BasicAuth, Verdict

COST = 8  # ~15 ms here: slow enough to measure, fast enough for CI


def _hdr(user: str, pw: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


@pytest.fixture(scope="module")
def hashed() -> bytes:
    return bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=COST))


def _median_s(fn, n: int = 9) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _paired_medians(a, b, n: int = 15) -> tuple[float, float]:
    """Medians of a and b timed alternately, so load on a shared machine weighs on both alike."""
    ta, tb = [], []
    for _ in range(n):
        for fn, out in ((a, ta), (b, tb)):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def test_unknown_user_costs_the_same_work_as_a_wrong_password(tmp_path, hashed):
    """Through the loader, as the daemon builds it: medians compared with each other, not with a clock."""
    p = tmp_path / "web.yml"
    p.write_text(f"basic_auth_users:\n  prom: '{hashed.decode()}'\n")
    auth = load_web_config(str(p)).auth
    auth.failures = 10_000  # this test measures work, not the limiter
    unknown, wrong = _paired_medians(
        lambda: auth.check(_hdr("nobody", "s3cret"), "192.0.2.1"),
        lambda: auth.check(_hdr("prom", "nope"), "192.0.2.1"),
    )
    # bcrypt work doubles per cost step: the old cost-10 dummy against a cost-8 hash was 3.6x; equal work ~1x.
    assert 0.5 < unknown / wrong < 2.0, (unknown, wrong)


def test_failures_are_limited_per_client_and_refill_with_time(hashed):
    now = [0.0]
    auth = BasicAuth({"prom": hashed}, failures=3, window_s=30, clock=lambda: now[0])
    bad = _hdr("prom", "nope")
    assert [auth.check(bad, "10.0.0.1") for _ in range(4)] == [Verdict.DENIED] * 3 + [Verdict.LIMITED]
    assert auth.check(bad, "10.0.0.2") is Verdict.DENIED  # another client has its own budget
    assert auth.check(_hdr("prom", "s3cret"), "10.0.0.1") is Verdict.LIMITED  # no bcrypt while limited
    now[0] += 10  # one attempt back per window_s / failures
    assert auth.check(_hdr("prom", "s3cret"), "10.0.0.1") is Verdict.OK


def test_a_verified_password_skips_bcrypt_and_the_limiter(hashed):
    auth = BasicAuth({"prom": hashed}, failures=1)
    good, bad = _hdr("prom", "s3cret"), _hdr("prom", "nope")
    assert auth.check(good, "10.0.0.1") is Verdict.OK
    assert auth.check(bad, "10.0.0.1") is Verdict.DENIED
    assert auth.check(bad, "10.0.0.1") is Verdict.LIMITED
    t = _median_s(lambda: auth.check(good, "10.0.0.1"), n=20)
    assert auth.check(good, "10.0.0.1") is Verdict.OK  # cached: even a limited client's scraper gets in
    assert t < _median_s(lambda: bcrypt.checkpw(b"x", hashed), n=3)


def test_verifiers_bound_concurrent_bcrypt_work(hashed):
    """With every verifier busy a request is refused at once instead of waiting (and holding a worker)."""
    auth = BasicAuth({"prom": hashed}, verifiers=1, failures=1000)
    started = threading.Event()
    real = auth._bcrypt

    class _Slow:
        @staticmethod
        def checkpw(pw, h):
            started.set()
            time.sleep(0.5)
            return real.checkpw(pw, h)

    auth._bcrypt = _Slow
    t = threading.Thread(target=auth.check, args=(_hdr("prom", "nope"), "a"))
    t.start()
    started.wait(5)
    t0 = time.monotonic()
    assert auth.check(_hdr("prom", "nope"), "b") is Verdict.LIMITED
    assert time.monotonic() - t0 < 0.3
    t.join()


@pytest.mark.parametrize(
    "header", [None, "", "Bearer x", "Basic !!!", "Basic " + base64.b64encode(b"nocolon").decode()]
)
def test_malformed_headers_are_denied_without_bcrypt(hashed, header):
    assert BasicAuth({"prom": hashed}).check(header, "a") is Verdict.DENIED


def test_passwords_over_72_bytes_are_checked_not_raised(hashed):
    auth = BasicAuth({"prom": hashed})
    assert auth.check(_hdr("prom", "s3cret" + "x" * 100), "a") is Verdict.DENIED
