"""Configuration of the status page and in-memory history (`[web]` in config.toml)."""

from pydantic import BaseModel, ConfigDict, Field

from spark_watchd.sample.quantities import Count, Positive


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # 12 h at 30 s is 1440 records; the cap leaves room for 1 s replays and demos
    # (20,000 records hold about 7.6 MB: bench/history_memory.py).
    history_max_records: int = Field(
        20_000,
        ge=10,
        le=1_000_000,
        description="Most samples the in-memory history keeps (oldest dropped first).",
    )
    history_hours: Positive = Field(
        24.0,
        le=24 * 31,
        description="Samples older than this (behind the newest) are dropped from history.",
    )
    history_max_jobs: int = Field(
        8, ge=0, le=64, description="Most training jobs kept per history record (the busiest first)."
    )
    history_api_max_records: Count = Field(
        5_000,
        le=1_000_000,
        description="Most records one GET /api/v1/history answer carries (the newest).",
    )
    page_hours: Positive = Field(
        12.0, le=24 * 31, description="Hours of history the status page charts show."
    )
    page_refresh_seconds: float = Field(
        10.0, ge=0.5, le=3600, description="How often the status page fetches new data (no full reload)."
    )
