"""PyTorch Lightning callback reporting progress to spark-watchd.

    trainer = L.Trainer(..., callbacks=[SparkWatchdLightningCallback("my-run", tokens_per_step=4096)])

Works with `lightning` (2.x) or `pytorch_lightning`; importable with neither.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spark_watchd.integrations.reporter import ReportingCallback

try:  # either distribution provides the same Callback
    from lightning.pytorch import Callback as _Base
except ImportError:
    try:
        from pytorch_lightning import Callback as _Base
    except ImportError:
        _Base = object


class SparkWatchdLightningCallback(ReportingCallback, _Base):
    """Reports `trainer.global_step` (optimizer steps) and tokens after each training batch."""

    def __init__(
        self,
        job: str = "lightning",
        url: str | None = None,
        token: str | None = None,
        tokens_per_step: int | None = None,
        count_tokens: Callable[[Any], int] | None = None,
        min_interval: float = 5.0,
    ) -> None:
        """`count_tokens(batch)` counts a batch's tokens (summed over batches); else step x tokens_per_step."""
        ReportingCallback.__init__(self, job, url, token, tokens_per_step, min_interval)
        self.count_tokens = count_tokens
        self.tokens_seen = 0

    def _tokens(self, step: int) -> int | None:
        if self.count_tokens is not None:
            return self.tokens_seen
        return step * self.tokens_per_step if self.tokens_per_step else None

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "is_global_zero", True) and self.reporter is None:
            self.open_reporter(self.job).report(
                int(trainer.global_step), self._tokens(int(trainer.global_step))
            )

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.count_tokens is not None:
            try:
                self.tokens_seen += int(self.count_tokens(batch)) * int(
                    getattr(trainer, "world_size", 1) or 1
                )
            except Exception:  # a counting bug must not stop training
                self.count_tokens = None
        if self.reporter is not None:
            step = int(trainer.global_step)
            self.reporter.report(step, self._tokens(step))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.reporter is not None:
            step = int(trainer.global_step)
            self.reporter.report(step, self._tokens(step))
            self.reporter.close()
            self.reporter = None
