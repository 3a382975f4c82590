"""Metric family constructors with the project's name prefix, shared by every renderer."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

PREFIX = "sparkwatchd_"


def gauge(name: str, doc: str, labels: Iterable[str] = (), value: float | None = None) -> GaugeMetricFamily:
    """sparkwatchd_<name>: a labelled gauge to fill with add_metric, or one unlabelled value."""
    if value is not None:
        return GaugeMetricFamily(PREFIX + name, doc, value=value)
    return GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))


def counter(
    name: str, doc: str, labels: Iterable[str] = (), value: float | None = None
) -> CounterMetricFamily:
    """sparkwatchd_<name> (exposed with _total): a labelled counter, or one unlabelled value."""
    if value is not None:
        return CounterMetricFamily(PREFIX + name, doc, value=value)
    return CounterMetricFamily(PREFIX + name, doc, labels=list(labels))
