"""The shared settings types carry their range, and a field's own bounds add to it."""

import pytest
from pydantic import BaseModel, Field, ValidationError

from spark_watchd.sample.quantities import Bytes, Count, Delay, Level, Positive, Seconds, Share


@pytest.mark.parametrize(
    ("kind", "ok", "refused", "message"),
    [
        (Seconds, (0.001, 1e6), (0, -1), "greater than 0"),
        (Positive, (0.5, 240), (0, -0.1), "greater than 0"),
        (Delay, (0, 3600), (-0.001,), "greater than or equal to 0"),
        (Level, (0, 99.5), (-1,), "greater than or equal to 0"),
        (Share, (0.01, 1), (0, 1.01), "than"),
        (Bytes, (0, 4 * 1024**3), (-1,), "greater than or equal to 0"),
        (Count, (1, 64), (0, -3), "greater than or equal to 1"),
    ],
)
def test_each_kind_accepts_its_range_and_refuses_outside(kind, ok, refused, message):
    class M(BaseModel):
        x: kind  # type: ignore[valid-type]

    for v in ok:
        assert M(x=v).x == v
    for v in refused:
        with pytest.raises(ValidationError, match=message):
            M(x=v)


def test_field_bounds_merge_with_the_kinds_own():
    class M(BaseModel):
        timeout_s: Seconds = Field(5.0, le=60, description="d")

    assert M().timeout_s == 5.0
    assert M.model_fields["timeout_s"].description == "d"
    with pytest.raises(ValidationError, match="less than or equal to 60"):
        M(timeout_s=61)
    with pytest.raises(ValidationError, match="greater than 0"):
        M(timeout_s=0)
