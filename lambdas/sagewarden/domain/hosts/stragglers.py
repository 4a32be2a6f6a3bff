"""Stragglers, a host alive but slow: scoring the step lines against each host's baseline, and the
break-even of a restart. Pure. Why: docs/recovery.md (*Stragglers*)."""

from __future__ import annotations

import dataclasses
import itertools
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision, request_stop
from sagewarden.domain.vocabulary.launch import wall_clock_remaining_s
from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.pricing import gpus_per_instance
from sagewarden.domain.vocabulary.reasons import StopIntent

STEP_PATTERN = '"step_ms="'  # CloudWatch Logs filter pattern: the phrase as written
READ_EVERY_MS = 2 * 60_000
READ_MARGIN_MS = 3 * 60_000  # read window = straggler window + this (a read a little late still sees it)
MIN_PEERS = 2  # a host is compared with the median of at least this many peers
BASELINE_SAMPLES = 10  # compared steps of every host before the baseline is taken (their median)
STEP_READ_MAX_LINES = 4_000  # per read: 256 hosts' baselines (3,072 lines); <= 4 MB at 1 KB a line
STOP_ESTIMATE_S = 120  # StopTrainingJob: SIGTERM, then SIGKILL after 120 s (aws-facts)
# a cold restart asks for SageMaker's infra check, whose duration AWS does not publish: the middle
# of the simulator's adversarial 5-30 min range (drill/sim/hosts.py)
INFRA_CHECK_ESTIMATE_S = 15 * 60
DEFAULT_COLD_START_S = 10 * 60  # when the attempt's own start is not known
# per-step compute times jitter (a percent or so, data-dependent): a sample within this of the
# threshold counts, so a host 15 % slower is not missed at a 15 % threshold half of the time
TOLERANCE = 0.025
# goodput measures a host's slowdown from this shift on (below the default alert threshold: a
# 10 % host is not worth an alert but costs 9 % of the run's work)
MEASURE_SHIFT = 0.075
STRETCH_FLOOR = 0.5  # a stretch of slowness lasts while the shift stays above half the threshold

_STEP = re.compile(
    r"\[sagewarden\] host=(?:algo-)?(\d+) step=(\d+) step_ms=(\d+(?:\.\d+)?)"
    r"(?: compute_ms=(\d+(?:\.\d+)?))?(?: total=(\d+))?"
)


@dataclass(frozen=True)
class Sample:
    host: str
    step: int
    step_ms: float
    compute_ms: float | None
    total: int | None = None


def parse(lines: Iterable[str]) -> list[Sample]:
    """The contract's step lines (one per host and step; a repeated line is kept once)."""
    seen: dict[tuple[str, int], Sample] = {}
    for line in lines:
        m = _STEP.search(line)
        if m is None:
            continue
        host = f"algo-{int(m.group(1))}"
        key = (host, int(m.group(2)))
        if key not in seen:
            seen[key] = Sample(
                host,
                int(m.group(2)),
                float(m.group(3)),
                float(m.group(4)) if m.group(4) else None,
                int(m.group(5)) if m.group(5) else None,
            )
    return sorted(seen.values(), key=lambda s: (s.step, s.host))


def _ratios(samples: Sequence[Sample]) -> dict[str, list[tuple[int, float, float, float]]]:
    """host -> [(step, compute vs the peers' median, step_ms, compute_ms)], steps ascending."""
    by_step: dict[int, list[Sample]] = {}
    for s in samples:
        if s.compute_ms is not None and s.compute_ms > 0:
            by_step.setdefault(s.step, []).append(s)
    out: dict[str, list[tuple[int, float, float, float]]] = {}
    for step in sorted(by_step):
        row = by_step[step]
        if len(row) < MIN_PEERS + 1:
            continue
        for s in row:
            assert s.compute_ms is not None
            peers = statistics.median(p.compute_ms or 0.0 for p in row if p.host != s.host)
            if peers > 0:
                out.setdefault(s.host, []).append((step, s.compute_ms / peers, s.step_ms, s.compute_ms))
    return out


def baseline(samples: Sequence[Sample], hosts: Sequence[str]) -> dict[str, tuple[float, float]] | None:
    """Each host's baseline (median ratio to its peers, median compute ms) from its first
    BASELINE_SAMPLES compared steps; None until every host has that many."""
    ratios = _ratios(samples)
    if not hosts or any(len(ratios.get(h, ())) < BASELINE_SAMPLES for h in hosts):
        return None
    out = {}
    for h in hosts:
        first = ratios[h][:BASELINE_SAMPLES]
        out[h] = (statistics.median(r for _, r, _, _ in first), statistics.median(c for *_, c in first))
    return out


@dataclass(frozen=True)
class HostScore:
    host: str
    status: str  # "straggler" | "shifted" (not for long enough yet) | "ok" | "unknown"
    shift: float | None = None  # vs its own baseline against its peers (0.15: 15 % slower)
    vs_peers: float | None = None  # its newest compute vs its peers' median, minus 1
    vs_history: float | None = None  # its newest compute vs its own baseline compute, minus 1
    lasted_ms: int = 0  # the trailing stretch at or above the threshold, in wall time
    step_ms: float | None = None  # the newest wall step time


def score(
    samples: Sequence[Sample],
    baselines: Mapping[str, tuple[float, float]],
    hosts: Sequence[str],
    threshold: float,
    window_ms: int,
) -> list[HostScore]:
    """Score every host (see the module doc); a host without lines or baseline is unknown."""
    ratios = _ratios(samples)
    out = []
    for h in hosts:
        rows, base = ratios.get(h), baselines.get(h)
        if not rows or base is None or base[0] <= 0:
            out.append(HostScore(h, "unknown"))
            continue
        shifts = [(step, ratio / base[0] - 1.0, step_ms) for step, ratio, step_ms, _ in rows]
        values = [v for _, v, _ in shifts]
        start = len(shifts)  # the trailing stretch of slowness (see `_slow_at`)
        while start > 0 and _slow_at(values, start - 1, threshold):
            start -= 1
        run = shifts[start:]
        lasted = sum((b[0] - a[0]) * b[2] for a, b in itertools.pairwise(run))
        recent = _last(run, window_ms)  # its last window: how much slower the host is now
        level = statistics.median(v for _, v, _ in recent) if recent else None
        _, ratio, step_ms, compute = rows[-1]
        status = "ok"
        if level is not None and level >= threshold - TOLERANCE:
            status = "straggler" if lasted >= window_ms else "shifted"
        shift = level if level is not None else shifts[-1][1]
        out.append(
            HostScore(
                h,
                status,
                shift=shift,
                vs_peers=ratio - 1.0,
                vs_history=compute / base[1] - 1.0 if base[1] > 0 else None,
                lasted_ms=int(lasted),
                step_ms=step_ms,
            )
        )
    return out


def _slow_at(values: Sequence[float], i: int, threshold: float) -> bool:
    """Whether sample `i` continues a stretch of slowness: above half the threshold (hysteresis:
    a real straggler's own jitter does not break its stretch; a return to normal does, so a
    benign transient never joins a spike one normal sample away)."""
    return values[i] >= threshold * STRETCH_FLOOR


def _last(run: Sequence[tuple[int, float, float]], window_ms: int) -> list[tuple[int, float, float]]:
    """The samples of the stretch's last `window_ms` of wall time (steps x step_ms)."""
    kept: list[tuple[int, float, float]] = []
    span = 0.0
    newest_first = list(reversed(run))
    for k, newer in enumerate(newest_first):
        kept.append(newer)
        if k + 1 == len(newest_first):
            break
        span += (newer[0] - newest_first[k + 1][0]) * newer[2]
        if span > window_ms:
            break
    return kept


@dataclass(frozen=True)
class BreakEven:
    loss_gpu_h: float | None  # slowdown x remaining GPU-hours (None: the remaining run is unknown)
    cost_gpu_h: float  # (detection + stop + cold start + work since the last checkpoint) x GPUs
    remaining_h: float | None
    parts_s: tuple[float, float, float, float]  # detection, stop, cold start, since the checkpoint
    paid_gpu_h: float = 0.0  # slowdown x GPU-hours since the host became slow: lost already

    @property
    def restart_pays(self) -> bool:
        """Restart when the rest of the run would lose more than a restart costs *and* the slowdown
        has already cost as much as a restart (the ski-rental rule): fail-slow episodes last from
        seconds to hours (FALCON), and whether this one will pass is unknown. Waiting until it has
        cost one restart, then restarting, never loses more than twice what the best choice made in
        hindsight would have; restarting at once loses a restart on every episode that would have
        passed by itself (measured in BENCHMARKS.md: the straggler escalation)."""
        return (
            self.loss_gpu_h is not None
            and self.loss_gpu_h > self.cost_gpu_h
            and self.paid_gpu_h >= self.cost_gpu_h
        )


def break_even(
    shift: float,
    remaining_s: float | None,
    gpus: int,
    *,
    detect_s: float,
    stop_s: float,
    cold_start_s: float,
    since_checkpoint_s: float,
    slow_for_s: float = 0.0,
) -> BreakEven:
    parts = (max(detect_s, 0.0), max(stop_s, 0.0), max(cold_start_s, 0.0), max(since_checkpoint_s, 0.0))
    cost = sum(parts) / 3600 * gpus
    paid = shift * max(slow_for_s, 0.0) / 3600 * gpus
    if remaining_s is None or remaining_s < 0:
        return BreakEven(None, cost, None, parts, paid)
    remaining_h = remaining_s / 3600
    return BreakEven(shift * remaining_h * gpus, cost, remaining_h, parts, paid)


# --------------------------------------------------------------------------------------------
# the supervisor's side: when to read, and what to do with what was read


def _hosts(att: Attempt) -> list[str]:
    return [f"algo-{n}" for n in range(1, att.instance_count + 1)]


def watching(run: Run, att: Attempt | None) -> bool:
    """The attempt's step lines are read (its script prints them, it trains, nothing decided)."""
    return (
        att is not None
        and run.policy.step_lines
        and not run.status.terminal
        and att.in_training
        and att.training_started_ms is not None
        and att.stop_intent is None
        and att.instance_count >= MIN_PEERS + 1
    )


def read_since_ms(run: Run, now_ms: int) -> int | None:
    """Where the sweep's read of the current attempt's step lines starts (None: no read due):
    from Training's start until the baselines are known, then the last window + margin."""
    cur = run.current
    if cur is None or not watching(run, cur) or cur.training_started_ms is None:
        return None
    if not cur.host_baselines:
        return cur.training_started_ms
    span = run.policy.straggler_window_minutes * 60_000 + READ_MARGIN_MS
    return max(cur.training_started_ms, now_ms - span)


def read_lines(run: Run) -> tuple[int, bool]:
    """How many step lines the read keeps, and whether the newest (else the first): for the
    baselines, the first BASELINE_SAMPLES steps of every host (and a margin for steps some host
    printed late); then the newest of the window, at most STEP_READ_MAX_LINES, since a many-host
    job prints more in a window than that and a straggler shows in the newest lines."""
    cur = run.current
    hosts = cur.instance_count if cur is not None else 1
    if cur is not None and cur.host_baselines:
        return STEP_READ_MAX_LINES, True
    return min(hosts * (BASELINE_SAMPLES + 2), STEP_READ_MAX_LINES), False


def read_due_ms(run: Run, now_ms: int) -> int | None:
    """The sweep looks (and reads) every READ_EVERY_MS while the attempt is watched: nothing is
    saved for a read that changes nothing."""
    return now_ms + READ_EVERY_MS if watching(run, run.current) else None


def slowdown_ms(att: Attempt, until_ms: int) -> int:
    """The work the attempt's open slow episode has cost by ``until_ms`` (0: none open): a host
    ``s`` slower holds every step back, so each minute trains 1 / (1 + s) of a minute's steps. An
    estimate: the episode dates from when the host's shift began to show, at its shift when seen."""
    if att.slow_episode is None:
        return 0
    _, shift, since = att.slow_episode
    if shift <= 0 or until_ms <= since:
        return 0
    return round((until_ms - since) * shift / (1.0 + shift))


def _measure_slowness(
    d: PendingDecision,
    cur: Attempt,
    samples: Sequence[Sample],
    bases: Mapping[str, tuple[float, float]],
    hosts: Sequence[str],
) -> bool:
    """Keep the attempt's slow episode for goodput (any host MEASURE_SHIFT slower than its own
    baseline for a straggler window, flagged or not); True when it changed. A host without lines
    keeps its episode as it was (unknown)."""
    window = d.policy.straggler_window_minutes * 60_000
    scores = score(samples, bases, hosts, MEASURE_SHIFT, window)
    slow = [s for s in scores if s.status == "straggler" and s.shift is not None]
    ep = cur.slow_episode
    if not slow:
        if ep is None or not any(s.host == ep[0] and s.status == "ok" for s in scores):
            return False
        changed = dataclasses.replace(
            cur, slow_episode=None, slow_lost_ms=cur.slow_lost_ms + slowdown_ms(cur, d.now)
        )
    else:
        worst = max(slow, key=lambda s: s.shift or 0.0)
        if ep is not None and ep[0] == worst.host:
            return False
        since = max(d.now - worst.lasted_ms, ep[2] if ep is not None else 0)
        changed = dataclasses.replace(
            cur,
            slow_episode=(worst.host, round(worst.shift or 0.0, 4), since),
            slow_lost_ms=cur.slow_lost_ms + slowdown_ms(cur, since),  # another host's ends here
        )
    d.put_attempt(changed)
    return True


def on_steps(d: PendingDecision) -> bool:
    """Act on the step lines the service read (obs.step_lines); True when anything changed."""
    cur = d.run.current
    if cur is None or not watching(d.run, cur):
        return False
    if d.obs.step_lines is None:
        if d.obs.step_error is None:
            return False
        # unknown: nothing is judged (a flagged host stays flagged, none is cleared)
        d.note(
            f"step lines of {cur.job_name} unknown (read again in {READ_EVERY_MS // 60_000} min): {d.obs.step_error}"
        )
        return True
    samples = parse(d.obs.step_lines)
    hosts = _hosts(cur)
    if not cur.host_baselines:
        base = baseline(samples, hosts)
        if base is None:
            return False
        cur = dataclasses.replace(cur, host_baselines=tuple((h, r, c) for h, (r, c) in base.items()))
        d.note(
            f"attempt {cur.number}: per-host baselines from the first step lines (compute vs peers: "
            + ", ".join(f"{h} {r:.2f}" for h, (r, _) in base.items())
            + ")"
        )
        d.put_attempt(cur)
        return True
    bases = {h: (r, c) for h, r, c in cur.host_baselines}
    measured = _measure_slowness(d, cur, samples, bases, hosts)
    cur = d.run.current or cur
    pol = d.policy
    scores = score(samples, bases, hosts, pol.straggler_threshold, pol.straggler_window_minutes * 60_000)
    flagged = [s for s in scores if s.status == "straggler"]
    if not flagged:  # (a host without lines is unknown: neither flagged nor cleared)
        if cur.straggler_since_ms is not None and any(
            s.host == cur.straggler_host and s.status == "ok" for s in scores
        ):
            d.put_attempt(dataclasses.replace(cur, straggler_since_ms=None))
            d.note(f"attempt {cur.number}: {cur.straggler_host} back to its peers' pace")
            return True
        return measured
    worst = max(flagged, key=lambda s: s.shift or 0.0)
    assert worst.shift is not None
    first = cur.straggler_host is None
    still = cur.straggler_host == worst.host and cur.straggler_since_ms is not None
    since = (
        cur.straggler_since_ms if still and cur.straggler_since_ms is not None else d.now - worst.lasted_ms
    )
    be = _break_even(d, cur, worst, samples, slow_for_ms=d.now - since)
    restart = pol.straggler_action == "restart" and be.restart_pays
    if not still:  # newly slow (this host, or again): remember since when
        cur = dataclasses.replace(
            cur, straggler_host=worst.host, straggler_shift=round(worst.shift, 4), straggler_since_ms=since
        )
        d.put_attempt(cur)
    if not first and not restart:
        return measured or not still  # alerted already: the next reads re-check the break-even only
    if first:
        _alert(d, cur, worst, be, restart)
    if restart:
        d.put_attempt(dataclasses.replace(cur, suspect_hosts=(worst.host,)))
        request_stop(
            d,
            d.run.current or cur,
            StopIntent.STRAGGLER,
            f"straggler {worst.host} ({worst.shift:.0%} slower for {(d.now - since) // 60_000} min): it has "
            f"cost {be.paid_gpu_h:.1f} GPU-h and the rest of the run would lose {be.loss_gpu_h:.1f}, "
            f"more than a restart's {be.cost_gpu_h:.1f} GPU-h",
        )
    elif first:
        d.note(f"attempt {cur.number}: straggler {worst.host} ({worst.shift:.0%} slower), alert only")
    return True


def _break_even(
    d: PendingDecision, cur: Attempt, worst: HostScore, samples: Sequence[Sample], *, slow_for_ms: int
) -> BreakEven:
    """The break-even of a restart now (see the module doc)."""
    gpus = cur.instance_count * gpus_per_instance(cur.instance_type)
    newest = max(samples, key=lambda s: s.step)
    healthy_step_ms = (newest.step_ms or 0.0) / (1.0 + (worst.shift or 0.0))
    remaining: float | None = None
    if newest.total is not None and healthy_step_ms > 0:
        remaining = max(newest.total - newest.step, 0) * healthy_step_ms / 1000
    if remaining is not None:  # the run stops at its wall-clock budget anyway
        remaining = max(min(remaining, wall_clock_remaining_s(d.run, d.now)), 0.0)
    cold: float = DEFAULT_COLD_START_S
    if cur.created_ms is not None and cur.training_started_ms is not None:
        cold = (cur.training_started_ms - cur.created_ms) / 1000
    written = [h[1] for h in d.run.checkpoint_history]
    since = max([*written, cur.training_started_ms or d.now])
    return break_even(
        worst.shift or 0.0,
        remaining,
        gpus,
        detect_s=worst.lasted_ms / 1000 + READ_EVERY_MS / 1000,
        stop_s=STOP_ESTIMATE_S,
        cold_start_s=cold + INFRA_CHECK_ESTIMATE_S,
        since_checkpoint_s=(d.now - since) / 1000,
        slow_for_s=slow_for_ms / 1000,
    )


def _alert(d: PendingDecision, cur: Attempt, worst: HostScore, be: BreakEven, restart: bool) -> None:
    shift = worst.shift or 0.0
    det, stop, cold, since = (round(p / 60) for p in be.parts_s)
    if be.loss_gpu_h is None:
        loss = "unknown (the step lines carry no total=<steps>): no restart is decided on it"
    else:
        loss = f"{be.loss_gpu_h:.1f} GPU-h ({shift:.0%} x {be.remaining_h:.1f} h remaining)"
    if restart:
        verdict = "The loss exceeds the restart's cost: the attempt is stopped and resumed cold, off this warm pool, with SageMaker's infra check."
    elif d.policy.straggler_action == "restart":
        verdict = (
            "A restart does not pay yet: the job keeps training (checked again at every read; a restart "
            "is decided once the slowdown has cost as much as a restart, if the rest of the run would "
            "lose more)."
        )
    else:
        verdict = "The job keeps training (policy straggler_action 'alert'); " + (
            "a restart would pay: stop it, or set straggler_action 'restart'."
            if be.restart_pays
            else "a restart would not pay now."
        )
    d.act(
        notify(
            d,
            "warning",
            "attempt.straggler",
            f"{d.run.name}: {worst.host} of attempt {cur.number} is {shift:.0%} slower",
            [
                f"Host: {worst.host} of {cur.job_name} ({cur.instance_count} x {cur.instance_type})",
                f"Slowdown: {shift:.0%} vs its own baseline against its peers, for "
                f"{worst.lasted_ms // 60_000} min (compute vs peers' median "
                f"{(worst.vs_peers or 0.0):+.0%}, vs its own history {(worst.vs_history or 0.0):+.0%})",
                "Every host waits for it at each step: the whole job runs at its pace.",
                f"Projected loss over the remaining run: {loss}",
                f"A restart's cost: {be.cost_gpu_h:.1f} GPU-h (detection {det} + stop {stop} + cold "
                f"start with infra check {cold} + work since the last checkpoint {since} min)",
                f"Lost to it so far: {be.paid_gpu_h:.1f} GPU-h",
                verdict,
            ],
        )
    )
