"""The Lightning callback: global steps and counted tokens reported from rank zero only."""

from __future__ import annotations

import json
from types import SimpleNamespace

from spark_watchd.integrations.lightning import SparkWatchdLightningCallback


def test_lightning_callback_reports_global_steps_and_counted_tokens(progress_server):
    trainer = SimpleNamespace(global_step=0, is_global_zero=True, world_size=1)
    cb = SparkWatchdLightningCallback(
        "pl-run", url=progress_server.url, count_tokens=lambda b: len(b) * 4, min_interval=0
    )
    cb.on_train_start(trainer, None)
    for i in range(5):
        trainer.global_step = i + 1
        cb.on_train_batch_end(trainer, None, None, [0] * 8, i)
    cb.on_train_end(trainer, None)
    (stats,) = progress_server.tracker.stats()
    assert (stats.job, stats.step, stats.tokens, stats.ended) == ("pl-run", 5, 5 * 32, True)
    bodies = [json.loads(b) for b in progress_server.bodies]
    assert [b["step"] for b in bodies] == sorted(b["step"] for b in bodies)


def test_lightning_callback_on_other_ranks_stays_silent(progress_server):
    trainer = SimpleNamespace(global_step=3, is_global_zero=False)
    cb = SparkWatchdLightningCallback("pl-run", url=progress_server.url, tokens_per_step=10)
    cb.on_train_start(trainer, None)
    cb.on_train_batch_end(trainer, None, None, None, 0)
    cb.on_train_end(trainer, None)
    assert cb.reporter is None and progress_server.bodies == []
