"""Configuration of the embedded webhook notifier (`[notify]` in config.toml)."""

from pydantic import BaseModel, ConfigDict


class NotifySettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
