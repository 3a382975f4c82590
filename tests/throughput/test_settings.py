"""`[progress]` configuration: TOML and environment reach ProgressSettings; bad values exit 78 naming the key."""

from __future__ import annotations

from spark_watchd import config
from tests.conftest import run_cli


def test_progress_section_from_toml_and_environment(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(
        '[progress]\njob_expiry_s = 300\n\n[[progress.log_tail]]\npath = "/var/log/train.log"\njob = "sft"\n'
        'pattern = "tqdm"\n'
    )
    s = config.load_settings(str(cfg), environ={"SPARK_WATCHD_PROGRESS__TOKEN": "s3cr3t-xyz"})
    assert s.progress.job_expiry_s == 300
    assert s.progress.token_value() == "s3cr3t-xyz"
    assert [(t.job, t.pattern) for t in s.progress.log_tail] == [("sft", "tqdm")]
    assert "s3cr3t-xyz" not in repr(s.progress)  # the token never shows in logs or reprs


def test_bad_log_tail_pattern_exits_78_naming_file_and_key(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[[progress.log_tail]]\npath = "/x.log"\njob = "sft"\npattern = "iter (\\\\d+)"\n')
    out = run_cli("runs", "--config", str(cfg))
    assert out.returncode == 78, out.stderr
    assert (
        str(cfg) in out.stderr and "progress.log_tail.0.pattern" in out.stderr and "(?P<step>" in out.stderr
    )
