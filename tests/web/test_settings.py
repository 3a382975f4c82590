"""`[web]` settings: history and page bounds, refused outside their range when loaded."""

from __future__ import annotations

import pydantic
import pytest

from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from spark_watchd.web.settings import WebSettings


def test_defaults_keep_a_day_of_history_and_chart_half_of_it():
    s = WebSettings()
    assert s.history_hours == 24.0 and s.page_hours == 12.0 and s.page_hours <= s.history_hours
    assert s.history_api_max_records <= s.history_max_records


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("history_max_records", 9),
        ("history_hours", 0),
        ("history_max_jobs", 65),
        ("page_refresh_seconds", 0.1),
    ],
)
def test_out_of_range_values_are_refused(key, value):
    with pytest.raises(pydantic.ValidationError, match=key):
        WebSettings(**{key: value})


def test_unknown_web_keys_are_errors_naming_them(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[web]\nhistory_days = 2\n")
    with pytest.raises(ConfigError, match="web.history_days"):
        load_settings(str(cfg), environ={})
