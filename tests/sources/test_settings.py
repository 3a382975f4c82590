"""`[sources]` settings: roots, NVML and nvidia-smi bounds, the fast watch off or at least 0.1 s."""

from __future__ import annotations

import pydantic
import pytest

from spark_watchd.config import load_settings
from spark_watchd.errors import ConfigError
from spark_watchd.sources.settings import SourcesSettings


@pytest.mark.parametrize("interval", [0, 0.1, 1.0])
def test_the_fast_watch_is_off_or_at_least_a_tenth_of_a_second(interval):
    assert SourcesSettings(fast_watch_interval_s=interval).fast_watch_interval_s == interval


@pytest.mark.parametrize("interval", [0.01, 0.099])
def test_a_busier_fast_watch_is_refused_saying_what_is_allowed(interval):
    with pytest.raises(pydantic.ValidationError, match=r"must be 0 \(off\) or at least 0.1 s"):
        SourcesSettings(fast_watch_interval_s=interval)


def test_environment_roots_reach_the_sources_and_bad_bounds_name_the_key(tmp_path):
    s = load_settings(
        None,
        environ={
            "SPARK_WATCHD_SOURCES__PROC_ROOT": "/host/proc",
            "SPARK_WATCHD_SOURCES__SYS_ROOT": "/host/sys",
        },
    )
    assert (s.sources.proc_root, s.sources.sys_root) == ("/host/proc", "/host/sys")
    cfg = tmp_path / "c.toml"
    cfg.write_text("[sources]\nnvml_backoff_max_s = 0\n")
    with pytest.raises(ConfigError, match="sources.nvml_backoff_max_s"):
        load_settings(str(cfg), environ={})
