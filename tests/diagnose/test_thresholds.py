"""Thresholds: one validated, frozen settings object; every field documented; bad values named at load."""

from __future__ import annotations

import pydantic
import pytest

from spark_watchd.config import load_settings
from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.errors import ConfigError


def test_every_threshold_has_a_description_for_the_config_reference():
    missing = [name for name, f in Thresholds.model_fields.items() if not (f.description or "").strip()]
    assert not missing, missing


def test_the_gb10_defaults_the_classifiers_rely_on():
    th = Thresholds()
    # NVML on GB10: slowdown 86 C, shutdown 90 C; a window holds 10-20 samples at 30-60 s.
    assert (th.default_slowdown_temp_c, th.default_shutdown_temp_c) == (86.0, 90.0)
    assert th.window_s >= 10 * 60 / 2 and th.max_gap_s > 0


def test_thresholds_are_frozen_so_a_running_classifier_never_sees_them_change():
    th = Thresholds()
    with pytest.raises(pydantic.ValidationError):
        th.window_s = 1.0  # type: ignore[misc]
    changed = th.model_copy(update={"psi_some_warn_pct": 5.0})
    assert changed.psi_some_warn_pct == 5.0 and th.psi_some_warn_pct != 5.0


@pytest.mark.parametrize(("key", "value"), [("window_s", 0), ("max_gap_s", -1), ("slowdown_margin_c", -0.5)])
def test_out_of_range_values_are_refused(key, value):
    with pytest.raises(pydantic.ValidationError, match=key):
        Thresholds(**{key: value})


def test_a_misspelt_threshold_in_the_config_file_is_an_error_naming_it(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text("[thresholds]\npsi_some_warn_pc = 5\n")
    with pytest.raises(ConfigError, match="thresholds.psi_some_warn_pc"):
        load_settings(str(cfg), environ={})
    cfg.write_text("[thresholds]\npsi_some_warn_pct = 5\n")
    assert load_settings(str(cfg), environ={}).thresholds.psi_some_warn_pct == 5.0


def test_a_retired_key_in_an_old_config_file_or_the_environment_still_loads(tmp_path):
    # window_max_samples bounded the engine's sample window until issue 11 removed that window.
    cfg = tmp_path / "c.toml"
    cfg.write_text("[thresholds]\nwindow_max_samples = 40\npsi_some_warn_pct = 5\n")
    th = load_settings(str(cfg), environ={}).thresholds
    assert th.psi_some_warn_pct == 5.0 and "window_max_samples" not in th.model_dump()
    env = {"SPARK_WATCHD_THRESHOLDS__WINDOW_MAX_SAMPLES": "40"}
    assert load_settings(None, environ=env).thresholds == Thresholds()
    with pytest.raises(
        ConfigError, match="WINDOW_MAX_SAMPLE: maps to no setting"
    ):  # a misspelling of it is still an error
        load_settings(None, environ={"SPARK_WATCHD_THRESHOLDS__WINDOW_MAX_SAMPLE": "40"})
