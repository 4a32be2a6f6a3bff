"""Slow fabric: a multi-node job on EFA instances whose NCCL runs over TCP sockets, found by a
start-up scan of its log. Pure. Why: docs/recovery.md (*Slow fabric*, *Where the rules live*)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision
from sagewarden.domain.hosts.bad_hosts import (
    FINGERPRINT_PATTERN,
    FINGERPRINT_WINDOW_MS,
    check_fingerprints,
    fingerprints,
)
from sagewarden.domain.vocabulary.models import Attempt, Run

EFA_GPU_FAMILY = re.compile(r"^ml\.(p4d|p4de|p5|p5e|p5en|p6-[a-z0-9]+)\.")
TRANSPORT_PATTERN = '"Using network"'  # CloudWatch Logs filter pattern: the phrase as written
# Only the lines of a fallback to sockets (the documented `?"a" ?"b"` form: any of the phrases).
# NCCL prints its choice once per rank, so the first lines of TRANSPORT_PATTERN (a read keeps a
# few hundred) cover only the first tens of hosts of a large job; this read finds a fallback on
# any host. It can only add evidence: its failure leaves the scan as the other reads make it.
SOCKET_PATTERN = '?"Using network Socket" ?"NET/Socket : Using" ?"Selected Provider is tcp" ?"Selected Provider is sockets"'
SUPPLEMENTARY_PATTERNS = frozenset({SOCKET_PATTERN})
# after Training starts (NCCL initialises at the first collective; the fingerprints print at start)
SCAN_WINDOW_MS = FINGERPRINT_WINDOW_MS
SCAN_EVERY_MS = 60_000
MAX_EVIDENCE = 5
DEBUG_LEVELS = ("INFO", "TRACE")  # NCCL prints its network choice at INFO and below

_SOCKET = re.compile(
    r"using network socket|net/socket ?: ?using|selected provider is (?:tcp|sockets)\b", re.IGNORECASE
)
_EFA = re.compile(r"using network (?:aws )?libfabric|selected provider is efa\b|using network ofi", re.I)
_ANY_NETWORK = re.compile(r"using network \S", re.IGNORECASE)


def environment(run: Run) -> dict[str, str]:
    """The Environment every attempt gets (the policy's defaults, the request's own winning)."""
    env = dict(run.policy.environment_defaults)
    env.update({str(k): str(v) for k, v in dict(run.request.get("Environment") or {}).items()})
    return env


def nccl_debug_info(run: Run) -> bool:
    return environment(run).get("NCCL_DEBUG", "").strip().upper() in DEBUG_LEVELS


def efa_multi_node(instance_type: str, instance_count: int) -> bool:
    return instance_count > 1 and EFA_GPU_FAMILY.match(instance_type) is not None


def fabric_applies(run: Run, att: Attempt) -> bool:
    """The fabric check watches this attempt (EFA instances, several of them, NCCL_DEBUG=INFO)."""
    return (
        run.policy.slow_fabric_check
        and efa_multi_node(att.instance_type, att.instance_count)
        and nccl_debug_info(run)
    )


def transport(lines: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """("socket" | "efa" | None, the lines that show it). Any host on sockets makes it "socket"."""
    sockets = [line for line in lines if _SOCKET.search(line)]
    if sockets:
        return "socket", tuple(sockets[:MAX_EVIDENCE])
    efa = [line for line in lines if _EFA.search(line)]
    if efa:
        return "efa", tuple(efa[:MAX_EVIDENCE])
    other = [line for line in lines if _ANY_NETWORK.search(line)]
    if other:  # e.g. "Using network IB": not sockets
        return "other", tuple(other[:MAX_EVIDENCE])
    return None, ()


# --------------------------------------------------------------------------------------------
# the start-up scan


def _fabric_pending(run: Run, att: Attempt) -> bool:
    return fabric_applies(run, att) and att.fabric is None


def _scanning(run: Run, att: Attempt | None) -> bool:
    return (
        att is not None
        and not run.status.terminal
        and att.in_training
        and att.training_started_ms is not None
        and att.stop_intent is None
        and not att.scan_done
        and (_fabric_pending(run, att) or bool(run.bad_fingerprints))
    )


def scan_patterns(run: Run) -> tuple[str, ...]:
    """The filter patterns the service reads for the current attempt's start-up scan (none: no
    scan due). Called on the sweep's Tick only."""
    cur = run.current
    if cur is None or not _scanning(run, cur):
        return ()
    patterns = []
    if _fabric_pending(run, cur):
        patterns += [TRANSPORT_PATTERN, SOCKET_PATTERN]
    if run.bad_fingerprints:
        patterns.append(FINGERPRINT_PATTERN)
    return tuple(patterns)


def scan_due_ms(run: Run, now_ms: int) -> int | None:
    """The sweep looks every minute while the current attempt's start-up scan is open."""
    return now_ms + SCAN_EVERY_MS if _scanning(run, run.current) else None


def on_scan(d: PendingDecision) -> bool:
    """Act on the start-up scan the service read (obs.scan_lines); True when anything changed."""
    cur = d.run.current
    if cur is None or not _scanning(d.run, cur):
        return False
    if d.obs.scan_lines is None:
        if d.obs.scan_error is None:
            return False
        d.note(f"start-up scan of {cur.job_name} unknown (read again next minute): {d.obs.scan_error}")
        return _close_if_late(d, cur)
    lines = d.obs.scan_lines
    if check_fingerprints(d, cur, lines):
        cur = d.run.current or cur
        d.put_attempt(dataclasses.replace(cur, scan_done=True))
        return True
    changed = False
    if _fabric_pending(d.run, cur):
        verdict, evidence = transport(lines)
        if verdict is not None:
            cur = dataclasses.replace(cur, fabric=verdict, fabric_evidence=evidence)
            d.put_attempt(cur)
            changed = True
            if verdict == "socket":
                _flag(d, cur, evidence)
            else:
                d.note(f"attempt {cur.number}: NCCL uses {verdict} ({evidence[0] if evidence else ''})")
    # every host printed its fingerprint, none known bad: nothing more to look for there
    all_seen = len(fingerprints(lines)) >= cur.instance_count
    if not _fabric_pending(d.run, cur) and (not d.run.bad_fingerprints or all_seen):
        d.put_attempt(dataclasses.replace(cur, scan_done=True))
        return True
    return _close_if_late(d, cur) or changed


def _close_if_late(d: PendingDecision, cur: Attempt) -> bool:
    started = cur.training_started_ms
    if started is None or d.now - started < SCAN_WINDOW_MS:
        return False
    if _fabric_pending(d.run, cur):
        d.note(
            f"attempt {cur.number}: no NCCL 'Using network' line in its first "
            f"{SCAN_WINDOW_MS // 60_000} min of Training; the fabric is not judged"
        )
    d.put_attempt(dataclasses.replace(d.run.current or cur, scan_done=True))
    return True


def _flag(d: PendingDecision, cur: Attempt, evidence: tuple[str, ...]) -> None:
    d.act(
        notify(
            d,
            "warning",
            "attempt.slow_fabric",
            f"{d.run.name}: attempt {cur.number}'s NCCL runs over TCP sockets, not EFA",
            [
                f"Job: {cur.job_name} ({cur.instance_count} x {cur.instance_type}, instances with EFA)",
                "NCCL chose sockets: its collectives run several times slower, without an error. The "
                "job keeps training; stop it and fix the environment if the slowdown matters.",
                "Usual causes: the aws-ofi-nccl plugin is missing from the image or not found "
                "(LD_LIBRARY_PATH), FI_PROVIDER is not efa, or the security group does not allow "
                "all traffic to itself.",
                "Log lines:",
                *evidence,
            ],
        )
    )
    d.note(f"attempt {cur.number}: NCCL selected sockets on EFA instances (attempt.slow_fabric)")


def submit_lines(run: Run, instance_type: str, instance_count: int) -> list[str]:
    """What the run.submitted alert says about the fabric check."""
    if not run.policy.slow_fabric_check or not efa_multi_node(instance_type, instance_count):
        return []
    if nccl_debug_info(run):
        return [
            "Fabric check: on (NCCL_DEBUG=INFO): a job whose NCCL selects sockets instead of EFA is "
            "flagged within minutes of its first collective."
        ]
    return [
        "Fabric check: off. Set Environment NCCL_DEBUG=INFO (or policy environment_defaults) so "
        "sagewarden can see which network NCCL selects and flag a job that falls back to TCP sockets."
    ]
