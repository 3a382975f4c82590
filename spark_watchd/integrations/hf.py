"""Hugging Face `transformers` callback: one line makes any Trainer (TRL, Unsloth, axolotl) report progress.

    trainer = Trainer(..., callbacks=[SparkWatchdCallback()])

The class is built on first access (a module `__getattr__`), so importing this
module costs nothing until the callback is used; without transformers installed
it then derives from `object`, which is enough for code that only checks it.
"""

from __future__ import annotations

import os
from typing import Any

from spark_watchd.integrations.reporter import ReportingCallback, library_logger

log = library_logger("spark_watchd.integrations.hf")


def _job_from_args(args: Any) -> str:
    run_name = getattr(args, "run_name", None)
    output_dir = getattr(args, "output_dir", None)
    if run_name and run_name != output_dir:
        return str(run_name)
    if output_dir:
        return os.path.basename(os.path.normpath(str(output_dir))) or "hf-trainer"
    return "hf-trainer"


class SparkWatchdMixin(ReportingCallback):
    """The callback's logic, free of transformers: reports global_step and tokens after every optimizer step."""

    def __init__(
        self,
        job: str | None = None,
        url: str | None = None,
        token: str | None = None,
        tokens_per_step: int | None = None,
        min_interval: float = 5.0,
    ) -> None:
        super().__init__(job, url, token, tokens_per_step, min_interval)

    def _tokens(self, state: Any, args: Any = None) -> int | None:
        # num_input_tokens_seen stays 0 unless TrainingArguments(include_num_input_tokens_seen=...) asks.
        seen = getattr(state, "num_input_tokens_seen", 0) or 0
        tracked = getattr(args, "include_num_input_tokens_seen", "no") not in ("no", False, None)
        if seen > 0 or tracked:
            return int(seen)
        if self.tokens_per_step:
            return int(state.global_step) * self.tokens_per_step
        return None

    @staticmethod
    def _samples(args: Any, state: Any) -> int | None:
        per_step = getattr(args, "train_batch_size", None)
        if not per_step:
            return None
        accum = getattr(args, "gradient_accumulation_steps", 1) or 1
        world = getattr(args, "world_size", 1) or 1
        return int(state.global_step) * int(per_step) * int(accum) * int(world)

    def _count_tokens(self, args: Any) -> None:
        """Turn on the Trainer's own token count so the one-line callback gives tokens/s (issue 14.2)."""
        if self.tokens_per_step or args is None:
            return
        if getattr(args, "include_num_input_tokens_seen", "no") not in ("no", False, None):
            return  # the user chose "all" or "non_padding": keep it
        try:
            # The Trainer reads the option on every step, so switching it on here counts from the first batch.
            args.include_num_input_tokens_seen = "all"
        except Exception as e:  # frozen or foreign args: say why tokens/s will be missing, once
            log.warning(
                f"spark-watchd: cannot enable include_num_input_tokens_seen ({e}); tokens/s will be missing: "
                "pass TrainingArguments(include_num_input_tokens_seen='all') or "
                "SparkWatchdCallback(tokens_per_step=N)"
            )
            return
        log.info(
            "spark-watchd: counting input tokens for tokens/s (include_num_input_tokens_seen='all', padding "
            "included; set 'non_padding' yourself to leave padding out)"
        )

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if getattr(state, "is_world_process_zero", True) and self.reporter is None:
            self._count_tokens(args)
            self.open_reporter(self.job or _job_from_args(args)).report(
                int(state.global_step), self._tokens(state, args), self._samples(args, state)
            )
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.reporter is not None:
            self.reporter.report(
                int(state.global_step), self._tokens(state, args), self._samples(args, state)
            )
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.reporter is not None:
            self.reporter.report(
                int(state.global_step), self._tokens(state, args), self._samples(args, state)
            )
            self.reporter.close()
            self.reporter = None
        return control


def _build() -> type:
    try:  # transformers is optional: the base class only matters when a Trainer calls us
        from transformers import TrainerCallback as base
    except ImportError:
        base = object
    return type(
        "SparkWatchdCallback",
        (SparkWatchdMixin, base),
        {
            "__doc__": "Hugging Face TrainerCallback reporting training progress to spark-watchd.",
            "__module__": __name__,
        },
    )


def __getattr__(name: str) -> Any:
    if name == "SparkWatchdCallback":
        cls = globals()["SparkWatchdCallback"] = _build()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
