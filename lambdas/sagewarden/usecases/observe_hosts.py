"""The log look-ups of `domain/hosts/` (bad hosts, fabric, stragglers): GPU hardware lines, peer
addresses, fingerprints, start-up scans and step lines, read by the Observer.

Bounded FilterLogEvents reads; an error is unknown. Why: docs/recovery.md (*Bad hosts and slow fabric*, *Stragglers*)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sagewarden.domain.endings.attempt_ended import job_end_ms
from sagewarden.domain.hosts.bad_hosts import (
    ADDRESS_LINES,
    ADDRESS_WINDOW_MS,
    FINGERPRINT_PATTERN,
    FINGERPRINT_WINDOW_MS,
    HARDWARE_LINES,
    HARDWARE_PATTERN,
    HARDWARE_WINDOW_MS,
    address_pattern,
    fingerprint_keep,
    hosts_in_tail,
    peer_addresses,
)
from sagewarden.domain.hosts.fabric import MAX_EVIDENCE, SUPPLEMENTARY_PATTERNS, scan_patterns
from sagewarden.domain.hosts.stragglers import STEP_PATTERN, read_lines, read_since_ms
from sagewarden.domain.vocabulary.events import Event, JobObserved, Tick
from sagewarden.domain.vocabulary.models import Run
from sagewarden.usecases.audit_text import error_text, run_secrets

if TYPE_CHECKING:
    from sagewarden.usecases.supervisor import Supervisor

log = logging.getLogger("sagewarden.service")


def read_fingerprints(
    sup: Supervisor, run: Run, job: str, failures: str
) -> tuple[tuple[str, ...], str | None]:
    """The fingerprint lines the attempt `job` printed at its start: from a minute before Training
    to FINGERPRINT_WINDOW_MS after (the contract prints them once, at start). A read to now would
    search the whole attempt -- FilterLogEvents may answer a long window in many pages, empty ones
    among them -- and run out of pages on a job with fewer fingerprint lines than it keeps."""
    cur = run.current
    if cur is None or cur.job_name != job or not job:
        return (), None
    since = cur.training_started_ms or cur.created_ms or cur.requested_at_ms
    try:
        keep = fingerprint_keep(cur.instance_count)
        lines = sup.logs.matching_lines(
            job,
            since - 60_000,
            FINGERPRINT_PATTERN,
            keep=keep,
            until_ms=since + FINGERPRINT_WINDOW_MS,
            secrets=run_secrets(run),
        )
        return lines, None
    except Exception as exc:  # unknown, not "no fingerprint"
        log.warning("could not read the fingerprints of %s: %s", job, exc)
        sup.counters.add(failures)
        return (), error_text(exc, run_secrets(run))


def read_hardware_printers(
    sup: Supervisor, run: Run, event: JobObserved, failures: str
) -> tuple[tuple[str, ...], str | None]:
    """The hosts that printed a GPU hardware line (Xid, ECC, off the bus, GPU lost) in the last
    half hour of the failed attempt `event` reports, found with one bounded FilterLogEvents over
    every host's stream. The log tail reads them first: on a job of hundreds of hosts its per-host
    reads run out of time in host order, and the host that failed may be past the cut. Returns the
    hosts and the error of a read that failed (logged and counted): the tail then reads the hosts
    in order, as without this look-up, and an ending that names no host waits for a read that
    succeeds (domain/endings/attempt_ended.py: unknown, not "no host printed one")."""
    att = run.current
    if att is None or att.job_name != event.job_name or att.instance_count < 2:
        return (), None
    end = job_end_ms(event) or sup.clock()
    since = max(att.training_started_ms or att.created_ms or att.requested_at_ms, end - HARDWARE_WINDOW_MS)
    try:
        lines = sup.logs.matching_lines(
            att.job_name, since, HARDWARE_PATTERN, keep=HARDWARE_LINES, newest=True, secrets=run_secrets(run)
        )
    except Exception as exc:
        log.warning("could not look for hardware lines of %s: %s", att.job_name, exc)
        sup.counters.add(failures)
        return (), error_text(exc, run_secrets(run))
    return hosts_in_tail(lines, att.instance_count), None


def read_addresses(
    sup: Supervisor, run: Run, event: JobObserved, tail: tuple[str, ...], failures: str
) -> tuple[tuple[str, ...], str | None]:
    """The lines in which the failed attempt's hosts declared the peer addresses its log tail names
    (domain/hosts/bad_hosts.py, peers by address): one bounded FilterLogEvents per address (at most
    hosts.MAX_ADDRESSES), over the attempt's first ADDRESS_WINDOW_MS of Training, where NCCL prints
    them at its first collective. Returns the lines and the error of a read that failed (unknown,
    never "no host has it")."""
    att = run.current
    if att is None or att.job_name != event.job_name or att.instance_count < 2 or event.status != "Failed":
        return (), None
    ips = peer_addresses(tail)
    if not ips:
        return (), None
    since = att.training_started_ms or att.created_ms or att.requested_at_ms
    lines: list[str] = []
    try:
        for ip in ips:
            lines += sup.logs.matching_lines(
                att.job_name,
                since - 60_000,
                address_pattern(ip),
                keep=ADDRESS_LINES,
                until_ms=since + ADDRESS_WINDOW_MS,
            )
    except Exception as exc:
        log.warning("could not look up the peer addresses of %s: %s", att.job_name, exc)
        sup.counters.add(failures)
        return tuple(lines), error_text(exc)
    return tuple(lines), None


def read_scan(
    sup: Supervisor, run: Run, event: Event, failures: str
) -> tuple[tuple[str, ...] | None, str | None]:
    """The start-up scan's lines for the current attempt (None: no scan due, or it failed)."""
    cur = run.current
    patterns = scan_patterns(run) if isinstance(event, Tick) else ()
    if cur is None or not patterns or cur.training_started_ms is None:
        return None, None
    lines: list[str] = []
    since = cur.training_started_ms - 60_000
    secrets = run_secrets(run)
    try:
        for pattern in (p for p in patterns if p not in SUPPLEMENTARY_PATTERNS):
            keep = fingerprint_keep(cur.instance_count) if pattern == FINGERPRINT_PATTERN else None
            lines += sup.logs.matching_lines(cur.job_name, since, pattern, keep=keep, secrets=secrets)
    except Exception as exc:  # unknown: nothing is judged, the next minute reads again
        log.warning("start-up scan of %s failed: %s", cur.job_name, exc)
        sup.counters.add(failures)
        return None, error_text(exc, run_secrets(run))
    for pattern in (p for p in patterns if p in SUPPLEMENTARY_PATTERNS):
        try:  # evidence only: a failure leaves the scan as the reads above make it
            extra = sup.logs.matching_lines(cur.job_name, since, pattern, keep=MAX_EVIDENCE, secrets=secrets)
            lines += [line for line in extra if line not in lines]  # (a line both reads matched: once)
        except Exception as exc:
            log.warning("start-up scan of %s: %s could not be read: %s", cur.job_name, pattern, exc)
            sup.counters.add(failures)
    return tuple(lines), None


def read_steps(
    sup: Supervisor, run: Run, event: Event, now_ms: int, failures: str
) -> tuple[tuple[str, ...] | None, str | None]:
    """The current attempt's step lines over the window domain/hosts/stragglers.py asks for, with one
    bounded FilterLogEvents (None: no read due, or it failed), as many lines as the domain asks
    (`stragglers.read_lines`: the first ones for the baselines, then the newest)."""
    cur = run.current
    since = read_since_ms(run, now_ms) if isinstance(event, Tick) else None
    if cur is None or since is None:
        return None, None
    try:
        keep, newest = read_lines(run)
        return sup.logs.matching_lines(cur.job_name, since, STEP_PATTERN, keep=keep, newest=newest), None
    except Exception as exc:  # unknown: nothing is judged, the next read tries again
        log.warning("step lines of %s could not be read: %s", cur.job_name, exc)
        sup.counters.add(failures)
        return None, error_text(exc, run_secrets(run))
