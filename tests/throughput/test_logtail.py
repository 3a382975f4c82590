"""Log tail: progress from tqdm / Hugging Face Trainer lines, surviving rotation and truncation."""

from __future__ import annotations

import os
import time

import pytest
from pydantic import ValidationError

from spark_watchd.throughput.logtail import LineParser, LogTail, LogTailer
from spark_watchd.throughput.settings import LogTailSettings, ProgressSettings
from spark_watchd.throughput.tracker import JobTracker
from tests.support.progress import FakeClock

# What a transformers 5 Trainer writes to a redirected stderr/stdout: \r-redrawn bar, log dicts.
HF_LOG = (
    "\r  0%|          | 0/1000 [00:00<?, ?it/s]"
    "\r  5%|▌         | 50/1000 [00:10<03:10,  4.98it/s]"
    "\n{'loss': '2.345', 'grad_norm': '1.07', 'learning_rate': '4.75e-05', 'num_input_tokens_seen': 204800, "
    "'epoch': '0.05'}\n"
    "\r  5%|▌         | 51/1000 [00:10<03:10,  4.98it/s]"
)


class Sink(list):
    def __call__(self, report):
        self.append(report)


@pytest.fixture
def log_file(tmp_path):
    return tmp_path / "train.log"


def tail(path, sink, pattern="hf", min_interval=0.0, **kw):
    clock = FakeClock(0.0)
    cfg = LogTailSettings(path=str(path), job="sft", pattern=pattern, **kw)
    return LogTail(cfg, sink, min_interval_s=min_interval, clock=clock), clock


def append(path, text):
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_parser_reads_hf_bars_and_log_dicts_of_transformers_4_and_5():
    p = LineParser("hf")
    assert p.parse("  5%|▌  | 50/1000 [00:10<03:10,  4.98it/s]").step == 50
    assert p.parse("  5%|▌  | 50/1000 [00:10<03:10,  4.98it/s]").total == 1000
    assert p.parse("{'loss': 1.23, 'num_input_tokens_seen': 4096, 'epoch': 0.5}").tokens == 4096
    assert p.parse("{'loss': '1.23', 'num_input_tokens_seen': '4096'}").tokens == 4096
    assert p.parse("{'loss': 1.23, 'grad_norm': 0.4, 'learning_rate': 5e-05, 'epoch': 0.5}") is None
    assert LineParser("tqdm").parse("123it [00:10, 12.3it/s]").step == 123
    assert LineParser("tqdm").parse("loading shards 3/4") is None


def test_only_new_lines_count_and_bar_redraws_give_the_latest_step(log_file):
    append(log_file, "\r 90%|█████████ | 900/1000 [old run]\n")
    sink = Sink()
    t, _ = tail(log_file, sink)
    assert t.poll() is None  # existing content is history without timestamps: skipped
    append(log_file, HF_LOG)
    r = t.poll()
    assert (r.job, r.step, r.tokens) == ("sft", 51, 204800)  # the bar after the last \r is current
    append(log_file, "\r  5%|▌         | 52/1000 [00:10<03:10,  4.98it/s]")
    r = t.poll()
    assert (r.step, r.tokens) == (52, None)  # stale token count not repeated: it would fake a stall
    assert t.poll() is None  # nothing new
    assert [x.step for x in sink] == [51, 52]


def test_reports_are_rate_limited(log_file):
    log_file.write_text("")
    sink = Sink()
    t, clock = tail(log_file, sink, min_interval=5.0)
    t.poll()
    for step in range(1, 30):
        append(log_file, f"\r  1%|          | {step}/1000 [00:01<03:00, 5it/s]")
        clock.advance(0.5)
        t.poll()
    assert [r.step for r in sink] == [1, 11, 21]


def test_evaluation_bar_is_not_taken_for_a_restart(log_file):
    log_file.write_text("")
    sink = Sink()
    t, _ = tail(log_file, sink)
    t.poll()
    append(log_file, "\r 50%|█████     | 500/1000 [01:40<01:40,  5it/s]\n")
    t.poll()
    append(
        log_file,
        "\r 30%|███       | 3/10 [00:01<00:02,  3it/s]\r100%|██████████| 10/10 [00:03<00:00,  3it/s]\n",
    )
    assert t.poll() is None
    append(log_file, "\r 50%|█████     | 510/1000 [01:42<01:38,  5it/s]")
    assert t.poll().step == 510


def test_rotation_reads_the_old_tail_then_follows_the_new_file(log_file, tmp_path):
    log_file.write_text("")
    sink = Sink()
    t, _ = tail(log_file, sink, pattern="tqdm")
    t.poll()
    append(log_file, "\r  1%|          | 10/1000 [00:01<03:00, 5it/s]")
    t.poll()
    append(log_file, "\r  2%|          | 20/1000 [00:02<03:00, 5it/s]\n")  # written just before rotation
    os.rename(log_file, tmp_path / "train.log.1")
    log_file.write_text("\r  0%|          | 2/500 [00:01<03:00, 5it/s]\n")  # new file, new (smaller) run
    t.poll()
    assert [r.step for r in sink] == [10, 2]  # 20 was read, then superseded by the new file's line
    append(log_file, "\r  1%|          | 5/500 [00:02<03:00, 5it/s]\n")
    assert t.poll().step == 5


def test_truncation_reads_from_the_start_again(log_file):
    log_file.write_text("")
    sink = Sink()
    t, _ = tail(log_file, sink, pattern="tqdm")
    t.poll()
    append(log_file, "x" * 500 + "\r  1%|          | 10/1000 [00:01<03:00, 5it/s]\n")
    assert t.poll().step == 10
    with open(log_file, "w") as fh:  # copytruncate
        fh.write("\r  1%|          | 3/100 [00:01<03:00, 5it/s]\n")
    assert t.poll().step == 3


def test_missing_file_is_waited_for(log_file):
    sink = Sink()
    t, _ = tail(log_file, sink, pattern="tqdm")
    assert t.poll() is None
    log_file.write_text("\r  1%|          | 7/1000 [00:01<03:00, 5it/s]\n")
    assert t.poll().step == 7  # a file created after start is read from its beginning


def test_custom_pattern_and_tokens_per_step(log_file):
    log_file.write_text("")
    sink = Sink()
    t, _ = tail(log_file, sink, pattern=r"iter (?P<step>\d+) tok (?P<tokens>\d+)")
    t.poll()
    append(log_file, "iter 12 tok 49152 loss 2.1\n")
    r = t.poll()
    assert (r.step, r.tokens) == (12, 49152)
    t2, _ = tail(log_file, Sink(), pattern=r"step=(?P<step>\d+)", tokens_per_step=4096)
    t2.poll()
    append(log_file, "step=3 loss=1.0\n")
    assert t2.poll().tokens == 3 * 4096


@pytest.mark.parametrize(("pattern", "words"), [("(unclosed", "valid regex"), (r"iter (\d+)", "(?P<step>")])
def test_bad_patterns_are_configuration_errors(pattern, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace("?", r"\?")):
        LogTailSettings(path="/x", job="j", pattern=pattern)


def test_tailer_thread_feeds_the_tracker(log_file):
    log_file.write_text("")
    settings = ProgressSettings(
        log_tail=[LogTailSettings(path=str(log_file), job="tail-job", pattern="tqdm")],
        log_tail_poll_s=0.02,
        log_tail_min_interval_s=0,
    )
    tracker = JobTracker(settings)
    tailer = LogTailer(settings, tracker.report)
    tailer.start()
    try:
        time.sleep(0.1)  # let the first poll open the file at its end
        append(log_file, "\r  1%|          | 42/1000 [00:01<03:00, 5it/s]\n")
        deadline = time.monotonic() + 10
        while not tracker.stats() and time.monotonic() < deadline:
            time.sleep(0.02)
        (job,) = tracker.stats()
        assert (job.job, job.step) == ("tail-job", 42)
    finally:
        tailer.close()
