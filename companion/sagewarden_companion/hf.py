"""The Hugging Face `Trainer` integration: `callbacks=[SagewardenCallback()]` (docs/companion.md).

Imports transformers (import this module only where it is installed). What it does, by hook:

- `on_train_begin`: starts the companion (`Job.start`, total steps from `state.max_steps`) and
  installs the SIGTERM handler;
- `on_step_begin` .. `on_step_end`: the step's compute (forward, backward, optimizer); at
  `on_step_end` the step line, then the phase the Trainer is about to enter: `DefaultFlowCallback`
  (always before this callback) has set `control.should_evaluate` / `should_save`, so the eval
  and save phases are declared before they start, and ended at `on_evaluate` / `on_save`;
- after SIGTERM, at the next `on_step_end`: asks the Trainer for its own checkpoint
  (`control.should_save`, `should_training_stop`; an eval due then is skipped), marks the save,
  and at `on_save`, once the checkpoint is written (its `trainer_state.json` last), exits.
"""

from __future__ import annotations

import threading
from typing import Any

from transformers import TrainerCallback

from sagewarden_companion.job import SIGTERM_BUDGET_S, Job


class SagewardenCallback(TrainerCallback):
    def __init__(
        self,
        *,
        save_on_sigterm: bool = True,
        sigterm_budget_s: float = SIGTERM_BUDGET_S,
        save_minutes: float = 15,
        eval_minutes: float = 30,
        **job_options: Any,
    ) -> None:
        self.save_on_sigterm = save_on_sigterm
        self.sigterm_budget_s = sigterm_budget_s
        self.save_minutes = save_minutes
        self.eval_minutes = eval_minutes
        self.job_options = job_options
        self.job: Job | None = None
        self._sigterm_saving = False

    def _job(self, state: Any) -> Job:
        if self.job is None:
            total = int(state.max_steps) if getattr(state, "max_steps", 0) else None
            self.job = Job.start(total, **self.job_options)
        return self.job

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        job = self._job(state)
        if self.save_on_sigterm and threading.current_thread() is threading.main_thread():
            job.handle_sigterm(self.sigterm_budget_s)
        return control

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        self._job(state).begin_compute()
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        job = self._job(state)
        job.end_compute()
        job.step(int(state.global_step))
        if self.save_on_sigterm and job.stop_requested and not self._sigterm_saving:
            if job.begin_sigterm_save():
                self._sigterm_saving = True
                control.should_evaluate = False  # no time for it: the save first
                control.should_save = True
                control.should_training_stop = True
            return control
        if control.should_evaluate:
            job.begin_phase("eval", self.eval_minutes)
        elif control.should_save:
            job.begin_phase("save", self.save_minutes)
        return control

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        job = self._job(state)
        if job.phase_name == "eval":
            job.end_phase("ok")
            if control.should_save:
                job.begin_phase("save", self.save_minutes)
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        job = self._job(state)
        if self._sigterm_saving:
            code = job.end_sigterm_save()
            job.close()
            raise SystemExit(code)
        if job.phase_name == "save":
            job.end_phase("ok")
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        job = self._job(state)
        while job.phase_name is not None:
            job.end_phase("ok")
        return control
