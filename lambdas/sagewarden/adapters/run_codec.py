"""The run's stored form: Run, Attempt, checkpoints and alerts as JSON-ready dicts, both ways.

Shared by the DynamoDB store and the in-memory one (drill/account/memory_store.py), so a value that
would not survive DynamoDB does not survive there either.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sagewarden.domain.vocabulary.actions import Notify
from sagewarden.domain.vocabulary.layouts import Checkpoint
from sagewarden.domain.vocabulary.models import (
    Attempt,
    LaunchState,
    PoolWatch,
    PreviousEnding,
    RetireProgress,
    Run,
    RunStatus,
)
from sagewarden.domain.vocabulary.policy import RunPolicy


def _ckpt_to(c: Checkpoint | None) -> dict[str, Any] | None:
    if c is None:
        return None
    out = {"uri": c.uri, "step": c.step, "layout": c.layout.value, "at": c.written_at_ms}
    if c.write_seconds is not None:
        out["write_s"] = c.write_seconds
    if c.previous_step is not None:
        out["prev"] = c.previous_step
    return out


def _ckpt_from(d: Mapping[str, Any] | None) -> Checkpoint | None:
    if not d:
        return None
    prev = d.get("prev")
    return Checkpoint(
        d["uri"],
        int(d["step"]),
        d["layout"],
        d.get("at"),
        d.get("write_s"),
        None if prev is None else int(prev),
    )


def _progress_to(p: RetireProgress) -> dict[str, Any]:
    out = dataclasses.asdict(p)
    out["upload"] = list(p.upload) if p.upload is not None else None
    return out


def _progress_from(d: Mapping[str, Any]) -> RetireProgress:
    upload = d.get("upload")
    return RetireProgress(
        name=str(d["name"]),
        phase=str(d.get("phase", "copy")),
        verified=int(d.get("verified", 0)),
        digest=str(d.get("digest", "")),
        upload=(str(upload[0]), str(upload[1]), str(upload[2])) if upload else None,
        parts=int(d.get("parts", 0)),
        stalled=int(d.get("stalled", 0)),
    )


def _previous_to(p: PreviousEnding | None) -> dict[str, Any] | None:
    if p is None:
        return None
    out = dataclasses.asdict(p)
    out["lines"] = list(p.lines)
    return out


def _previous_from(d: Mapping[str, Any] | None) -> PreviousEnding | None:
    if not d:
        return None
    return PreviousEnding(
        int(d["attempt"]),
        str(d["signature"]),
        int(d["step"]),
        str(d.get("marks", "")),
        bool(d.get("singled_out", False)),
        tuple(str(x) for x in d.get("lines", ())),
    )


def attempt_to_dict(a: Attempt) -> dict[str, Any]:
    out = dataclasses.asdict(a)
    out["launch"] = a.launch.value
    out["resume_from"] = _ckpt_to(a.resume_from)
    out["checkpoint_at_end"] = _ckpt_to(a.checkpoint_at_end)
    out["evidence"] = list(a.evidence)
    out["hang_signals"] = list(a.hang_signals)
    out["suspect_hosts"] = list(a.suspect_hosts)
    out["fabric_evidence"] = list(a.fabric_evidence)
    out["host_baselines"] = [list(b) for b in a.host_baselines]
    out["slow_episode"] = list(a.slow_episode) if a.slow_episode is not None else None
    return out


def attempt_from_dict(d: Mapping[str, Any]) -> Attempt:
    fields = {f.name for f in dataclasses.fields(Attempt)}
    data = {k: v for k, v in d.items() if k in fields}
    data["launch"] = LaunchState(d["launch"])
    data["resume_from"] = _ckpt_from(d.get("resume_from"))
    data["checkpoint_at_end"] = _ckpt_from(d.get("checkpoint_at_end"))
    data["evidence"] = tuple(d.get("evidence", ()))
    data["hang_signals"] = tuple(d.get("hang_signals", ()))
    data["suspect_hosts"] = tuple(d.get("suspect_hosts", ()))
    data["fabric_evidence"] = tuple(d.get("fabric_evidence", ()))
    data["host_baselines"] = tuple((str(b[0]), float(b[1]), float(b[2])) for b in d.get("host_baselines", ()))
    ep = d.get("slow_episode")
    data["slow_episode"] = (str(ep[0]), float(ep[1]), int(ep[2])) if ep else None
    return Attempt(**data)


def run_to_dict(r: Run) -> dict[str, Any]:
    out = {
        f.name: getattr(r, f.name) for f in dataclasses.fields(Run) if f.name not in ("attempts", "policy")
    }
    out["status"] = r.status.value
    out["request"] = dict(r.request)
    out["policy"] = r.policy.to_dict()
    out["restarts_by_class"] = dict(r.restarts_by_class)
    out["last_checkpoint"] = _ckpt_to(r.last_checkpoint)
    out["skipped_choices"] = list(r.skipped_choices)
    out["strays"] = [list(s) for s in r.strays]
    out["warm_pools"] = [dataclasses.asdict(w) for w in r.warm_pools]
    out["checkpoint_history"] = [list(h) for h in r.checkpoint_history]
    out["claims"] = list(r.claims)
    out["bad_fingerprints"] = [list(b) for b in r.bad_fingerprints]
    out["goodput_ms"] = dict(r.goodput_ms)
    out["goodput_estimates"] = list(r.goodput_estimates)
    out["retiring"] = list(r.retiring)
    out["checkpoint_spans"] = [list(s) for s in r.checkpoint_spans]
    out["retire_progress"] = [_progress_to(p) for p in r.retire_progress]
    out["retire_stuck"] = [list(s) for s in r.retire_stuck]
    out["plan_windows"] = [list(w) for w in r.plan_windows]
    out["plan_warned"] = list(r.plan_warned)
    out["last_ending"] = _previous_to(r.last_ending)
    out["current"] = attempt_to_dict(r.current) if r.current is not None else None
    return out


def run_from_dict(d: Mapping[str, Any], attempts: Sequence[Attempt] | None = None) -> Run:
    """The run; its attempts are `attempts` when given, else the current one embedded in it."""
    fields = {f.name for f in dataclasses.fields(Run)}
    data = {k: v for k, v in d.items() if k in fields}
    data["status"] = RunStatus(d["status"])
    data["policy"] = RunPolicy.from_stored(d.get("policy", {}))
    data["last_checkpoint"] = _ckpt_from(d.get("last_checkpoint"))
    data["skipped_choices"] = tuple(d.get("skipped_choices", ()))
    data["strays"] = tuple((str(job), int(at)) for job, at in d.get("strays", ()))
    pool_fields = {f.name for f in dataclasses.fields(PoolWatch)}
    data["warm_pools"] = tuple(
        PoolWatch(**{k: v for k, v in w.items() if k in pool_fields}) for w in d.get("warm_pools", ())
    )
    data["claims"] = tuple(str(c) for c in d.get("claims", ()))
    data["bad_fingerprints"] = tuple((str(b[0]), str(b[1]), int(b[2])) for b in d.get("bad_fingerprints", ()))
    data["goodput_ms"] = {str(k): int(v) for k, v in d.get("goodput_ms", {}).items()}
    data["goodput_estimates"] = tuple(str(k) for k in d.get("goodput_estimates", ()))
    data["retiring"] = tuple(str(k) for k in d.get("retiring", ()))
    data["checkpoint_spans"] = tuple((int(s[0]), int(s[1]), int(s[2])) for s in d.get("checkpoint_spans", ()))
    # items stored before retirement kept its progress have none: every pass proves its objects
    data["retire_progress"] = tuple(_progress_from(p) for p in d.get("retire_progress", ()))
    data["retire_stuck"] = tuple((str(s[0]), str(s[1]), int(s[2])) for s in d.get("retire_stuck", ()))
    data["plan_windows"] = tuple((int(w[0]), int(w[1])) for w in d.get("plan_windows", ()))
    data["plan_warned"] = tuple(int(w) for w in d.get("plan_warned", ()))
    data["last_ending"] = _previous_from(d.get("last_ending"))  # (absent on items stored before it)
    data["checkpoint_history"] = tuple(
        # (step, written at, write seconds or -1, previous step or -1); older items lack the last
        (int(h[0]), int(h[1]), float(h[2]), int(h[3]) if len(h) > 3 else -1)
        for h in d.get("checkpoint_history", ())
    )
    if attempts is None:
        current = d.get("current")
        attempts = [attempt_from_dict(current)] if current else []
    data["attempts"] = tuple(sorted(attempts, key=lambda a: a.number))
    return Run(**data)


def notify_to_dict(n: Notify) -> dict[str, Any]:
    return {
        "severity": n.severity,
        "event": n.event,
        "subject": n.subject,
        "body": n.body,
        "attributes": dict(n.attributes),
    }


def notify_from_dict(d: Mapping[str, Any]) -> Notify:
    return Notify(d["severity"], d["event"], d["subject"], d["body"], dict(d.get("attributes", {})))


def compact_json(value: Any) -> str:
    # UTF-8 as is: escaping non-ASCII text as \uXXXX would make it up to 3x larger (6 bytes for a
    # 2-byte character) and push items past DynamoDB's 400 KB limit.
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str, ensure_ascii=False)
