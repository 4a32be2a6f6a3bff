"""The simulated training script checkpoints at the interval the supervisor tells it
(drill/sim/model.py, `with_told_interval`)."""

from __future__ import annotations

import dataclasses

from drill.sim.model import JobProfile, with_told_interval
from sagewarden.domain.vocabulary.launch import CHECKPOINT_MINUTES_ENV


def test_the_simulated_script_checkpoints_at_the_interval_it_is_told():
    profile = JobProfile(steps_per_minute=10.0, checkpoint_every_steps=300, checkpoint_minutes_from_env=True)
    assert with_told_interval(profile, {CHECKPOINT_MINUTES_ENV: "84"}).checkpoint_every_steps == 840
    assert with_told_interval(profile, {CHECKPOINT_MINUTES_ENV: ""}).checkpoint_every_steps == 300
    assert with_told_interval(profile, {CHECKPOINT_MINUTES_ENV: "soon"}).checkpoint_every_steps == 300
    plain = dataclasses.replace(profile, checkpoint_minutes_from_env=False)
    assert with_told_interval(plain, {CHECKPOINT_MINUTES_ENV: "84"}).checkpoint_every_steps == 300
