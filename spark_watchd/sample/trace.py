"""trace-v1 I/O: an append-only writer (one flushed line per sample) and a line-checked reader."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from spark_watchd.sample.codec import dumps_strict
from spark_watchd.sample.codec import loads as _loads
from spark_watchd.sample.files import check_regular, open_regular
from spark_watchd.sample.model import Sample, check_sample
from spark_watchd.sample.redact import redact_sample_dict
from spark_watchd.sample.validate import FieldError


class TraceError(ValueError):
    """A trace line that is not a trace-v1 sample; names the file and line number."""

    def __init__(self, path: str, lineno: int, reason: str):
        super().__init__(f"{path}:{lineno}: {reason}")
        self.path = path
        self.lineno = lineno
        self.reason = reason


def parse_line(line: str, path: str = "<trace>", lineno: int = 0) -> dict[str, Any]:
    """Decode one trace line into its JSON object, or raise TraceError saying why."""
    obj = _decode(line, path, lineno)
    _check(obj, path, lineno)
    return obj


def _decode(line: str, path: str, lineno: int) -> Any:
    try:
        return _loads(line)
    except ValueError as exc:
        where = f" at column {exc.colno}" if hasattr(exc, "colno") else ""
        raise TraceError(path, lineno, f"not JSON ({getattr(exc, 'msg', exc)}{where})") from None
    except RecursionError:  # `[[[[...` 100,000 deep: the decoder's recursion, not ours
        raise TraceError(path, lineno, "not a trace-v1 sample: JSON nested too deep") from None


def _check(obj: Any, path: str, lineno: int) -> None:
    if not isinstance(obj, dict):
        raise TraceError(path, lineno, f"not a JSON object but {type(obj).__name__}")
    if "v" not in obj:
        raise TraceError(path, lineno, "missing key 'v'")
    if "ts" not in obj:
        raise TraceError(path, lineno, "missing key 'ts'")
    if obj["v"] != 1:
        raise TraceError(path, lineno, f"unsupported trace version {obj['v']!r} (this reader knows 1)")
    try:
        check_sample(obj)
    except FieldError as err:
        raise TraceError(path, lineno, str(err)) from None


def _parsed(path: str | os.PathLike, parse, skip_bad: bool, on_skip) -> Iterator:
    """parse(line, path, lineno) of each non-blank line; a TraceError raises or, with skip_bad, goes to on_skip."""
    p = str(path)
    with open(p, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.isspace():  # a blank line (isspace: no copy of the line, as strip() makes)
                continue
            try:
                yield parse(line, p, lineno)
            except TraceError as err:
                if not skip_bad:
                    raise
                if on_skip is not None:
                    on_skip(err)


def iter_trace_dicts(path: str | os.PathLike, *, skip_bad: bool = False, on_skip=None) -> Iterator[dict]:
    """Yield each sample object of a trace file; bad lines raise TraceError or, with skip_bad, are reported to on_skip."""
    return _parsed(path, parse_line, skip_bad, on_skip)


def parse_sample(line: str, path: str = "<trace>", lineno: int = 0) -> Sample:
    """The Sample of one trace line, or TraceError naming the line and what is wrong with it. The common shape
    takes Sample.fast's one pass (checked and built at once); anything else parse_line's checks and
    Sample.from_dict, which a line the one pass refused reaches with its exact messages."""
    obj = _decode(line, path, lineno)
    if (sample := sample_from(obj)) is not None:
        return sample
    _check(obj, path, lineno)
    try:
        return Sample.from_dict(obj)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise TraceError(
            path, lineno, f"sample at ts={obj.get('ts')!r} has a malformed field: {exc}"
        ) from None


_fast = Sample.fast
_OFF_SHAPE = (KeyError, TypeError, ValueError, AttributeError)  # FieldError is a ValueError


def sample_from(obj: Any) -> Sample | None:
    """The Sample of a decoded trace line of the common shape, checked; None: let the exact path decide.

    A line the exact path refuses is never accepted here, and an accepted line gives the same Sample."""
    try:
        if type(obj) is dict and obj["v"] == 1:
            return _fast(obj)
    except _OFF_SHAPE:  # a missing key, a list where an object is, a FieldError of a rare key...
        pass
    return None


def read_trace(path: str | os.PathLike, *, skip_bad: bool = False, on_skip=None) -> Iterator[Sample]:
    """Yield Samples from a trace file; bad lines raise TraceError or, with skip_bad, are reported to on_skip."""
    return _parsed(path, parse_sample, skip_bad, on_skip)


def repair_torn_tail(path: str | os.PathLike) -> int:
    """Cut a torn last line (a writer killed mid-write) so appends start on a clean line; returns bytes dropped."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(p, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return 0
        # Find the start of the last (unterminated) line.
        pos = size
        chunk = 65536
        start = 0
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step)
            nl = buf.rfind(b"\n")
            if nl >= 0:
                start = pos + nl + 1
                break
        fh.seek(start)
        tail = fh.read()
        try:
            parse_line(tail.decode("utf-8"))
        except (TraceError, UnicodeDecodeError):
            fh.truncate(start)
            fh.flush()
            os.fsync(fh.fileno())
            return size - start
        # A complete sample missing only its newline: keep it.
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n")
        fh.flush()
        os.fsync(fh.fileno())
        return 0


class TraceWriter:
    """Append samples to a trace-v1 file, one line each, flushed so a crash loses at most the line in flight;
    argv secrets redacted (`record`, `run --record`, the captures on trouble)."""

    def __init__(self, path: str | os.PathLike, *, nofollow: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if nofollow:  # a file in the state dir: never through a link, never a FIFO (sample/files.py)
            check_regular(self.path)
        self.repaired_bytes = repair_torn_tail(self.path)
        if nofollow:
            fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._fh: IO[str] | None = open(fd, "a", encoding="utf-8")  # noqa: SIM115
        else:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    def write(self, sample: Sample) -> None:
        if self._fh is None:
            raise ValueError("trace writer is closed")
        # argv secrets (--api-key ..., HF_TOKEN=...) are not kept on disk: sample/redact.py
        self._fh.write(dumps_strict(redact_sample_dict(sample.to_dict()), separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
