"""Where each inference server answers: pure functions of its launcher's argv and environment.

The workload table (sample/groups.py) already knows each server's kind and the launcher that carries its
flags; the endpoint is `--host`/`--port` on that command line, else the server's documented default
(vLLM `vllm serve` 8000 on every interface, SGLang 30000 on 127.0.0.1, llama-server 8080 on 127.0.0.1,
trtllm-serve 8000 on localhost, Ollama `OLLAMA_HOST` else 127.0.0.1:11434). Only loopback and this host's
own addresses are ever scraped: a wildcard listen (0.0.0.0, ::) is scraped on 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple
from urllib.parse import urlsplit

from spark_watchd.sample.workloads import _flag

DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000, "llamacpp": 8080, "trtllm": 8000, "ollama": 11434}
# llama-server reads its flags from LLAMA_ARG_* as well (common/arg.cpp), SGLang from nothing, vLLM from
# nothing for host/port: only the command line and these.
_ENV_PORT = {"llamacpp": "LLAMA_ARG_PORT"}
_ENV_HOST = {"llamacpp": "LLAMA_ARG_HOST"}
_WILDCARDS = {"", "0.0.0.0", "::", "[::]", "*"}
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class Endpoint(NamedTuple):
    """One server to scrape: `server` is its bounded metric label ("vllm:8000"), `pid` its workload's."""

    server: str
    kind: str
    base_url: str  # scheme://host:port, never a path
    pid: int | None = None


def scrape_host(host: str | None, own_addresses: Collection[str] = ()) -> str | None:
    """The address to scrape for a listen host, or None when it is not this machine's."""
    h = (host or "").strip()
    if h in _WILDCARDS:
        return "127.0.0.1"
    if h.lower() in _LOOPBACK_NAMES:
        return "127.0.0.1"
    h = h.strip("[]")
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return None  # a name would need DNS, and DNS can point anywhere: not scraped
    if ip.is_loopback or str(ip) in own_addresses:
        return f"[{ip}]" if ip.version == 6 else str(ip)
    return None


def _port(text: str | None) -> int | None:
    try:
        p = int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return p if 0 < p < 65536 else None


def ollama_host(value: str | None) -> tuple[str, int]:
    """(host, port) from OLLAMA_HOST as Ollama reads it (envconfig.Host): scheme and path optional."""
    v = (value or "").strip().strip("\"'")
    if not v:
        return "127.0.0.1", 11434
    if "://" not in v:
        v = "http://" + v
    try:
        parts = urlsplit(v)
        port = parts.port
    except ValueError:
        return "127.0.0.1", 11434
    host = parts.hostname or "127.0.0.1"
    if port is None:
        port = 80 if parts.scheme == "http" and ":" in (parts.netloc or "") else 11434
    return host, port


def endpoint_for(
    kind: str,
    argv: Sequence[str],
    pid: int | None = None,
    environ: Mapping[str, str] | None = None,
    own_addresses: Collection[str] = (),
) -> Endpoint | str:
    """The endpoint of a server launched with argv (and environ, where readable), or why there is none."""
    env = environ or {}
    if kind == "ollama":
        host, port = ollama_host(env.get("OLLAMA_HOST"))
    elif kind in DEFAULT_PORTS:
        host = _flag(argv, ("--host",)) or env.get(_ENV_HOST.get(kind, ""), "")
        port_text = _flag(argv, ("--port",)) or env.get(_ENV_PORT.get(kind, ""))
        if port_text is None:
            port = DEFAULT_PORTS[kind]
        else:
            p = _port(port_text)
            if p is None:
                return f"--port {port_text!r} is not a port"
            port = p
    else:
        return f"{kind} is not a server kind"
    addr = scrape_host(host, own_addresses)
    if addr is None:
        return f"listens on {host}, which is not this host's address: not scraped"
    return Endpoint(f"{kind}:{port}", kind, f"http://{addr}:{port}", pid)


def parse_environ(raw: bytes) -> dict[str, str]:
    """/proc/PID/environ (NUL-separated KEY=VALUE) as a dict; undecodable entries dropped."""
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq and key:
            try:
                out[key.decode()] = value.decode()
            except UnicodeDecodeError:
                continue
    return out


def checked_url(url: str, own_addresses: Collection[str] = ()) -> str:
    """A configured base URL, refused (ValueError naming why) unless http(s) on loopback or this host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} must be http://HOST:PORT or https://HOST:PORT")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{url!r} must name only scheme, host and port (the path is the server's own)")
    addr = scrape_host(parts.hostname, own_addresses)
    if addr is None:
        raise ValueError(f"{url!r} is not loopback or an address of this host: not scraped")
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{addr}:{port or default}"
