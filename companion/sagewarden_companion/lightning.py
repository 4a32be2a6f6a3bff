"""The PyTorch Lightning integration: `Trainer(callbacks=[SagewardenLightningCallback()])`.

Imports `lightning.pytorch` (or the older `pytorch_lightning`); import this module only where one
is installed. Hooks: `on_train_start` starts the companion (total steps from `trainer.max_steps`)
and installs the SIGTERM handler (it replaces Lightning's own, which would stop the loop before
the save); `on_train_batch_start` .. `on_train_batch_end` is the step's compute, and the step
line; validation is an `eval` phase; `on_save_checkpoint` opens a `save` phase that the next step
ends. After SIGTERM, at the next batch end, `save(trainer)` runs (default:
`trainer.save_checkpoint` to `sigterm-step=<n>.ckpt` in the checkpoint callback's directory),
then the process exits.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable

try:
    from lightning.pytorch import Callback
except ImportError:  # the package's older name
    from pytorch_lightning import Callback

from sagewarden_companion.job import SIGTERM_BUDGET_S, Job


def default_save(trainer: Any) -> None:
    callback = getattr(trainer, "checkpoint_callback", None)
    directory = getattr(callback, "dirpath", None) or trainer.default_root_dir
    trainer.save_checkpoint(os.path.join(directory, f"sigterm-step={trainer.global_step}.ckpt"))


class SagewardenLightningCallback(Callback):  # type: ignore[misc]
    def __init__(
        self,
        *,
        save: Callable[[Any], Any] | None = default_save,
        sigterm_budget_s: float = SIGTERM_BUDGET_S,
        save_minutes: float = 15,
        eval_minutes: float = 30,
        **job_options: Any,
    ) -> None:
        super().__init__()
        self.save = save
        self.sigterm_budget_s = sigterm_budget_s
        self.save_minutes = save_minutes
        self.eval_minutes = eval_minutes
        self.job_options = job_options
        self.job: Job | None = None

    def _job(self, trainer: Any) -> Job:
        if self.job is None:
            steps = getattr(trainer, "max_steps", -1)
            self.job = Job.start(int(steps) if steps and steps > 0 else None, **self.job_options)
        return self.job

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        job = self._job(trainer)
        if self.save is not None and threading.current_thread() is threading.main_thread():
            job.handle_sigterm(self.sigterm_budget_s)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._job(trainer).begin_compute()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        job = self._job(trainer)
        job.end_compute()
        job.step(int(trainer.global_step))
        if self.save is not None and job.stop_requested and job.begin_sigterm_save():
            try:
                self.save(trainer)
            except Exception as exc:
                code = job.end_sigterm_save(exc)
            else:
                code = job.end_sigterm_save()
            job.close()
            raise SystemExit(code)

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._job(trainer).begin_phase("eval", self.eval_minutes)

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        job = self._job(trainer)
        if job.phase_name == "eval":
            job.end_phase("ok")

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: Any) -> None:
        job = self._job(trainer)
        if job.phase_name != "save":
            job.begin_phase("save", self.save_minutes)
