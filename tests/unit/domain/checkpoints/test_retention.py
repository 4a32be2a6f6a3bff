"""Checkpoint retention (domain/checkpoints/retention.py): the policy fields and every safety rule, each test
failing when its rule is removed."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from sagewarden.api.validation import validate_submit
from sagewarden.domain.checkpoints.retention import (
    MAX_RETIRE_DIRS,
    archive_uri,
    kept_by_name,
    run_archive_prefix,
    to_retire,
    unsettled,
)
from sagewarden.domain.vocabulary.actions import RetireCheckpoints
from sagewarden.domain.vocabulary.events import JobObserved, LaunchAccepted, Observations, Tick
from sagewarden.domain.vocabulary.layouts import Checkpoint, RetentionView
from sagewarden.domain.vocabulary.models import MAX_WRITING_SPANS, LaunchState, Run, RunStatus
from sagewarden.domain.vocabulary.policy import PolicyError, RunPolicy
from sagewarden.usecases.errors import InvalidRequest
from tests.builders import HOUR, MIN, REQUEST, ROLE, RecordedCounters, ckpt, observed, step, training_run
from tests.builders import retention_view as view

KEEP2 = RunPolicy(checkpoint_keep=2)
INTERNAL = "InternalServerError: We encountered an internal error.  Please try again."
NOW = 5 * HOUR


def obs(verified: int, v: RetentionView, **changes: object) -> Observations:
    return dataclasses.replace(Observations(checkpoint=ckpt(verified, NOW - HOUR), retention=v), **changes)


def retire(run: Run, o: Observations, at: int = NOW) -> RetireCheckpoints | None:
    d = step(run, Tick(), at, o)
    found = [a for a in d.actions if isinstance(a, RetireCheckpoints)]
    return found[0] if found else None


# --- policy ------------------------------------------------------------------------------------


def test_retention_policy_is_off_by_default_and_archives_when_on() -> None:
    assert RunPolicy().checkpoint_keep is None and RunPolicy().checkpoint_retired == "archive"
    assert archive_uri("s3://b/runs/llama/", KEEP2) == "s3://b/runs/llama-archive/"
    assert retire(training_run(), obs(900, view(100, 200, 900))) is None  # off: nothing moves


@pytest.mark.claim(
    "Submission refuses `checkpoint_keep` below 1, `delete` without `checkpoint_keep`, and an archive prefix that overlaps the synced one"
)
@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"checkpoint_keep": 0}, "checkpoint_keep"),
        ({"checkpoint_retired": "delete"}, "checkpoint_retired"),  # delete without keep
        ({"checkpoint_retired": "shred", "checkpoint_keep": 2}, "checkpoint_retired"),
        ({"checkpoint_keep": 2, "checkpoint_archive_uri": "/tmp/x"}, "checkpoint_archive_uri"),
    ],
    ids=[
        "keeping zero",
        "delete without keep",
        "an unknown retired action",
        "an archive that is not s3",
    ],
)
def test_retention_policy_refuses_nonsense(fields: dict[str, object], field: str) -> None:
    with pytest.raises(PolicyError) as err:
        RunPolicy.from_dict(fields)
    assert err.value.field == field


@pytest.mark.claim(
    "Submission refuses `checkpoint_keep` below 1, `delete` without `checkpoint_keep`, and an archive prefix that overlaps the synced one"
)
@pytest.mark.parametrize("archive", ["s3://bucket/ckpt/old/", "s3://bucket/ckpt", "s3://bucket/"])
def test_retention_submission_refuses_an_archive_overlapping_the_synced_prefix(archive: str) -> None:
    body = {
        "name": "llama",
        "training_job": copy.deepcopy(REQUEST),
        "policy": {"checkpoint_keep": 2, "checkpoint_archive_uri": archive},
    }
    with pytest.raises(InvalidRequest) as err:
        validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())
    assert [e.field for e in err.value.errors] == ["policy.checkpoint_archive_uri"]
    body["policy"] = {"checkpoint_keep": 2}  # the default sibling prefix is outside: accepted
    validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())


@pytest.mark.claim(
    "a `policy.checkpoint_archive_uri` more than 20 folders deep, and a `CheckpointConfig.S3Uri` or archive prefix in an S3 directory bucket (a name ending `--x-s3`)"
)
def test_retention_submission_refuses_an_archive_deeper_than_its_claims_reach() -> None:
    """A live run's archive claims every folder above it (domain/vocabulary/claims.py), like its synced
    prefix: at most 20 deep, so the run's claims fit one DynamoDB transaction."""
    deep = "/".join(f"d{i}" for i in range(21))
    body = {
        "name": "llama",
        "training_job": copy.deepcopy(REQUEST),
        "policy": {"checkpoint_keep": 2, "checkpoint_archive_uri": f"s3://archive/{deep}/"},
    }
    with pytest.raises(InvalidRequest) as err:
        validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())
    assert [e.field for e in err.value.errors] == ["policy.checkpoint_archive_uri"]
    assert "20 folders deep" in err.value.errors[0].message
    body["policy"]["checkpoint_archive_uri"] = "s3://archive/" + "/".join(f"d{i}" for i in range(20)) + "/"
    validate_submit(body, allowed_roles=frozenset({ROLE}), job_prefix="sw", policy_defaults=RunPolicy())


# --- rules -------------------------------------------------------------------------------------


@pytest.mark.claim(
    "Every pass that retires something adds a decision line and an action line to the run's audit trail"
)
def test_retention_retires_older_complete_checkpoints_and_records_them_first() -> None:
    run = training_run(KEEP2)
    d = step(run, Tick(), NOW, obs(900, view(100, 200, 300, 800, 900)))
    action = next(a for a in d.actions if isinstance(a, RetireCheckpoints))
    assert action.names == ("checkpoint-100", "checkpoint-200", "checkpoint-300")  # oldest first
    assert action.archive_uri == f"s3://bucket/ckpt-archive/{run.run_id}/" and action.mode == "archive"
    assert action.markers[0] == "trainer_state.json"
    assert d.run.retiring == action.names  # (g) intent recorded with the decision, before any call
    assert any("retiring checkpoint-100" in n for n in d.notes)  # (e) in the decision's audit line


@pytest.mark.claim(
    "Never the newest verified checkpoint, never one of the `checkpoint_keep` newest complete ones."
)
def test_retention_rule_a_never_the_newest_verified_checkpoint() -> None:
    # a newer checkpoint completed after the verified one was read: keep=1 keeps only the newer,
    # and the verified one must still stay
    assert to_retire(view(100, 900, 1000).complete, 900, 1, reading=False) == ("checkpoint-100",)
    action = retire(training_run(RunPolicy(checkpoint_keep=1)), obs(900, view(100, 900, 1000)))
    assert action is not None and "checkpoint-900" not in action.names


@pytest.mark.claim(
    "Never the newest verified checkpoint, never one of the `checkpoint_keep` newest complete ones."
)
def test_retention_rule_a_never_one_of_the_keep_newest_complete() -> None:
    action = retire(training_run(RunPolicy(checkpoint_keep=3)), obs(900, view(100, 700, 800, 900)))
    assert action is not None and action.names == ("checkpoint-100",)
    assert retire(training_run(RunPolicy(checkpoint_keep=3)), obs(900, view(800, 900))) is None


@pytest.mark.claim("Never while a job may be reading the prefix.")
@pytest.mark.parametrize("secondary", ["Pending", "Starting", "Downloading", "Uploading", "Restarting"])
def test_retention_rule_b_never_while_the_attempt_may_be_reading(secondary: str) -> None:
    run = training_run(KEEP2)
    cur = run.current
    assert cur is not None
    run = dataclasses.replace(
        run, attempts=run.with_attempt(dataclasses.replace(cur, sm_secondary=secondary))
    )
    assert retire(run, obs(900, view(100, 800, 900))) is None


@pytest.mark.claim("Never while a job may be reading the prefix.")
def test_retention_rule_b_never_while_a_launch_is_in_flight_a_stop_is_asked_or_between_attempts() -> None:
    run = training_run(KEEP2)
    cur = run.current
    assert cur is not None
    pending = dataclasses.replace(
        run, attempts=run.with_attempt(dataclasses.replace(cur, launch=LaunchState.PENDING, sm_status=None))
    )
    stopping = dataclasses.replace(
        run,
        status=RunStatus.STOPPING,
        attempts=run.with_attempt(dataclasses.replace(cur, stop_intent="hang", stop_requested_ms=NOW)),
    )
    ended = dataclasses.replace(
        run,
        status=RunStatus.RETRY_WAIT,
        wake_at_ms=NOW + HOUR,
        attempts=run.with_attempt(dataclasses.replace(cur, sm_status="Failed", ended_ms=NOW - 1)),
    )
    for r in (pending, stopping, ended):
        assert retire(r, obs(900, view(100, 800, 900))) is None
    assert retire(run, obs(900, view(100, 800, 900))) is not None  # the same run, training: it acts


@pytest.mark.claim("Only what the finder recognises as complete.")
def test_retention_rule_c_only_complete_ones_older_than_the_verified_one() -> None:
    # the view holds only what the finder proved complete; other children (an unrecognised
    # "logs" folder, a half-written checkpoint-1000) are present but never chosen
    v = view(100, 200, 900, extra=("logs", "checkpoint-50", "checkpoint-1000"))
    action = retire(training_run(RunPolicy(checkpoint_keep=1)), obs(900, v))
    assert action is not None and action.names == ("checkpoint-100", "checkpoint-200")
    # complete but newer than the verified one: not retired
    assert to_retire(view(100, 900, 950, 1000).complete, 900, 1, reading=False) == ("checkpoint-100",)


@pytest.mark.claim("Unknown is not empty.")
def test_retention_rule_d_unknown_is_not_empty() -> None:
    run = training_run(KEEP2)
    assert retire(run, obs(900, view(100, 800, 900), retention_error="SlowDown")) is None
    assert retire(run, obs(900, view(100, 800, 900), checkpoint=None, checkpoint_error="500")) is None
    # a recorded retirement is kept while the prefix cannot be read: it is not "done"
    pending = dataclasses.replace(run, retiring=("checkpoint-100",))
    d = step(pending, Tick(), NOW, obs(900, view(800, 900), retention=None, retention_error="SlowDown"))
    assert d.run.retiring == ("checkpoint-100",)


@pytest.mark.claim("Once a run has succeeded, failed or been cancelled nothing more is moved")
def test_retention_rule_f_a_finished_run_retires_nothing_more() -> None:
    run = dataclasses.replace(training_run(KEEP2), retiring=("checkpoint-100",))
    for status in (RunStatus.SUCCEEDED, RunStatus.CANCELLED, RunStatus.FAILED):
        d = step(dataclasses.replace(run, status=status), Tick(), NOW, obs(900, view(100, 200, 800, 900)))
        assert not any(isinstance(a, RetireCheckpoints) for a in d.actions)


@pytest.mark.claim("Every write survives its own retry.")
def test_retention_rule_g_a_half_done_move_is_finished_by_a_later_pass() -> None:
    # checkpoint-100's marker is already deleted (the finder no longer calls it complete), but it
    # is still in the synced prefix: the recorded intent carries it to the next pass
    run = dataclasses.replace(training_run(KEEP2), retiring=("checkpoint-100",))
    action = retire(run, obs(900, view(800, 900, extra=("checkpoint-100",))))
    assert action is not None and action.names == ("checkpoint-100",)
    # gone from the synced prefix: done, and the run forgets it
    d = step(run, Tick(), NOW, obs(900, view(800, 900)))
    assert d.run.retiring == () and not d.actions and not d.ignored


@pytest.mark.claim("A newest checkpoint still uploading does not count.")
def test_retention_rule_h_a_newest_save_still_uploading_is_not_one_of_the_kept() -> None:
    """Issue 32 item 3: with checkpoint_keep 1, the previous checkpoint was retired seconds after
    the newest one's marker landed, while its large files were still uploading."""
    run = training_run(RunPolicy(checkpoint_keep=1))
    settled = view(100, 800, 900)
    action = retire(run, obs(900, settled))
    assert action is not None and action.names == ("checkpoint-100", "checkpoint-800")
    just_landed = dataclasses.replace(
        settled, written_ms=(("checkpoint-900", NOW - 20_000), *settled.written_ms[1:])
    )
    still_uploading = dataclasses.replace(settled, newest_write_ms=NOW - 2 * MIN)  # a file after the marker
    unknown = dataclasses.replace(settled, newest_write_ms=None)  # its listing was cut
    for v in (just_landed, still_uploading, unknown):
        action = retire(run, obs(900, v))  # checkpoint-800, settled, stays beside the newest
        assert action is not None and action.names == ("checkpoint-100",), v
    assert unsettled(just_landed, NOW) is not None and unsettled(settled, NOW) is None
    # once the window has passed since the last write, the same directory has settled
    action = retire(run, obs(900, still_uploading), at=NOW + 3 * MIN)
    assert action is not None and action.names == ("checkpoint-100", "checkpoint-800")


@pytest.mark.claim("Only periodic checkpoints.")
def test_retention_rule_i_never_the_checkpoint_the_framework_marks_as_best() -> None:
    """Issue 32 item 4: Hugging Face's best_model_checkpoint is a plain checkpoint-N; with delete
    it was gone. Unknown (trainer_state.json unreadable) keeps everything this pass."""
    policy = RunPolicy(checkpoint_keep=1, checkpoint_retired="delete")
    action = retire(training_run(policy), obs(900, view(100, 200, 900, best="checkpoint-200")))
    assert action is not None and action.names == ("checkpoint-100",)
    assert retire(training_run(policy), obs(900, view(100, 200, 900, best=None))) is None


def _dcp_view(*names: tuple[str, int]) -> RetentionView:
    ordered = tuple(sorted(names, key=lambda n: -n[1]))
    written = tuple((n, 20 * MIN + s) for n, s in ordered)
    return RetentionView(ordered, frozenset(n for n, _ in ordered), written, max(ms for _, ms in written))


@pytest.mark.claim("Only periodic checkpoints.")
def test_retention_rule_i_only_periodic_names_and_never_what_the_policy_keeps() -> None:
    """A "best" directory saved beside the periodic ones matches the auto layout's DCP pattern: it
    is never retired, nor a name that is not <letters>[-_]<step>, nor one checkpoint_keep_dirs
    names or matches."""
    policy = RunPolicy(checkpoint_keep=1, checkpoint_keep_dirs=("eval-*",))
    v = _dcp_view(
        ("step_900", 900),
        ("best_step_850", 850),
        ("model_v2_700", 700),
        ("eval-600", 600),
        ("step_500", 500),
        ("global_step400", 400),
    )
    d = step(training_run(policy), Tick(), NOW, dataclasses.replace(obs(900, v), checkpoint=dcp(900)))
    action = next(a for a in d.actions if isinstance(a, RetireCheckpoints))
    assert action.names == ("global_step400", "step_500")
    assert kept_by_name("best_step_850", policy, "") == "its name says best"
    assert kept_by_name("release", policy, "") == "not a periodic checkpoint name"
    # the regex layout's own pattern says what is periodic; "best" and the policy's list still keep
    regex = RunPolicy(
        checkpoint_keep=1, checkpoint_layout="regex", checkpoint_dir_regex=r"m(\d+)v2", checkpoint_marker="ok"
    )
    assert kept_by_name("m100v2", regex, "") is None and kept_by_name("best100", regex, "") is not None


def dcp(step_: int) -> Checkpoint:
    return Checkpoint(f"s3://bucket/ckpt/step_{step_}/", step_, "dcp", NOW - HOUR)


@pytest.mark.parametrize(
    "value",
    [["a/b"], [""], ["x" * 129], "best*", [1], [f"d{i}" for i in range(21)]],
    ids=["a slash", "empty", "too long", "not a list", "not a string", "more than 20"],
)
def test_retention_policy_keep_dirs_refuses_nonsense(value: object) -> None:
    with pytest.raises(PolicyError) as err:
        RunPolicy.from_dict({"checkpoint_keep": 2, "checkpoint_keep_dirs": value})
    assert err.value.field.startswith("checkpoint_keep_dirs")
    kept = RunPolicy.from_dict({"checkpoint_keep": 2, "checkpoint_keep_dirs": ["best*", "eval-*", "best*"]})
    assert kept.checkpoint_keep_dirs == ("best*", "eval-*")
    assert RunPolicy.from_stored(kept.to_dict()) == kept


def _written(v: RetentionView, **at: int) -> RetentionView:
    """``v`` with some directories (checkpoint-<step>=ms) written at other times."""
    times = {**dict(v.written_ms), **{f"checkpoint-{k.split('_')[1]}": ms for k, ms in at.items()}}
    return dataclasses.replace(v, written_ms=tuple(times.items()))


@pytest.mark.claim("Only what the run's own attempts wrote.")
def test_retention_rule_j_never_what_was_there_before_the_runs_first_attempt() -> None:
    """Issue 32 item 5: on a prefix no run ever used, 4 of 5 directories were deleted though the
    run's job never wrote one. Only directories written while the run's attempt trained go."""
    run = training_run(RunPolicy(checkpoint_keep=1, checkpoint_retired="delete"))  # Training at 10 min
    before = _written(view(100, 200, 300, 900), c_100=1 * MIN, c_200=9 * MIN)
    action = retire(run, obs(900, before))
    assert action is not None and action.names == ("checkpoint-300",)
    unknown = dataclasses.replace(
        before, written_ms=tuple(w for w in before.written_ms if w[0] != "checkpoint-300")
    )
    assert retire(run, obs(900, unknown)) is None  # written at an unknown time: never the run's own


@pytest.mark.claim("Only what the run's own attempts wrote.")
def test_retention_rule_j_never_a_step_at_or_below_the_one_the_attempt_resumed_from() -> None:
    """A run submitted on another run's prefix resumes from its newest checkpoint: the directories
    up to that step are the other run's, whenever S3 dates them (an upload again at job start is
    not documented either way)."""
    run = training_run(RunPolicy(checkpoint_keep=1, checkpoint_retired="delete"), resume=ckpt(600))
    action = retire(run, obs(900, view(100, 600, 700, 900)))  # all dated inside the attempt
    assert action is not None and action.names == ("checkpoint-700",)


@pytest.mark.claim("Only what the run's own attempts wrote.")
def test_retention_rule_j_counts_earlier_attempts_but_not_the_time_between_them() -> None:
    """An ended attempt's span is recorded with the run (bounded); a directory that appeared while
    no attempt of the run trained (another job wrote it) is never the run's own."""
    policy = RunPolicy(checkpoint_keep=1, checkpoint_retired="delete", keep_alive_seconds=0)
    run = training_run(policy)  # Training from 10 min
    failed = JobObserved(
        run.current.job_name, 1, "Failed", "Failed", 60 * MIN, failure_reason=INTERNAL, ended_ms=60 * MIN
    )
    run = step(run, failed, 60 * MIN, Observations(checkpoint=ckpt(300, 50 * MIN))).run
    assert run.checkpoint_spans == ((-1, 10 * MIN, 60 * MIN),) and run.attempt_count == 2
    run = step(run, LaunchAccepted(2), 61 * MIN).run
    run = step(run, observed(run, "InProgress", "Training", 70 * MIN), 70 * MIN).run
    v = _written(
        view(100, 200, 250, 300, 400, 900), c_100=20 * MIN, c_200=40 * MIN, c_250=65 * MIN, c_300=50 * MIN
    )
    # 100, 200, 300 by attempt 1 (attempt 2 resumed from 300, which attempt 1 wrote); 250
    # between the attempts (not the run's); 400 by attempt 2
    action = retire(run, obs(900, v))
    assert action is not None and action.names == (
        "checkpoint-100",
        "checkpoint-200",
        "checkpoint-300",
        "checkpoint-400",
    )


def test_retention_writing_spans_are_bounded_and_drop_the_oldest() -> None:
    run = dataclasses.replace(
        training_run(), checkpoint_spans=tuple((-1, i, i + 1) for i in range(MAX_WRITING_SPANS))
    )
    failed = JobObserved(
        run.current.job_name, 1, "Failed", "Failed", HOUR, failure_reason=INTERNAL, ended_ms=HOUR
    )
    spans = step(run, failed, HOUR, Observations(checkpoint=ckpt(300, 50 * MIN))).run.checkpoint_spans
    assert len(spans) == MAX_WRITING_SPANS and spans[0] == (-1, 1, 2) and spans[-1] == (-1, 10 * MIN, HOUR)


@pytest.mark.claim("One pass moves at most 4 directories and touches at most 2,000 objects within 15 seconds")
def test_retention_is_bounded_per_pass_and_continues_next_pass() -> None:
    steps = list(range(100, 2100, 100))
    run = training_run(KEEP2)
    d = step(run, Tick(), NOW, obs(2000, view(*steps)))
    first = next(a for a in d.actions if isinstance(a, RetireCheckpoints))
    assert len(first.names) == MAX_RETIRE_DIRS and first.names[0] == "checkpoint-100"
    done = set(first.names)
    d2 = step(d.run, Tick(), NOW + 1, obs(2000, view(*[s for s in steps if f"checkpoint-{s}" not in done])))
    second = next(a for a in d2.actions if isinstance(a, RetireCheckpoints))
    assert second.names[0] == f"checkpoint-{steps[MAX_RETIRE_DIRS]}"


def test_retention_delete_mode_has_no_archive() -> None:
    policy = RunPolicy(checkpoint_keep=2, checkpoint_retired="delete")
    action = retire(training_run(policy), obs(900, view(100, 800, 900)))
    assert action is not None and action.mode == "delete" and action.archive_uri is None


@pytest.mark.claim(
    "A run asking for retention in a deployment without it is refused at submit (400 on `policy.checkpoint_keep`)"
)
def test_retention_submission_is_refused_where_the_deployment_does_not_grant_it() -> None:
    body = {"name": "llama", "training_job": copy.deepcopy(REQUEST), "policy": {"checkpoint_keep": 2}}
    with pytest.raises(InvalidRequest) as err:
        validate_submit(
            body,
            allowed_roles=frozenset({ROLE}),
            job_prefix="sw",
            policy_defaults=RunPolicy(),
            retention_allowed=False,
        )
    assert [e.field for e in err.value.errors] == ["policy.checkpoint_keep"]
    body["policy"] = {}
    validate_submit(
        body,
        allowed_roles=frozenset({ROLE}),
        job_prefix="sw",
        policy_defaults=RunPolicy(),
        retention_allowed=False,
    )


class _Retirer:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.limits: list[int] = []

    def view(self, s3_uri: str, layout: object, *, limit: int) -> RetentionView:
        self.limits.append(limit)
        if self.error is not None:
            raise self.error
        return view(100, 800, 900)


def test_retention_read_failure_is_passed_on_as_unknown_and_counted() -> None:
    from types import SimpleNamespace

    from sagewarden.usecases.observations import Observer

    counters = RecordedCounters()
    host = SimpleNamespace(retirer=_Retirer(RuntimeError("SlowDown")), counters=counters)
    seen, error = Observer(host)._retention(training_run(KEEP2), Tick())  # type: ignore[arg-type]
    assert seen is None and error is not None and "SlowDown" in error
    assert counters.values == {"ObservationFailures": 1.0}
    ok = SimpleNamespace(retirer=_Retirer(), counters=RecordedCounters())
    seen, error = Observer(ok)._retention(training_run(KEEP2), Tick())  # type: ignore[arg-type]
    assert error is None and seen == view(100, 800, 900)
    # not read at all when the run keeps everything or may be read by a starting job
    off = SimpleNamespace(retirer=_Retirer(), counters=RecordedCounters())
    assert Observer(off)._retention(training_run(), Tick()) == (None, None)  # type: ignore[arg-type]
    assert off.retirer.limits == []


# --- the archive key names the run (issue 32 item 1) ------------------------------------------------


@pytest.mark.claim("Every run archives under its own run id")
def test_retention_archive_keys_name_the_run_so_a_team_archive_is_shared_safely() -> None:
    team = RunPolicy(checkpoint_keep=1, checkpoint_archive_uri="s3://team-ckpt/llama-archive")
    first = dataclasses.replace(training_run(team), run_id="01JRUNA0000000000000000000")
    second = dataclasses.replace(training_run(team), run_id="01JRUNB0000000000000000000")
    targets = []
    for run in (first, second):
        action = retire(run, obs(900, view(100, 900)))  # the same directory name in both runs
        assert action is not None and action.names == ("checkpoint-100",)
        targets.append(action.archive_uri)
    assert targets == [
        "s3://team-ckpt/llama-archive/01JRUNA0000000000000000000/",
        "s3://team-ckpt/llama-archive/01JRUNB0000000000000000000/",
    ]
    assert run_archive_prefix("s3://team-ckpt/a/", "R1") == run_archive_prefix("s3://team-ckpt/a", "R1")
