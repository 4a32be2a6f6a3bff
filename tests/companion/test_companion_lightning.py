"""The PyTorch Lightning callback against Lightning's own Callback class, where Lightning is
installed (it needs torch, which the project's environment does not have: skipped there)."""

from __future__ import annotations

import pytest


def test_the_lightning_callback_is_a_lightning_callback_and_declares_validation_as_eval() -> None:
    try:
        from lightning.pytorch import Callback
    except ImportError:
        Callback = pytest.importorskip("pytorch_lightning", reason="Lightning is not installed here").Callback
    from sagewarden_companion.lightning import SagewardenLightningCallback

    class Trainer:  # the attributes the callback reads (a real Trainer needs a model and torch)
        max_steps = 50
        global_step = 0

    callback = SagewardenLightningCallback(watchdog=False, backstop=False, save=None)
    callback.on_train_start(Trainer(), None)
    try:
        callback.on_validation_start(Trainer(), None)
        assert isinstance(callback, Callback) and callback.job is not None
        assert callback.job.phase_name == "eval" and callback.job.total_steps == 50
        callback.on_validation_end(Trainer(), None)
        assert callback.job.phase_name is None
    finally:
        callback.job.close()
