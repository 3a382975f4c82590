"""Configuration: TOML file, then SPARK_WATCHD_* environment (nested with __), then flags.

Each section's model lives with the code that uses it; this module only composes
and loads them. A bad value exits 78 (EX_CONFIG) naming the file, key and reason.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from spark_watchd.diagnose.thresholds import Thresholds
from spark_watchd.notify_settings import NotifySettings
from spark_watchd.sources.settings import SourcesSettings
from spark_watchd.throughput.settings import ProgressSettings
from spark_watchd.web.settings import WebSettings

DEFAULT_CONFIG_PATH = "/etc/spark-watchd/config.toml"


class DaemonSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    listen: str = Field("127.0.0.1:9761", description="HOST:PORT for HTTP; loopback by default.")
    interval: float = Field(30.0, ge=1, le=3600, description="Seconds between samples.")
    state_dir: str = Field(
        "/var/lib/spark-watchd", description="State file, event journal, ledger, captures."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SPARK_WATCHD_", env_nested_delimiter="__", extra="forbid")

    daemon: DaemonSettings = DaemonSettings()
    sources: SourcesSettings = SourcesSettings()
    thresholds: Thresholds = Thresholds()
    progress: ProgressSettings = ProgressSettings()
    notify: NotifySettings = NotifySettings()
    web: WebSettings = WebSettings()
