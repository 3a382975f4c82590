"""Configuration of the embedded webhook notifier (`[notify]` in config.toml)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spark_watchd.sample.quantities import Count, Delay, Seconds


class NotifySettings(BaseModel):
    """Where and how the daemon posts finding transitions and events; off while `url` is unset."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        None,
        description="Webhook to POST to (http/https); unset disables the notifier. E.g. https://ntfy.sh/my-spark.",
    )
    preset: Literal["json", "ntfy", "slack"] = Field(
        "json",
        description="Body format: generic JSON, ntfy (plain text + Title/Priority/Tags headers), "
        'or slack (Slack-compatible {"text": ...}, also Mattermost/Discord /slack hooks).',
    )
    min_severity: Literal["warning", "critical"] = Field(
        "warning", description="Post transitions that reach or leave this severity; 'critical' = pages only."
    )
    min_interval_s: Delay = Field(
        300.0,
        description="Least seconds between two posts about the same gotcha (or event kind); a change in "
        "between is held and coalesced. Escalations to critical are never held by it.",
    )
    burst: Count = Field(5, description="At most this many posts per burst_window_s, all gotchas together.")
    burst_window_s: Seconds = Field(600.0, description="Window of the burst cap, seconds.")
    timeout_s: Seconds = Field(5.0, le=120, description="HTTP timeout per attempt, seconds.")
    retries: int = Field(
        3, ge=0, le=10, description="Retries after a failed attempt (5xx, 429, network error)."
    )
    backoff_s: Delay = Field(2.0, description="First retry delay, doubled on each further retry.")
    queue_size: Count = Field(
        100, description="Notifications waiting to be posted; the oldest is dropped when full."
    )
    token: str | None = Field(None, description="Sent as `Authorization: Bearer TOKEN` (ntfy access tokens).")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra HTTP headers for every post.")
    events: bool = Field(True, description="Also post events: eviction, oom_kill, reboot.")
    resolved: bool = Field(True, description="Also post the way back to ok.")

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v
