"""Goodput: a run's effective training time ratio (ETTR) and where the rest of its wall time went.

The buckets, how each is known, and the ledger folded at the end of every decision
(`after_decision`, `run_goodput`). Pure. Why: docs/goodput.md."""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sagewarden.domain.hosts.stragglers import slowdown_ms
from sagewarden.domain.vocabulary.actions import Action, Notify
from sagewarden.domain.vocabulary.events import Event, JobObserved
from sagewarden.domain.vocabulary.models import Attempt, LaunchState, Run
from sagewarden.domain.vocabulary.reasons import StopIntent

MEASURED: Final = "measured"
ESTIMATE: Final = "estimate"
NOT_MEASURED: Final = "not measured"

PRODUCTIVE: Final = "productive"
WAITING: Final = "waiting"
PROVISIONING: Final = "provisioning"
DOWNLOADING: Final = "downloading"
STARTUP: Final = "startup"
SAVES: Final = "checkpoint_saves"
HANG: Final = "hang_detection"
STOPPING: Final = "stopping"
UPLOADING: Final = "uploading"
REDONE: Final = "restarts"
STRAGGLER: Final = "straggler"
WARM_POOL: Final = "idle_warm_pool"
OTHER: Final = "other"

# (key, label in the one-line summary, how it is known when it is not 0)
BUCKETS: Final = (
    (PRODUCTIVE, "productive training", ESTIMATE),
    (WAITING, "waiting for quota/capacity", MEASURED),
    (PROVISIONING, "provisioning", MEASURED),
    (DOWNLOADING, "downloading", MEASURED),
    (STARTUP, "start-up", NOT_MEASURED),
    (SAVES, "checkpoint saves", ESTIMATE),
    (HANG, "hang detection", ESTIMATE),
    (STOPPING, "stopping", MEASURED),
    (UPLOADING, "uploading", MEASURED),
    (REDONE, "restarts (work redone)", ESTIMATE),
    (STRAGGLER, "straggler slowdown", NOT_MEASURED),
    (WARM_POOL, "idle warm pool", NOT_MEASURED),
    (OTHER, "other/unattributed", MEASURED),
)
KEYS: Final = tuple(k for k, _, _ in BUCKETS)
LABELS: Final = {k: label for k, label, _ in BUCKETS}
# buckets nothing the run records can fill today: always reported as "not measured"
NEVER_MEASURED: Final = frozenset({STARTUP, WARM_POOL})
RUN_END_EVENTS: Final = frozenset({"run.succeeded", "run.failed", "run.cancelled"})
# a stored hang onset earlier than the attempt's Training start is clamped to it
_SECONDARY_FIELDS: Final = {
    "Downloading": "downloading_ms",
    "Uploading": "uploading_ms",
    "Stopping": "stopping_ms",
}


@dataclass(frozen=True)
class Bucket:
    key: str
    label: str
    ms: int
    how: str  # MEASURED | ESTIMATE | NOT_MEASURED

    @property
    def estimate(self) -> bool:
        return self.how != MEASURED


@dataclass(frozen=True)
class Goodput:
    """A run's wall time and its buckets (every key of :data:`KEYS`, in that order)."""

    wall_ms: int
    buckets: tuple[Bucket, ...]
    live: bool

    def ms(self, key: str) -> int:
        return next(b.ms for b in self.buckets if b.key == key)

    @property
    def ratio(self) -> float | None:
        """Productive training over wall time (None before any wall time passed)."""
        return self.ms(PRODUCTIVE) / self.wall_ms if self.wall_ms > 0 else None

    def percent(self, key: str) -> float:
        return 100 * self.ms(key) / self.wall_ms if self.wall_ms > 0 else 0.0

    def line(self, top: int = 4) -> str:
        """ "ETTR 93.1 %: 3.2 % restarts (work redone), 2.4 % checkpoint saves, …" — the largest badput
        buckets first, estimates marked with "~"."""
        if self.ratio is None:
            return "ETTR: no wall time yet"
        bad = sorted(
            (b for b in self.buckets if b.key != PRODUCTIVE and b.ms > 0), key=lambda b: (-b.ms, b.key)
        )
        parts = [
            f"{'~' if b.how == ESTIMATE else ''}{self.percent(b.key):.1f} % {b.label}" for b in bad[:top]
        ]
        if len(bad) > top:
            parts.append(f"{sum(self.percent(b.key) for b in bad[top:]):.1f} % more")
        head = f"ETTR {100 * self.ratio:.1f} %" + (" so far" if self.live else "")
        return head + (": " + ", ".join(parts) if parts else "")

    def to_dict(self) -> dict[str, object]:
        return {
            "ratio": None if self.ratio is None else round(self.ratio, 4),
            "percent": None if self.ratio is None else round(100 * self.ratio, 1),
            "wall_seconds": round(self.wall_ms / 1000, 1),
            "live": self.live,
            "summary": self.line(),
            "buckets": [
                {
                    "name": b.key,
                    "label": b.label,
                    "seconds": round(b.ms / 1000, 1),
                    "percent": round(self.percent(b.key), 2),
                    "how": b.how,
                    "estimate": b.estimate,
                }
                for b in self.buckets
            ],
        }


# --------------------------------------------------------------------------------------------
# one attempt's span


@dataclass(frozen=True)
class Span:
    """What one attempt's span adds to the ledger: ms per bucket, the buckets that hold an
    estimate, and the training time past its last checkpoint the next attempt may redo."""

    ms: Mapping[str, int]
    estimates: frozenset[str]
    lost_ms: int


def _clamp(t: int | None, lo: int, hi: int) -> int | None:
    return None if t is None else min(max(t, lo), hi)


def _median_write_ms(history: Sequence[tuple[int, int, float, int]]) -> int | None:
    writes = [h[2] for h in history if h[2] >= 0]
    return int(statistics.median(writes) * 1000) if writes else None


def _interval_steps(history: Sequence[tuple[int, int, float, int]]) -> int | None:
    steps = [h[0] - h[3] for h in history if 0 <= h[3] < h[0]]
    return int(statistics.median(steps)) if steps else None


def saves_in(history: Sequence[tuple[int, int, float, int]], att: Attempt, t0: int, t1: int) -> int:
    """How many checkpoints the attempt completed while training (``t0..t1``): from the newest
    one it wrote and the checkpoint interval in steps (the supervisor sees a checkpoint only when
    it looks, so it may not have seen each), at least the ones it saw."""
    seen = {h[0]: h[1] for h in history}
    end = att.checkpoint_at_end
    if end is not None and end.written_at_ms is not None:
        seen.setdefault(end.step, end.written_at_ms)
    start_step = att.resume_from.step if att.resume_from is not None else 0
    inside = sorted(s for s, at in seen.items() if t0 <= at <= t1 and s > start_step)
    if not inside:
        return 0
    every = _interval_steps(history)
    if every is None or every <= 0:
        return len(inside)
    derived = -(-(inside[-1] - start_step) // every)  # ceil: a resume may start between two saves
    return max(derived, len(inside))


def span(
    run: Run,
    att: Attempt,
    start_ms: int,
    end_ms: int,
    *,
    carry_ms: int,
    after_end: str = WAITING,
    next_resume_written_ms: int | None = None,
) -> Span:
    """The buckets of ``start_ms..end_ms``, the part of the run's wall time that belongs to
    ``att``: the wait before it was requested, its own life, and the time after its end until
    the next attempt was requested or the run's end (``after_end``: WAITING for a retry's wait,
    OTHER for the run's closing decision). ``carry_ms``: training
    time earlier attempts spent past the checkpoint this one resumes from (it is done again).
    ``next_resume_written_ms``: when the checkpoint the next attempt resumes from was written."""
    ms = dict.fromkeys(KEYS, 0)
    est: set[str] = set()
    end_ms = max(end_ms, start_ms)

    def put(key: str, a: int | None, b: int | None) -> None:
        if a is not None and b is not None and b > a:
            ms[key] += b - a

    req = _clamp(att.requested_at_ms, start_ms, end_ms)
    assert req is not None
    put(WAITING, start_ms, req)
    if att.launch in (LaunchState.WAITING, LaunchState.ABANDONED) and att.created_ms is None:
        put(WAITING, req, end_ms)  # the launch was rejected (quota, throttling): still waiting
        return Span(ms, frozenset(est), carry_ms)
    ended = _clamp(att.ended_ms, req, end_ms)
    life_end = ended if ended is not None else end_ms
    created = _clamp(att.created_ms, req, life_end) or req
    t0 = _clamp(att.training_started_ms, created, life_end)
    put(PROVISIONING, req, created)  # CreateTrainingJob until SageMaker has the job
    if t0 is None:  # never reached Training: Starting (and Pending for capacity) all along
        dl = _clamp(att.downloading_ms, created, life_end)
        no_capacity = att.end_class in ("CAPACITY", "QUOTA")
        put(WAITING if no_capacity else PROVISIONING, created, dl or life_end)
        put(DOWNLOADING, dl, life_end)
        lost = carry_ms
    else:
        dl = _clamp(att.downloading_ms, created, t0)
        put(PROVISIONING, created, dl or t0)
        put(DOWNLOADING, dl, t0)
        stop_marks = [t for t in (att.stop_requested_ms, att.stopping_ms) if t is not None]
        up = _clamp(att.uploading_ms, t0, life_end)
        stop = _clamp(min(stop_marks), t0, life_end) if stop_marks else None
        t1 = min(t for t in (up, stop, life_end) if t is not None)
        if stop is not None and stop <= t1:
            put(STOPPING, t1, life_end)
        else:
            put(UPLOADING, t1, life_end)
        lost = _training(run, att, t0, t1, carry_ms, ms, est, next_resume_written_ms)
    if ended is not None:
        # after the job's end: the next attempt's wait, or the run's closing decision
        put(after_end, ended, end_ms)
    return Span(ms, frozenset(est), lost)


def _training(
    run: Run,
    att: Attempt,
    t0: int,
    t1: int,
    carry_ms: int,
    ms: dict[str, int],
    est: set[str],
    next_resume_written_ms: int | None,
) -> int:
    """Split the Training time ``t0..t1`` (in place); returns the training time past the
    checkpoint the next attempt resumes from (lost, and redone by it)."""
    left = t1 - t0
    onset = t1
    if att.stop_intent == StopIntent.HANG and att.hang_onset_ms is not None:
        onset = min(max(att.hang_onset_ms, t0), t1)
        ms[HANG] += t1 - onset
        est.add(HANG)
        left -= t1 - onset
    slow = min(att.slow_lost_ms + slowdown_ms(att, onset), left)
    if slow > 0:
        ms[STRAGGLER] += slow
        est.add(STRAGGLER)
        left -= slow
    redone = min(carry_ms, left)
    if redone > 0:
        ms[REDONE] += redone
        est.add(REDONE)
        left -= redone
    # the saves it measured at their own length (a long one too, off the interval), the others
    # at the run's median
    seen = att.saves_seen
    count = max(saves_in(run.checkpoint_history, att, t0, onset), seen)
    write = _median_write_ms(run.checkpoint_history)
    if count and (write is not None or seen):
        saving = min(att.saves_seen_ms + (count - seen) * (write or 0), left)
        ms[SAVES] += saving
        est.add(SAVES)
        left -= saving
    ms[PRODUCTIVE] += left
    est.add(PRODUCTIVE)
    # lost work: trained past the checkpoint the next attempt resumes from, until the fault
    if next_resume_written_ms is None or next_resume_written_ms < t0:
        # no newer checkpoint from this attempt: everything it trained is lost, and so is what it
        # redid of the earlier attempts' lost work
        return max(carry_ms, redone + left)
    # past that checkpoint: what this attempt trained, or what earlier ones had and this one did
    # not redo yet (a replacement stopped minutes in resumes the next one short of it); a
    # checkpoint written on the stop holds the progress at the stop
    return max(0, max(onset, t0 + carry_ms) - min(max(next_resume_written_ms, t0), onset))


# --------------------------------------------------------------------------------------------
# the ledger


def _added(run: Run, spans: Sequence[Span]) -> tuple[dict[str, int], tuple[str, ...]]:
    ms = {k: int(run.goodput_ms.get(k, 0)) for k in KEYS}
    est = set(run.goodput_estimates)
    for s in spans:
        for k, v in s.ms.items():
            ms[k] += v
        est |= s.estimates
    return {k: v for k, v in ms.items() if v}, tuple(sorted(est))


def _origin(run: Run) -> int:
    return run.goodput_until_ms if run.goodput_until_ms is not None else run.created_ms


def _unfolded_gap(run: Run, att: Attempt) -> Span | None:
    """A run without a ledger (stored before it existed) that is past its first attempt: the time
    before the current attempt cannot be split any more. None when there is no such gap."""
    if run.goodput_until_ms is not None or att.number <= 1:
        return None
    ms = dict.fromkeys(KEYS, 0)
    ms[OTHER] = max(0, att.requested_at_ms - run.created_ms)
    return Span(ms, frozenset(), 0)


def _live_spans(run: Run, end_ms: int, *, after_end: str, next_written: int | None) -> list[Span]:
    att = run.current
    origin = _origin(run)
    if att is None or att.number <= run.goodput_through:
        ms = dict.fromkeys(KEYS, 0)
        ms[WAITING if att is None else OTHER] = max(0, end_ms - origin)
        return [Span(ms, frozenset(), run.goodput_carry_ms)]
    spans: list[Span] = []
    gap = _unfolded_gap(run, att)
    if gap is not None:
        spans.append(gap)
        origin = max(origin, att.requested_at_ms)
    spans.append(
        span(
            run,
            att,
            origin,
            end_ms,
            carry_ms=run.goodput_carry_ms,
            after_end=after_end,
            next_resume_written_ms=next_written,
        )
    )
    return spans


def run_goodput(run: Run, now_ms: int) -> Goodput:
    """The run's goodput: the ledger, plus the live attempt's span up to ``now_ms``."""
    live = not run.status.terminal
    if live or run.goodput_until_ms is None:
        end = max(now_ms if live else run.updated_ms, _origin(run), run.created_ms)
        spans = _live_spans(run, end, after_end=WAITING if live else OTHER, next_written=None)
        ms, est = _added(run, spans)
    else:
        end = run.goodput_until_ms
        ms, est = dict(run.goodput_ms), run.goodput_estimates
    wall = max(0, end - run.created_ms)
    # the buckets add up to the wall time exactly; a ledger that does not (it cannot, by
    # construction, unless the stored item was edited) shows the difference as "other"
    diff = wall - sum(ms.get(k, 0) for k in KEYS)
    ms[OTHER] = ms.get(OTHER, 0) + diff
    buckets = []
    for key, label, how in BUCKETS:
        v = int(ms.get(key, 0))
        if key in NEVER_MEASURED:
            kind = NOT_MEASURED
        elif key in est:
            kind = ESTIMATE
        else:
            kind = MEASURED if how != NOT_MEASURED else NOT_MEASURED
        buckets.append(Bucket(key, label, v, kind))
    return Goodput(wall, tuple(buckets), live)


def _fold(run: Run, end_ms: int, next_att: Attempt | None, after_end: str) -> Run:
    """``run`` with its current attempt's span (to ``end_ms``) in the ledger."""
    cur = run.current
    written = None
    if next_att is not None and next_att.resume_from is not None:
        written = next_att.resume_from.written_at_ms
    spans = _live_spans(run, end_ms, after_end=after_end, next_written=written)
    ms, est = _added(run, spans)
    through = max(run.goodput_through, cur.number if cur is not None else 0)
    carry = spans[-1].lost_ms
    return dataclasses.replace(
        run,
        goodput_ms=ms,
        goodput_estimates=est,
        goodput_until_ms=end_ms,
        goodput_through=through,
        goodput_carry_ms=carry,
    )


def _seen_phases(after: Run, event: Event) -> Run:
    """Record when the current attempt was first seen Downloading, Uploading or Stopping."""
    cur = after.current
    if not isinstance(event, JobObserved) or cur is None or event.job_name != cur.job_name:
        return after
    seen = cur
    for status in (event.secondary, event.status):
        if status == "Downloading" and seen.downloading_ms is None:
            seen = dataclasses.replace(seen, downloading_ms=event.modified_ms)
        elif status == "Uploading" and seen.uploading_ms is None:
            seen = dataclasses.replace(seen, uploading_ms=event.modified_ms)
        elif status == "Stopping" and seen.stopping_ms is None:
            seen = dataclasses.replace(seen, stopping_ms=event.modified_ms)
    if seen == cur:
        return after
    return dataclasses.replace(after, attempts=after.with_attempt(seen))


def after_decision(
    before: Run, after: Run, event: Event, actions: Sequence[Action], now_ms: int
) -> tuple[Run, tuple[Action, ...]]:
    """Keep the ledger: fold the previous attempt's span when a new attempt is requested, the
    last one's when the run ends (the run-end alert then carries the ETTR line)."""
    run = _seen_phases(after, event)
    prev, cur = before.current, run.current
    if before.status.terminal and not run.status.terminal:  # resumed: the pause is "other"
        ms, _ = _added(before, [Span({OTHER: max(0, now_ms - _origin(before))}, frozenset(), 0)])
        run = dataclasses.replace(run, goodput_ms=ms, goodput_until_ms=now_ms, goodput_carry_ms=0)
    elif (
        cur is not None
        and prev is not None
        and cur.number > prev.number
        and prev.number > run.goodput_through
    ):
        # the previous attempt as this decision left it (it may have ended in this very decision)
        last = next((a for a in run.attempts if a.number == prev.number), prev)
        folded = _fold(dataclasses.replace(run, attempts=(last,)), cur.requested_at_ms, cur, WAITING)
        run = dataclasses.replace(
            run,
            goodput_ms=folded.goodput_ms,
            goodput_estimates=folded.goodput_estimates,
            goodput_until_ms=folded.goodput_until_ms,
            goodput_through=folded.goodput_through,
            goodput_carry_ms=folded.goodput_carry_ms,
        )
    if run.status.terminal and not before.status.terminal:
        waited = before.status.value == "RETRY_WAIT"
        run = _fold(run, now_ms, None, WAITING if waited else OTHER)
        line = run_goodput(run, now_ms).line()
        actions = [
            dataclasses.replace(a, body=f"{a.body}\n{line}")
            if isinstance(a, Notify) and a.event in RUN_END_EVENTS
            else a
            for a in actions
        ]
    return run, tuple(actions)
