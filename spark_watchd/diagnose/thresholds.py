"""Every threshold the classifiers use (`[thresholds]` in config.toml), each with the evidence behind it."""

from pydantic import BaseModel, ConfigDict


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
