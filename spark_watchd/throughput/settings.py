"""Configuration of progress reports and the run ledger (`[progress]` in config.toml)."""

from pydantic import BaseModel, ConfigDict


class ProgressSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")
