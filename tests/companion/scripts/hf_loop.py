"""A Hugging Face training loop without torch, run by tests/companion in a subprocess: transformers'
own TrainingArguments, TrainerState, TrainerControl, DefaultFlowCallback and CallbackHandler,
driven in the order `Trainer` drives them (transformers' trainer.py: on_step_begin, the step,
on_step_end, then `_maybe_log_save_evaluate`: evaluate, then `_save_checkpoint` and on_save), with
the companion's SagewardenCallback. A save writes `checkpoint-<step>/` with TrainerState's own
`trainer_state.json`, last, as the Trainer does."""

from __future__ import annotations

import argparse
import os
import time

from sagewarden_companion.hf import SagewardenCallback
from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import CallbackHandler, DefaultFlowCallback


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--output-dir", required=True)
    p.add_argument("--max-steps", type=int, default=30)
    p.add_argument("--save-steps", type=int, default=10)
    p.add_argument("--eval-steps", type=int, default=5)
    p.add_argument("--step-s", type=float, default=0.02)
    p.add_argument("--eval-s", type=float, default=0.3)
    p.add_argument("--save-s", type=float, default=0.3)
    args = p.parse_args()

    targs = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.max_steps,
        save_steps=args.save_steps,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        logging_steps=1,
        report_to=[],
    )
    state = TrainerState(
        max_steps=args.max_steps, save_steps=args.save_steps, eval_steps=args.eval_steps, logging_steps=1
    )
    control = TrainerControl()
    callback = SagewardenCallback(step_every=1, stall_floor_s=5.0, heartbeat_s=3600)
    handler = CallbackHandler([DefaultFlowCallback, callback], None, None, None, None)
    w = 0.0

    control = handler.on_train_begin(targs, state, control)
    while state.global_step < state.max_steps:
        control = handler.on_step_begin(targs, state, control)
        w -= 0.1 * 2 * (w - 2.0)  # one gradient step towards w = 2
        time.sleep(args.step_s)
        state.global_step += 1
        control = handler.on_step_end(targs, state, control)
        if control.should_log:
            control = handler.on_log(targs, state, control, logs={"w": w})
        if control.should_evaluate:
            time.sleep(args.eval_s)
            control = handler.on_evaluate(targs, state, control, metrics={"eval_loss": (w - 2.0) ** 2})
        if control.should_save:
            path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            os.makedirs(path, exist_ok=True)
            time.sleep(args.save_s)  # the model and optimizer
            state.save_to_json(os.path.join(path, "trainer_state.json"))  # the completion marker, last
            control = handler.on_save(targs, state, control)
        if control.should_training_stop:
            break
    handler.on_train_end(targs, state, control)
    print(f"trained {state.global_step} steps: w={w:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
