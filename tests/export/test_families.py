"""Metric family constructors: the sparkwatchd_ prefix, labelled or one unlabelled value, counters as _total."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from spark_watchd.export.families import PREFIX, counter, gauge


def _render(*fams) -> str:
    class _C:
        def collect(self):
            return list(fams)

    reg = CollectorRegistry()
    reg.register(_C())
    return generate_latest(reg).decode()


def test_gauge_name_carries_the_prefix():
    g = gauge("memory_budget_bytes", "doc", value=5.0)
    assert g.name == PREFIX + "memory_budget_bytes" and g.type == "gauge"


def test_unlabelled_gauge_holds_its_one_value():
    text = _render(gauge("up_example", "An example.", value=3.5))
    assert "sparkwatchd_up_example 3.5" in text
    assert "# HELP sparkwatchd_up_example An example." in text


def test_labelled_gauge_starts_empty_and_takes_add_metric():
    g = gauge("gpu_temp_celsius", "doc", labels=("gpu",))
    assert g.samples == []
    g.add_metric(["0"], 71.0)
    assert 'sparkwatchd_gpu_temp_celsius{gpu="0"} 71.0' in _render(g)


def test_labels_accept_any_iterable():
    g = gauge("x", "doc", labels=iter(["a", "b"]))
    g.add_metric(["1", "2"], 1.0)
    assert 'sparkwatchd_x{a="1",b="2"} 1.0' in _render(g)


def test_zero_is_a_value_not_a_labelled_family():
    g = gauge("zero", "doc", value=0.0)
    assert [s.value for s in g.samples] == [0.0]


def test_counter_is_exposed_with_total():
    c = counter("events", "Events seen.", value=7)
    assert c.type == "counter"
    text = _render(c)
    assert "sparkwatchd_events_total 7.0" in text
    assert c.name == "sparkwatchd_events"  # the client adds _total; a name ending in it would double it


def test_labelled_counter_takes_add_metric():
    c = counter("findings", "doc", labels=("gotcha",))
    c.add_metric(["G4"], 2)
    assert 'sparkwatchd_findings_total{gotcha="G4"} 2.0' in _render(c)
