"""`[notify]` settings: off without a URL, http(s) only, bounds on retries and timeouts, named at load."""

from __future__ import annotations

import pydantic
import pytest

from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from spark_watchd.notify.settings import NotifySettings


def test_defaults_are_off_json_warning_and_rate_limited():
    s = NotifySettings()
    assert s.url is None and s.preset == "json" and s.min_severity == "warning"
    assert s.min_interval_s > 0 and s.burst >= 1 and s.events and s.resolved


@pytest.mark.parametrize("url", ["https://ntfy.sh/my-spark", "http://127.0.0.1:9/hook"])
def test_http_and_https_urls_are_accepted(url):
    assert NotifySettings(url=url).url == url


@pytest.mark.parametrize("url", ["ftp://x/y", "ntfy.sh/my-spark", "file:///etc/passwd", ""])
def test_other_urls_are_refused_saying_why(url):
    with pytest.raises(pydantic.ValidationError, match="must start with http:// or https://"):
        NotifySettings(url=url)


@pytest.mark.parametrize(
    ("key", "value"),
    [("preset", "teams"), ("retries", 11), ("timeout_s", 0), ("burst", 0), ("queue_size", 0)],
)
def test_values_out_of_their_set_or_range_are_refused(key, value):
    with pytest.raises(pydantic.ValidationError, match=key):
        NotifySettings(**{key: value})


def test_a_bad_notify_url_in_the_config_file_names_the_key(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[notify]\nurl = "ntfy.sh/x"\n')
    with pytest.raises(ConfigError, match="notify.url"):
        load_settings(str(cfg), environ={})
