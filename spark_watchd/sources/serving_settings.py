"""Configuration of the inference servers' telemetry (`[serving]` in config.toml)."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from spark_watchd.sample.serving import SERVING_KINDS
from spark_watchd.sources.serving_endpoints import checked_url


def _url(v: str | None) -> str | None:
    return None if v is None else checked_url(v)


class ServerOverride(BaseModel):
    """One discovered server (keyed by its label, e.g. "vllm:8000"): off, or scraped elsewhere."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Scrape this server.")
    url: str | None = Field(None, description="Scrape http://HOST:PORT instead of the discovered endpoint.")
    auth_header_file: str | None = Field(None, description="File holding this server's Authorization value.")

    _check_url = field_validator("url")(lambda v: _url(v))


class ExtraEndpoint(BaseModel):
    """A server the process table cannot show (in a container, another user's): scraped as configured."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="vllm, sglang, llamacpp, trtllm or ollama.")
    url: str = Field(description="http://HOST:PORT on loopback or this host's own address.")
    name: str | None = Field(None, max_length=40, description="Its server label; default KIND:PORT.")

    @field_validator("kind")
    @classmethod
    def _kind(cls, v: str) -> str:
        if v not in SERVING_KINDS:
            raise ValueError(f"must be one of {', '.join(SERVING_KINDS)}")
        return v

    _check_url = field_validator("url")(lambda v: _url(v))


class ServingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(True, description="Read the inference servers' own telemetry (serving[]).")
    # A scrape is a few kB in milliseconds; a server that takes longer is stalled, and is shown as down.
    timeout_s: float = Field(2.0, gt=0, le=30, description="Bound on one scrape (connect + whole answer).")
    interval_s: float | None = Field(
        None,
        ge=1,
        le=3600,
        description="Seconds between scrapes of each server; default the daemon interval.",
    )
    # vLLM's exposition with every histogram is ~100 kB and ~500 series per engine: 1 MiB and 5,000 series are
    # ten engines, more than a Spark runs. Unbounded, a fake server's 3.9 MB of distinct series scraped each
    # second cost a fifth of a core and +30 MiB; within these bounds ~5 % (bench/serving_cost.py --flood).
    max_response_bytes: int = Field(
        1 << 20,
        ge=1024,
        le=64 << 20,
        description="Answers larger than this are refused (the server is down, naming this bound).",
    )
    max_series: int = Field(
        5_000,
        ge=100,
        le=1_000_000,
        description="Expositions with more sample lines than this are not parsed (the server is down, "
        "naming this bound).",
    )
    auth_header_file: str | None = Field(
        None,
        description="File whose content is sent as the Authorization header to configured endpoints, and to "
        "a discovered server only when its listening socket is held by a process of an auth_uids uid; "
        "read at each scrape, never logged.",
    )
    # Any local user can start a process whose argv reads `vllm serve --port N`: the operator's key goes
    # only to sockets of the users trusted here.
    auth_uids: list[Annotated[int, Field(ge=0, le=2**32 - 2)]] | None = Field(
        None,
        max_length=64,
        description="Uids whose discovered servers may receive auth_header_file; default the daemon's own uid "
        "and root.",
    )
    servers: dict[str, ServerOverride] = Field(
        default_factory=dict,
        description='Per-server overrides keyed by label ([serving.servers."vllm:8000"]).',
    )
    endpoints: list[ExtraEndpoint] = Field(default_factory=list, max_length=32, description="Extra servers.")

    def allowed_uids(self) -> frozenset[int]:
        """The uids a discovered server's socket must belong to for the auth header to go there."""
        if self.auth_uids is not None:
            return frozenset(self.auth_uids)
        return frozenset((0, os.geteuid()))
