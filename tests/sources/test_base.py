"""The one source interface: every source the daemon builds (and the tests' fake) has name, collect(partial), close()."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

import pytest

from spark_watchd.sources import build_sources
from spark_watchd.sources.base import Source, SourceUnavailable
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.testing import FakeNvml
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from tests.conftest import FIXTURES
from tests.support.fakes import FakeSource

GB10 = FIXTURES / "hosts" / "gb10-eviction"


def _interface(obj) -> list[str]:
    """What `obj` lacks of the Source protocol, as readable complaints (empty when it conforms)."""
    problems = []
    if not isinstance(getattr(obj, "name", None), str) or not obj.name:
        problems.append("name is not a non-empty str")
    for meth in ("close", "collect"):
        fn = getattr(obj, meth, None)
        if not callable(fn):
            problems.append(f"no {meth}()")
            continue
        proto = [p for p in inspect.signature(getattr(Source, meth)).parameters if p != "self"]
        params = inspect.signature(fn).parameters.values()
        required = [
            p.name
            for p in params
            if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(required) != len(proto):
            problems.append(f"{meth}{inspect.signature(fn)} does not take {proto}")
    return problems


@pytest.fixture
def sources():
    settings = SourcesSettings(
        proc_root=str(GB10 / "proc"), sys_root=str(GB10 / "sys"), fast_watch_interval_s=0
    )
    built = build_sources(settings, nvml=FakeNvml.gb10())
    yield built
    for s in built:
        s.close()


def test_every_built_source_implements_the_interface(sources):
    assert {s.name: _interface(s) for s in sources} == {s.name: [] for s in sources}


def test_source_names_are_distinct_labels(sources):
    names = [s.name for s in sources]
    assert len(names) == len(set(names))
    assert all(n.replace("_", "").isalnum() and n.islower() for n in names)


def test_each_source_returns_a_mapping_of_fields_given_what_came_before(sources):
    partial: dict = {}
    for s in sources:
        out = s.collect(partial)
        assert isinstance(out, Mapping), s.name
        assert not set(out) & {k for k in partial if not k.startswith("_")}, f"{s.name} overwrites a field"
        partial.update(out)


def test_the_throughput_tracker_is_a_source():
    tracker = JobTracker(ProgressSettings(), clock=lambda: 1.0)
    assert _interface(tracker) == []
    assert tracker.collect({}) == {"throughput": ()}  # no jobs: an empty field, not a down source


def test_the_tests_fake_source_keeps_to_the_interface():
    assert _interface(FakeSource()) == []


def test_a_checker_notices_what_breaks_the_interface():
    class NoClose:
        name = "x"

        def collect(self):  # forgot `partial`
            return {}

    assert _interface(NoClose()) == ["no close()", "collect() does not take ['partial']"]


def test_source_unavailable_is_an_ordinary_exception_carrying_its_reason():
    err = SourceUnavailable("NVML: driver not loaded")
    assert isinstance(err, Exception)  # the collector's `except Exception` marks the source down
    assert str(err) == "NVML: driver not loaded"
