"""What `record` writes, `replay` reads: every serving figure of every kind, pushed past float range, NaN or
negative by the server, leaves the source as a finite number or null, so the trace reader accepts it."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from spark_watchd.sample.serving import ServingReading, check_serving
from spark_watchd.sources.serving_endpoints import Endpoint
from spark_watchd.sources.serving_parse import _NAMES, ExpositionError, parse_metrics, parse_slots
from spark_watchd.sources.serving_reading import finite, reading

NUMBERS = [f.name for f in dataclasses.fields(ServingReading) if f.type == "float | None" and f.name != "ts"]


def _exposition(kind: str, value: str) -> str:
    """Every family this kind's figures come from, on two engines, each sample `value`."""
    out = []
    for names in _NAMES[kind].values():
        for name in names:
            if name.endswith(("seconds",)) and "throughput" not in name:
                out.append(f"# TYPE {name} histogram")
                for le in ("0.1", "+Inf"):
                    out += [f'{name}_bucket{{engine="{e}",le="{le}",model_name="m"}} {value}' for e in "01"]
                out += [f'{name}_count{{engine="{e}",model_name="m"}} {value}' for e in "01"]
                out += [f'{name}_sum{{engine="{e}",model_name="m"}} {value}' for e in "01"]
            elif (
                name.endswith(("tokens", "preemptions", "predicted", "requests")) and "max_total" not in name
            ):
                out.append(f"# TYPE {name} counter")
                out += [f'{name}_total{{engine="{e}",model_name="m"}} {value}' for e in "01"]
            else:
                out.append(f"# TYPE {name} gauge")
                out += [f'{name}{{engine="{e}",model_name="m"}} {value}' for e in "01"]
    if kind == "vllm":
        out.append("# TYPE vllm:cache_config_info gauge")
        out.append(f'vllm:cache_config_info{{block_size="{value}",num_gpu_blocks="{value}"}} 1.0')
    return "\n".join(out) + "\n"


def _slots(value: str) -> str:
    slot = '{"id": %d, "is_processing": true, "next_token": [{"n_decoded": %s}]}'
    return "[" + ", ".join(slot % (i, value) for i in range(2)) + "]"


@pytest.mark.parametrize("kind", sorted(_NAMES))
@pytest.mark.parametrize(
    "first,second", [("1e308", "1.7e308"), ("0", "1e308"), ("NaN", "-5"), ("-1e308", "+Inf")]
)
def test_every_serving_figure_of_every_kind_is_finite_in_the_trace_and_the_trace_reader_takes_it(
    kind, first, second
):
    ep = Endpoint(f"{kind}:1", kind, "http://127.0.0.1:1", 1)
    scrapes = []
    for value in (first, second):
        try:
            figures = parse_metrics(kind, _exposition(kind, value))
        except ExpositionError:
            figures = None  # nothing usable: down with the reason, a finite reading too
        if figures is not None and kind == "llamacpp":
            figures["in_flight"] = parse_slots(_slots(value.replace("NaN", "1e308").replace("+Inf", "1e308")))
        scrapes.append(figures)
    a, b = scrapes
    if b is None:
        return
    r = finite(reading(ep, 1.0 + 1e-9, b, a, 1.0 if a is not None else None))
    d = r.to_dict()
    text = json.dumps(d, allow_nan=False)  # strict JSON: what `record` writes
    for field in NUMBERS:
        v = d.get(field)
        assert v is None or (math.isfinite(v) and v >= 0), (field, v)
    check_serving(json.loads(text), "serving[0]")  # what `replay` reads
    assert ServingReading.from_dict(json.loads(text)) == r
