"""Configuration of the sources (`[sources]` in config.toml)."""

from pydantic import BaseModel, ConfigDict, Field


class SourcesSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Roots are injectable so tests and containers point at another tree (like node_exporter --path.procfs).
    proc_root: str = Field("/proc", description="Where /proc is mounted.")
    sys_root: str = Field("/sys", description="Where /sys is mounted.")
