"""Configuration of progress reports and the run ledger (`[progress]` in config.toml)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from spark_watchd.sample.quantities import Count, Delay, Seconds

# Ready-made log-tail patterns (see logtail.py): names accepted by `[[progress.log_tail]] pattern`.
PATTERN_PRESETS = ("hf", "tqdm")


class LogTailSettings(BaseModel):
    """One log file to follow for a trainer that cannot report by itself."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Log file to follow; rotation (new inode) and truncation are survived.")
    job: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+/-]*$",
        description="Job name the extracted progress is reported under (the `job` label).",
    )
    pattern: str = Field(
        "hf",
        description="'hf' (Hugging Face Trainer bar and log dicts), 'tqdm', or a regex with a named "
        "group `step` and optional `tokens`, `samples`, `total`.",
    )
    tokens_per_step: int | None = Field(
        None, ge=1, description="When the log has no token count: tokens are step times this."
    )
    from_start: bool = Field(
        False,
        description="Read the file from its beginning on first open (default: only new lines; old lines "
        "carry no timestamps, so replaying them would fake a burst of progress).",
    )

    @field_validator("pattern")
    @classmethod
    def _pattern_compiles(cls, v: str) -> str:
        if v in PATTERN_PRESETS:
            return v
        try:
            rx = re.compile(v)
        except re.error as e:
            raise ValueError(f"not a preset ({', '.join(PATTERN_PRESETS)}) and not a valid regex: {e}") from e
        if "step" not in rx.groupindex:
            raise ValueError("a custom pattern needs a named group (?P<step>...)")
        return v


class ProgressSettings(BaseModel):
    """Progress reports from trainers (POST /api/v1/progress, log tails), per-job metrics, the run ledger."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Accept progress reports and export training metrics.")
    token: SecretStr | None = Field(
        None,
        description="Bearer token that lets non-loopback clients report. None: loopback only.",
    )
    trust_loopback: bool = Field(
        True,
        description="Loopback clients report without the token. Turn off behind a reverse proxy on this "
        "host (every proxied client arrives from loopback) and set `token`.",
    )
    max_body_bytes: int = Field(
        65536,
        ge=256,
        le=1 << 20,
        description="Largest report body; larger gets 413 (a report is ~100 bytes).",
    )
    job_expiry_s: Seconds = Field(
        900.0,
        description="A job silent this long is dropped from the metrics and its run closed in the ledger, so "
        "`job` labels do not pile up. 15 min covers a long evaluation or checkpoint save between reports.",
    )
    max_jobs: Count = Field(
        64,
        le=10000,
        description="Most jobs tracked at once; a report for a new job beyond it gets 429.",
    )
    warmup_steps: int = Field(
        20,
        ge=0,
        description="Steps after a run starts that are not part of its baseline: the first steps carry "
        "compilation, allocator growth and data-loader start-up.",
    )
    warmup_s: Delay = Field(120.0, description="Seconds after a run starts not part of its baseline.")
    baseline_s: Seconds = Field(
        300.0,
        description="Seconds of progress after warm-up averaged into the baseline step time "
        "(a GB10 warms to its steady temperature in minutes: throttling shows later, as a ratio above 1).",
    )
    ledger: bool = Field(True, description="Write one JSON line per finished run to STATE_DIR/runs.jsonl.")
    ledger_recent_samples: int = Field(
        2880,
        ge=16,
        description="Samples kept to cover runs whose reports carry earlier timestamps (a day at 30 s).",
    )
    log_tail: list[LogTailSettings] = Field(
        default_factory=list,
        description="Log files to follow: `[[progress.log_tail]]` tables with path, job, pattern (hf, tqdm or a regex).",
    )
    log_tail_poll_s: Seconds = Field(1.0, le=60, description="How often followed logs are read.")
    log_tail_min_interval_s: Delay = Field(
        5.0, description="Least time between two reports derived from one log (tqdm redraws ~10x/s)."
    )

    @model_validator(mode="after")
    def _token_when_loopback_untrusted(self) -> ProgressSettings:
        if not self.trust_loopback and not self.token_value():
            raise ValueError("trust_loopback = false needs a token, or no client could ever report")
        return self

    @model_validator(mode="after")
    def _unique_tail_jobs(self) -> ProgressSettings:
        jobs = [t.job for t in self.log_tail]
        dup = {j for j in jobs if jobs.count(j) > 1}
        if dup:
            raise ValueError(f"log_tail jobs must be unique, repeated: {', '.join(sorted(dup))}")
        return self

    def token_value(self) -> str | None:
        """The configured bearer token as plain text, or None."""
        if self.token is None:
            return None
        value = self.token.get_secret_value()
        return value or None
