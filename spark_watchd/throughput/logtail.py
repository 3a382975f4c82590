"""Follow a trainer's log file and turn its progress lines into reports (for trainers that cannot be changed).

Polling, not inotify: it works the same on every filesystem and container, and
one stat() a second is nothing. Rotation (the path gets a new inode) and
truncation (the file shrinks, as logrotate copytruncate does) are survived.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from spark_watchd.logs import get_logger
from spark_watchd.throughput.models import ProgressReport
from spark_watchd.throughput.settings import LogTailSettings, ProgressSettings

log = get_logger("logtail")

# tqdm's bar `  5%|▌    | 50/1000 [00:10<03:10,  4.98it/s]` and the total-less `50it [00:10, 4.98it/s]`.
TQDM_BAR = r"\|\s*(?P<step>\d+)/(?P<total>\d+)\s*\["
TQDM_COUNT = r"(?:^|\s)(?P<step>\d+)it \["
# Hugging Face Trainer log dict: `{'loss': '1.23', ..., 'num_input_tokens_seen': 40960, 'epoch': '0.5'}`
# (transformers 5 prints floats as quoted strings; 4.x printed them bare).
HF_TOKENS = r"'num_input_tokens_seen':\s*'?(?P<tokens>\d+)"
PRESETS: dict[str, tuple[str, ...]] = {
    "tqdm": (TQDM_BAR, TQDM_COUNT),
    # The Trainer's progress bar is a tqdm bar; its log dicts bring the token count.
    "hf": (TQDM_BAR, TQDM_COUNT, HF_TOKENS),
}
MAX_READ = 4 << 20  # bytes read per poll: a huge backlog is caught up over several polls
MAX_LINE = 64 << 10  # a partial line longer than this is dropped (binary junk, no newline)


@dataclass(frozen=True, slots=True)
class LineMatch:
    step: int | None = None
    total: int | None = None
    tokens: int | None = None
    samples: int | None = None


class LineParser:
    """Extracts step / total / tokens / samples from one log line with a preset or a custom regex."""

    def __init__(self, pattern: str) -> None:
        self._rx = [re.compile(p) for p in PRESETS.get(pattern, (pattern,))]
        # Only a bar can be read before its segment ends (it needs "/total [" or "it ["): a cut-off
        # number in a custom pattern or a log dict would read as a smaller value.
        self._partial = [re.compile(p) for p in (TQDM_BAR, TQDM_COUNT)] if pattern in PRESETS else []

    def parse_partial(self, text: str) -> LineMatch | None:
        """Match an unfinished segment: tqdm's current bar sits after the last \r until the next redraw."""
        for rx in self._partial:
            m = rx.search(text)
            if m is not None:
                total = m.groupdict().get("total")
                return LineMatch(int(m.group("step")), int(total) if total else None)
        return None

    def parse(self, line: str) -> LineMatch | None:
        """The first regex that matches, as a LineMatch; None when none does."""
        for rx in self._rx:
            m = rx.search(line)
            if m is None:
                continue
            d = m.groupdict()

            def num(key: str, d=d) -> int | None:
                v = d.get(key)
                return int(v) if v is not None and v.isdigit() else None

            return LineMatch(num("step"), num("total"), num("tokens"), num("samples"))
        return None


def split_segments(buf: str) -> tuple[list[str], str]:
    """Complete segments and the unfinished rest; tqdm redraws with \\r, so \\r ends a segment too."""
    parts = re.split(r"[\r\n]", buf)
    return parts[:-1], parts[-1]


class LogTail:
    """One followed file; `poll()` reads what is new and hands at most one report to `sink`."""

    def __init__(
        self,
        cfg: LogTailSettings,
        sink: Callable[[ProgressReport], object],
        min_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = cfg
        self._sink = sink
        self._parser = LineParser(cfg.pattern)
        self._min_interval = min_interval_s
        self._clock = clock
        self._fh = None
        self._id: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._first_open = True
        self._buf = ""
        self._step: int | None = None
        self._total: int | None = None  # the followed bar's total: eval bars have other totals
        self._tokens: int | None = None  # a token count read since the last report
        self._samples: int | None = None
        self._sent: int | None = None  # step of the last report
        self._last_emit = float("-inf")
        self._missing_logged = False

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def poll(self) -> ProgressReport | None:
        """Read new lines, update the state, report if due; returns the report sent, if any."""
        for text in self._read():
            self._feed(text)
        return self._maybe_emit()

    def _read(self) -> Iterable[str]:
        path = self.cfg.path
        try:
            st = os.stat(path)
        except OSError:
            st = None
            self._first_open = False  # a file that appears later is read from its beginning
            if not self._missing_logged:
                log.info("log tail: file not there (yet); waiting for it", path=path)
                self._missing_logged = True
        if self._fh is not None:
            same = st is not None and (st.st_dev, st.st_ino) == self._id
            if same and st.st_size < self._fh.tell():
                log.info("log tail: truncated, reading from the start", path=path)
                self._fh.seek(0)
                self._reset()
            yield self._drain()  # after a rotation: the last lines written to the old file
            if not same:
                log.info("log tail: rotated, following the new file", path=path)
                self.close()
                self._reset()
        if self._fh is None and st is not None:
            try:
                fh = open(path, "rb")  # noqa: SIM115 - kept open across polls to follow the inode
            except OSError as e:
                log.warning("log tail: cannot open", path=path, error=str(e))
                return
            self._missing_logged = False
            st = os.fstat(fh.fileno())
            self._id = (st.st_dev, st.st_ino)
            if self._first_open and not self.cfg.from_start:
                fh.seek(0, os.SEEK_END)
            self._first_open = False
            self._fh = fh
            yield self._drain()

    def _drain(self) -> str:
        data = self._fh.read(MAX_READ) if self._fh is not None else b""
        return data.decode("utf-8", errors="replace")

    def _reset(self) -> None:
        self._buf = ""
        self._total = None

    def _feed(self, text: str) -> None:
        if not text:
            return
        segments, self._buf = split_segments(self._buf + text)
        if len(self._buf) > MAX_LINE:
            self._buf = ""
        for seg in segments:
            m = self._parser.parse(seg)
            if m is not None:
                self._apply(m)
        m = self._parser.parse_partial(self._buf)
        if m is not None:
            self._apply(m)

    def _apply(self, m: LineMatch) -> None:
        if m.tokens is not None:
            self._tokens = m.tokens
        if m.samples is not None:
            self._samples = m.samples
        if m.step is None:
            return
        if m.total is not None:
            # Follow the bar with the largest total: an evaluation bar (fewer batches) must not look
            # like the training step going back, which the tracker would take for a restart.
            if self._total is not None and m.total < self._total:
                return
            self._total = m.total
        elif self._total is not None:
            return
        self._step = m.step

    def _maybe_emit(self) -> ProgressReport | None:
        if self._step is None:
            return None
        fresh = self._tokens is not None or self._samples is not None
        now = self._clock()
        if (self._step == self._sent and not fresh) or now - self._last_emit < self._min_interval:
            return None
        tokens = self._tokens
        if tokens is None and self.cfg.tokens_per_step:
            tokens = self._step * self.cfg.tokens_per_step
        report = ProgressReport(job=self.cfg.job, step=self._step, tokens=tokens, samples=self._samples)
        try:
            self._sink(report)
        except Exception as e:  # the tracker refusing one report must not stop the tail
            log.warning("log tail: report refused", path=self.cfg.path, error=str(e))
        self._sent, self._last_emit = self._step, now
        self._tokens = self._samples = None  # only fresh counts go out: a stale one would fake a stall
        return report


class LogTailer:
    """A daemon thread polling every configured log tail."""

    def __init__(self, settings: ProgressSettings, sink: Callable[[ProgressReport], object]) -> None:
        self._poll_s = settings.log_tail_poll_s
        self.tails = [LogTail(c, sink, settings.log_tail_min_interval_s) for c in settings.log_tail]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start polling (no thread when no log is configured)."""
        if not self.tails or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="spark-watchd-logtail", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll_s):
            for tail in self.tails:
                try:
                    tail.poll()
                except Exception:  # one broken tail must not stop the others
                    log.exception("log tail failed", path=tail.cfg.path)

    def close(self) -> None:
        """Stop the thread and close the files."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for tail in self.tails:
            tail.close()
