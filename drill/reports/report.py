"""The numbers behind a drill's summary, per run and per fault: time per phase and GPU-hours lost.

Read from the simulator's records and the API. Why: docs/drill.md (*What the drill prints*,
*The runner and the reports*)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from drill.reports.history import BUCKETS, RunHistory
from drill.sim.model import FaultRecord, SimJob
from drill.sim.texts import HANG_KINDS, HANG_PHASES, PAUSE_KINDS, START_FAULTS

TIME_KEYS = ("training", "hung", "starting", "waiting", "ending")
_STARTING = frozenset({"Starting", "Downloading"})
_ENDING = frozenset({"Uploading", "Stopping"})


def iso(ms: int | None) -> str | None:
    """Epoch milliseconds as an ISO 8601 UTC time (to the second), None stays None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str | None) -> int | None:
    if not text:
        return None
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def _union_ms(intervals: Iterable[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


def run_times(jobs: Sequence[SimJob], start_ms: int, end_ms: int) -> dict[str, float]:
    """Seconds of the span ``start_ms..end_ms`` a run spent in each of :data:`TIME_KEYS`."""
    ms = dict.fromkeys(TIME_KEYS, 0)
    lifetimes = []
    for job in jobs:
        job_end = min(job.ended_ms if job.ended_ms is not None else end_ms, end_ms)
        lifetimes.append((max(job.created_ms, start_ms), job_end))
        for tr in job.transitions:
            a = max(tr["StartTime"], start_ms)
            b = min(tr["EndTime"] if tr["EndTime"] is not None else end_ms, end_ms)
            if b <= a:
                continue
            status = tr["Status"]
            if status == "Training":
                ms["training"] += b - a
            elif status in _STARTING:
                ms["starting"] += b - a
            elif status in _ENDING:
                ms["ending"] += b - a
            elif status == "Pending":  # no capacity: instances are not there yet
                ms["waiting"] += b - a
        for p_start, p_end, kind in job.phase_intervals:
            if kind in HANG_PHASES:
                a, b = max(p_start, start_ms), min(p_end if p_end is not None else end_ms, end_ms)
                if b > a:
                    ms["hung"] += b - a
                    ms["training"] -= b - a
    ms["waiting"] += (end_ms - start_ms) - _union_ms((a, b) for a, b in lifetimes if b > a)
    return {k: round(v / 1000, 1) for k, v in ms.items()}


def ground_truth(productive_ms: float, start_ms: int, end_ms: int) -> dict[str, Any]:
    """What the simulator knows about a run's goodput: the time its jobs spent training steps
    none of them had trained before, over the span from its submission to its end (or the
    drill's end), to compare with the supervisor's estimate (the run's ``ettr``)."""
    wall = max(0, end_ms - start_ms)
    return {
        "productive_s": round(productive_ms / 1000, 1),
        "wall_s": round(wall / 1000, 1),
        "ettr_percent": round(100 * productive_ms / wall, 2) if wall else None,
    }


def hang_signals(attempt: Mapping[str, Any]) -> list[str]:
    """The signals a hang was confirmed on: the attempt's evidence says ``signal: a, b (source)``
    (its ``hang_signals`` are cleared once the alarms leave ALARM, as they do after the stop)."""
    for line in attempt.get("evidence") or ():
        if line.startswith("signal: "):
            names = line.removeprefix("signal: ").split(" (", 1)[0]
            return [n.strip() for n in names.split(",") if n.strip()]
    return list(attempt.get("hang_signals") or ())


def gpus_of(job: SimJob) -> int:
    return job.instance_count * job.profile.gpus_per_host


def fault_loss(
    rec: FaultRecord, jobs: Sequence[SimJob], *, drill_end_ms: int
) -> tuple[dict[str, float], bool]:
    """GPU-hours a fired training fault cost, split as the benchmark splits it, and whether the run
    recovered from it (see the module docstring)."""
    history = RunHistory.of(list(jobs), rec.run)
    job = history.jobs[rec.job]
    end = job.ended_ms if job.ended_ms is not None else drill_end_ms
    minutes, recovered = history.fault_minutes(
        rec, steps_per_minute=job.profile.steps_per_minute or 1.0, end_ms=end
    )
    gpus = gpus_of(job)
    split = {
        name.replace(" ", "_"): round(gpus * m / 60, 2) for name, m in zip(BUCKETS, minutes, strict=True)
    }
    split["total"] = round(gpus * sum(minutes) / 60, 2)
    return split, recovered


def classify(kind: str, attempt: Mapping[str, Any] | None, run: Mapping[str, Any]) -> tuple[str, str]:
    """How the supervisor classed a fault (its attempt's end class, with the hang signals) and what
    came of it, as two short texts for the faults table."""
    if kind == "throttle":
        return "THROTTLED", "CreateTrainingJob retried"
    if kind == "quota":  # refused at CreateTrainingJob: the attempt keeps its number and waits
        started = attempt is not None and attempt.get("training_started_at")
        return "QUOTA", "waited, then trained" if started else f"run {run['status']}"
    attempts = run["attempts"]
    if attempt is None:
        return "-", f"run {run['status']}"
    later = [a for a in attempts if a["number"] > attempt["number"]]
    end_class = attempt["end_class"]
    signals = attempt.get("hang_signals") or []
    if kind in PAUSE_KINDS:
        if end_class == "SUPERVISOR_STOP" and signals:
            return f"FALSE ALARM ({', '.join(signals)})", _then(attempt, later, run)
        return "benign", "no action (correct)"
    if end_class is None:
        if kind in HANG_KINDS:
            return "not detected", f"run still {run['status']} at the end"
        return "-", f"run {run['status']}"
    label = end_class
    if end_class == "SUPERVISOR_STOP" and signals:
        label = f"HANG ({', '.join(signals)})"
    elif end_class == "SUPERVISOR_STOP" and attempt.get("stop_intent"):
        label = f"SUPERVISOR_STOP ({attempt['stop_intent']})"
    return label, _then(attempt, later, run)


def _then(attempt: Mapping[str, Any], later: list[Mapping[str, Any]], run: Mapping[str, Any]) -> str:
    if not later:
        return f"run {run['status']}"
    nxt = later[0]
    if nxt["instances"] != attempt["instances"]:
        return f"attempt {nxt['number']} on {nxt['instances']}"
    step = nxt["resumed_from_step"]
    return f"attempt {nxt['number']} " + (f"from step {step}" if step is not None else "fresh")


def fault_summary(
    fault_log: Sequence[tuple[int, str, str, int]],
    records: Sequence[FaultRecord],
    jobs: Sequence[SimJob],
    runs: Mapping[str, Mapping[str, Any]],
    *,
    drill_end_ms: int,
) -> list[dict[str, Any]]:
    """Per fault that fired: what, where, how it was classed, what came of it and its GPU-hours."""
    by_job: dict[str, list[SimJob]] = {}  # a deleted job's name may have been used again
    for j in sorted(jobs, key=lambda j: j.created_ms):
        by_job.setdefault(j.name, []).append(j)
    by_key = {(r.at_ms, r.job, r.kind): r for r in records}
    out = []
    for at_ms, job_name, kind, host in fault_log:
        named = by_job.get(job_name, [])
        job = next((j for j in reversed(named) if j.created_ms <= at_ms), named[0] if named else None)
        run_name = job.run_name if job else None
        if job is None:  # refused at CreateTrainingJob (throttle, quota): the attempt's job name
            run_name = next(
                (n for n, r in runs.items() if any(a["job_name"] == job_name for a in r["attempts"])), None
            )
        run = runs.get(run_name) if run_name else None
        attempt = None
        if run is not None:
            attempt = next((a for a in run["attempts"] if a["job_name"] == job_name), None)
        cls, then = classify(kind, attempt, run) if run is not None else ("-", "-")
        rec = by_key.get((at_ms, job_name, kind))
        gpu_hours, recovered = None, None
        if rec is not None and job is not None and kind not in START_FAULTS and kind not in PAUSE_KINDS:
            gpu_hours, recovered = fault_loss(rec, jobs, drill_end_ms=drill_end_ms)
        out.append(
            {
                "at_ms": at_ms,
                "run": run_name,
                "job": job_name,
                "attempt": attempt["number"] if attempt else None,
                "kind": kind,
                "host": host,
                "classified_as": cls,
                "then": then,
                "end_class": attempt["end_class"] if attempt else None,
                "hang_signals": list(attempt.get("hang_signals") or []) if attempt else [],
                "recovered": recovered,
                "gpus": gpus_of(job) if job is not None else None,
                "gpu_hours_lost": gpu_hours,
            }
        )
    return out


def check_expectations(
    expect: Mapping[str, Mapping[str, Any]],
    runs: Mapping[str, Mapping[str, Any]],
    alerts: Mapping[str, list[str]],
) -> list[str]:
    """Each expectation (``drill.scenarios.fields.EXPECT_FIELDS``) the drill did not meet, as a line."""
    out = []
    for name, exp in expect.items():
        got = runs.get(name)
        if got is None:
            out.append(f"expect: run {name} was never submitted")
            continue
        actual: dict[str, Any] = {
            "status": got["status"],
            "attempts": len(got["attempts"]),
            "restarts": got["restarts"],
            "restarts_by_class": dict(got["restarts_by_class"]),
            "end_classes": [a["end_class"] for a in got["attempts"]],
            "resumed_from_steps": [a["resumed_from_step"] for a in got["attempts"]],
        }
        for key, want in exp.items():
            if key == "max_gpu_hours_lost":
                if got["gpu_hours_lost"] > want:
                    out.append(
                        f"expect: {name} lost {got['gpu_hours_lost']:,.1f} GPU-hours, more than {want:,}"
                    )
            elif key == "alerts_include":
                missing = [e for e in want if e not in alerts.get(name, [])]
                if missing:
                    out.append(f"expect: {name} published no {', '.join(missing)} alert")
            elif key == "hangs_detected_by":
                out += _hang_expectation(name, got["attempts"], want)
            elif actual[key] != want:
                out.append(f"expect: {name} {key} {_text(actual[key])}, expected {_text(want)}")
    return out


def _hang_expectation(name: str, attempts: list[Mapping[str, Any]], signals: list[str]) -> list[str]:
    stops = [a for a in attempts if a.get("stop_intent") == "hang"]
    if not stops:
        return [
            f"expect: {name} had no attempt stopped as hung (expected one caught by {' or '.join(signals)})"
        ]
    return [
        f"expect: {name} attempt {a['number']} was stopped as hung on "
        f"{', '.join(a['hang_signals']) or 'no recorded signal'}, expected {' or '.join(signals)}"
        for a in stops
        if not set(a["hang_signals"]) & set(signals)
    ]


def _text(v: Any) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {n}" for k, n in v.items()) or "none"
    if isinstance(v, list):
        return "[" + ", ".join("-" if x is None else str(x) for x in v) + "]"
    return str(v)
