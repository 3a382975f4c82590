"""Configuration of the status page and in-memory history (`[web]` in config.toml)."""

from pydantic import BaseModel, ConfigDict


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
