"""Reads a training job's logs, every host, for classification, hang triage and log silence.

Lists and groups training streams per host, scores lines (`line_score`) for `tail`, triages hosts
within a time budget, and scrubs secrets (`domain/vocabulary/redaction.py`) before clipping.
Why: docs/hang-detection.md (*How the log tail is chosen*)."""

from __future__ import annotations

import itertools
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from sagewarden import keys
from sagewarden.domain.hangs.cadence import activity_per_minute, phase_cover
from sagewarden.domain.hosts.bad_hosts import FINGERPRINT_MIN_LINES
from sagewarden.domain.vocabulary.bounded import clip_text
from sagewarden.domain.vocabulary.names import training_stream
from sagewarden.domain.vocabulary.redaction import scrub_text

log = logging.getLogger(__name__)

TAIL_BUDGET_S = 15.0  # tail and triage run one after the other inside a 90 s handler
TRIAGE_BUDGET_S = 15.0
REUSE_S = 30.0  # a job's host reads this recent serve the next look (the tail, then the triage)
SILENCE_BUDGET_S = 10.0  # per run, inside the sweep
ACTIVITY_BUDGET_S = 10.0  # a no-subscription deployment reads an attempt's activity from its logs
ACTIVITY_MAX_PAGES = 50  # FilterLogEvents pages (up to 10,000 events or 1 MB each) per read
# a read that names no `keep`: NCCL's network lines (a few per rank); the fingerprint reads ask for
# at least as many (domain/hosts/bad_hosts.py: one per host, never fewer than this)
MATCH_MAX_LINES = FINGERPRINT_MIN_LINES
MATCH_LINES_CAP = 4_000  # whatever a caller asks: <= 4 MB at LINE_MAX_BYTES a line
NEWEST_MAX_PAGES = 20  # a read that keeps the newest lines reads every page
MATCH_MAX_PAGES = 5
MATCH_BUDGET_S = 5.0
PHASE_PATTERN = '"[sagewarden] phase="'  # a quoted term matches the phrase as written
TRIAGE_MAX_ROWS = 50
LINE_MAX_BYTES = 1024  # one log event can be 256 KB; evidence and alerts need lines, not pages
TOP_CONTEXT_BEFORE = 2  # lines kept before the top host's first best-scoring line
TOP_CONTEXT_AFTER = 6  # ... and after it
MARK = "[sagewarden]"

_NOT_FOUND = "ResourceNotFoundException"
_HARDWARE = re.compile(
    r"\bxid\b|\becc\b|uncorrectable|\bnvrm\b|off the bus|gpu is lost|unspecified launch failure", re.I
)
_SYMPTOM = re.compile(
    r"nccl|watchdog|time[d ]?out|connection (?:reset|closed)|rendezvous|c10d|gloo|tcpstore", re.I
)
_ERROR = re.compile(
    r"error|exception|traceback|fatal|\bkilled\b|out of memory|segmentation fault|core dumped|exit ?code",
    re.I,
)


def line_score(text: str) -> int:
    """How much a log line matters for finding the host that failed first (see module doc)."""
    if _HARDWARE.search(text):
        return 3
    if _SYMPTOM.search(text):
        return 1
    if _ERROR.search(text):
        return 2
    return 0


class LogReadIncomplete(TimeoutError):
    """The time budget ran out before CloudWatch Logs gave an answer: nothing is known."""


@dataclass(frozen=True)
class _Host:
    name: str  # "algo-37"
    number: int
    stream: str  # the host's newest stream


@dataclass
class _Read:
    """What was read of one host: its lines (oldest first) as (timestamp, text, score)."""

    host: _Host
    lines: list[tuple[int, str, int]] = field(default_factory=list)

    @property
    def score(self) -> int:
        return max((s for _, _, s in self.lines), default=0)

    def newest(self, limit: int) -> _Read:
        """The same host with only its `limit` newest lines."""
        return _Read(self.host, self.lines[-limit:] if limit > 0 else [])

    @property
    def first_hit(self) -> int:
        """Index of the host's first best-scoring line."""
        best = self.score
        return next(i for i, (_, _, s) in enumerate(self.lines) if s == best)


@dataclass
class _Listing:
    hosts: list[_Host]
    complete: bool


class CloudWatchLogsReader:
    def __init__(
        self,
        client: Any,
        group: str = keys.TRAINING_LOG_GROUP,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logs = client
        self._group = group
        self._clock = clock
        # the newest read of one job, (job, when, limit, result): a hang's triage right after its
        # tail reuses it instead of reading every host again (250 hosts = 250 GetLogEvents)
        self._recent: (
            tuple[str, float, int, tuple[str, ...], tuple[list[_Read], list[tuple[str, str]], _Listing]]
            | None
        ) = None

    # -- listing ------------------------------------------------------------------------------
    def _hosts(self, job_name: str, deadline: float) -> _Listing:
        """Every host of the job with its newest stream, algo-1, algo-2, ... algo-10 ...; stops
        early (complete=False) when the deadline passes between pages."""
        prefix = f"{job_name}/"
        streams: list[dict[str, Any]] = []
        token: str | None = None
        complete = True
        while True:
            kwargs: dict[str, Any] = {"logGroupName": self._group, "logStreamNamePrefix": prefix, "limit": 50}
            if token:
                kwargs["nextToken"] = token
            try:
                resp = self._logs.describe_log_streams(**kwargs)
            except ClientError as exc:
                if exc.response["Error"]["Code"] == _NOT_FOUND:
                    return _Listing([], True)
                raise
            streams += resp.get("logStreams", [])
            nxt = resp.get("nextToken")
            if not nxt or nxt == token:
                break
            token = nxt
            if self._clock() >= deadline:
                complete = False
                break
        newest: dict[str, tuple[tuple[int, int, str], _Host]] = {}
        for s in streams:
            name = s["logStreamName"]
            parsed = training_stream(name)
            if parsed is None or parsed[0] != job_name:
                continue  # not a host: e.g. the SSM agent's <job>/algo-<n>-<ts>/ssm (remote debugging)
            _, number, epoch = parsed
            host = _Host(f"algo-{number}", number, name)
            age = (epoch, int(s.get("creationTime", 0)), name)
            if host.name not in newest or age > newest[host.name][0]:
                newest[host.name] = (age, host)
        hosts = sorted((h for _, h in newest.values()), key=lambda h: h.number)
        return _Listing(hosts, complete)

    def _last_events(self, host: _Host, limit: int) -> list[dict[str, Any]]:
        try:
            resp = self._logs.get_log_events(
                logGroupName=self._group, logStreamName=host.stream, limit=limit, startFromHead=False
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == _NOT_FOUND:
                return []
            raise
        return sorted(resp.get("events", []), key=lambda e: int(e["timestamp"]))

    def _read_hosts(
        self,
        job_name: str,
        limit: int,
        deadline: float,
        first: Sequence[str] = (),
        secrets: Sequence[str] | None = (),
    ) -> tuple[list[_Read], list[tuple[str, str]], _Listing]:
        """Read up to `limit` newest events of every host until the deadline, the hosts named in
        `first` (suspects, e.g. the idle ones) before the others. Returns what was read, the hosts
        not read with why, and the listing. A read of the same job at least as deep, made less than
        REUSE_S ago, is reused when it was scrubbed of the same secrets (`secrets` None: the caller
        reads no text, any read will do)."""
        recent, scrubbed = self._recent, tuple(secrets or ())
        if recent is not None:
            job, when, depth, was_scrubbed, result = recent
            same = secrets is None or was_scrubbed == scrubbed
            if job == job_name and depth >= limit and same and self._clock() - when < REUSE_S:
                reads, unread, listing = result
                return [r.newest(limit) for r in reads], unread, listing
        started = self._clock()
        result = self._read_hosts_now(job_name, limit, deadline, first, scrubbed)
        self._recent = (job_name, started, limit, scrubbed, result)
        return result

    def _read_hosts_now(
        self, job_name: str, limit: int, deadline: float, first: Sequence[str], secrets: Sequence[str]
    ) -> tuple[list[_Read], list[tuple[str, str]], _Listing]:
        listing = self._hosts(job_name, deadline)
        reads: list[_Read] = []
        unread: list[tuple[str, str]] = []
        first_error: ClientError | None = None
        # a budget cut must not lose the hosts that matter: suspects are read first
        rank = {name: i for i, name in enumerate(dict.fromkeys(first))}
        order = sorted(listing.hosts, key=lambda h: rank.get(h.name, len(rank)))  # stable otherwise
        for host in order:
            if self._clock() >= deadline:
                unread.append((host.name, "time budget ran out"))
                continue
            try:
                events = self._last_events(host, limit)
            except ClientError as exc:
                log.warning("could not read %s of %s: %s", host.stream, job_name, exc)
                unread.append((host.name, exc.response["Error"]["Code"]))
                first_error = first_error or exc
                continue
            read = _Read(host)
            for e in events:
                text = _line(host.name, e, secrets)
                read.lines.append((int(e["timestamp"]), text, line_score(text)))
            reads.append(read)
        if first_error is not None and not reads and len(unread) == len(listing.hosts):
            raise first_error  # nothing was observed: an error, not an empty log
        return reads, unread, listing

    # -- public -------------------------------------------------------------------------------
    def tail(
        self,
        job_name: str,
        lines: int,
        *,
        budget_s: float = TAIL_BUDGET_S,
        first: Sequence[str] = (),
        secrets: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """At most `lines` lines from all the job's hosts, in time order. The most relevant
        hosts' lines are always among them (see the module doc): the top host's lines around its
        first error-looking line, then one line from each other error-looking host (up to half
        of the room left), then the newest lines. `[sagewarden]` lines at the end point at the
        first error-looking line (jobs with several hosts) and say which hosts were not read
        (time budget, read errors). Hosts named in `first` are read before the others."""
        if lines <= 0:
            return ()
        deadline = self._clock() + budget_s
        reads, unread, listing = self._read_hosts(job_name, lines, deadline, first, secrets)
        trailer: list[str] = []
        ranked = sorted(
            (r for r in reads if r.score > 0),
            key=lambda r: (-r.score, r.lines[r.first_hit][0], r.host.number or 0, r.host.name),
        )
        if ranked and len(reads) > 1:
            top = ranked[0]
            trailer.append(
                clip_text(f"{MARK} first error-looking line: {top.lines[top.first_hit][1]}", LINE_MAX_BYTES)
            )
        notice = _unread_notice(unread, len(listing.hosts), listing.complete, "log tail")
        if notice:
            trailer.append(notice)
        trailer = trailer[-lines:]  # with no room the unread notice wins over the pointer
        room = lines - len(trailer)
        chosen: set[tuple[int, int]] = set()  # (read index, line index)
        index = {id(r): i for i, r in enumerate(reads)}
        if ranked and room:
            top = ranked[0]
            ti, hit = index[id(top)], top.first_hit
            lo = max(0, hit - TOP_CONTEXT_BEFORE)
            hi = min(len(top.lines), hit + TOP_CONTEXT_AFTER + 1)
            block = [hit, *range(lo, hit), *range(hit + 1, hi)]  # the hit survives a small room
            for j in block[: max(1, room // 2)]:
                chosen.add((ti, j))
            peers = len(chosen) + (room - len(chosen)) // 2
            for r in ranked[1:]:
                if len(chosen) >= peers:
                    break
                chosen.add((index[id(r)], r.first_hit))
        newest_first = sorted(
            ((ts, i, j) for i, r in enumerate(reads) for j, (ts, _, _) in enumerate(r.lines)),
            reverse=True,
        )
        for _, i, j in newest_first:
            if len(chosen) >= room:
                break
            chosen.add((i, j))
        body = sorted(chosen, key=lambda ij: (reads[ij[0]].lines[ij[1]][0], ij[0], ij[1]))
        return (*(reads[i].lines[j][1] for i, j in body), *trailer)

    def newest_event_ms(
        self, job_name: str, host: str | None = None, *, budget_s: float = TAIL_BUDGET_S
    ) -> int | None:
        """When the job (or one host of it, ``algo-<n>``) last wrote a log event, epoch ms; None
        when it wrote none, or when a host could not be read or listed (unknown is not "older").
        Right after `tail` this reuses its read: no further call."""
        deadline = self._clock() + budget_s
        reads, unread, listing = self._read_hosts(job_name, 1, deadline, (host,) if host else (), None)
        if not listing.complete or any(host is None or name == host for name, _ in unread):
            return None
        times = [r.lines[-1][0] for r in reads if r.lines and (host is None or r.host.name == host)]
        return max(times, default=None)

    def has_events_since(
        self, job_name: str, since_ms: int, *, until_ms: int | None = None, budget_s: float = SILENCE_BUDGET_S
    ) -> bool:
        """Did the job write any log event at or after `since_ms` (and before `until_ms`, if
        given)? (The log-silence check where it is judged from the logs, and the confirmation of
        a heartbeat's silence.)

        FilterLogEvents may answer a page with no events and a `nextToken` (it scans the group
        in slices): that is not silence, so pages are followed until an event is found (True) or
        the token ends (False). A missing log group or stream (ResourceNotFoundException) is an
        answer: no events, False. Any other error propagates, and `LogReadIncomplete` is raised
        when the time budget runs out before an answer: unknown is not empty, and the caller
        must not read an error as silence (retry on the next sweep instead).
        """
        for page in self._filter_pages(
            job_name,
            start_ms=since_ms,
            end_ms=until_ms,
            pattern=None,
            budget_s=budget_s,
            what="log events",
            limit=1,
            max_pages=None,
        ):
            if any(until_ms is None or int(e.get("timestamp", 0)) < until_ms for e in page):
                return True
        return False

    def _filter_pages(
        self,
        job_name: str,
        *,
        start_ms: int,
        end_ms: int | None,
        pattern: str | None,
        budget_s: float,
        what: str,
        limit: int | None = None,
        max_pages: int | None = ACTIVITY_MAX_PAGES,
    ) -> Any:
        """FilterLogEvents pages of this job's streams in [start_ms, end_ms), every page followed
        until the token ends; `LogReadIncomplete` when the time budget or `max_pages` runs
        out first (an incomplete read is unknown, never "fewer events"). A missing group or stream
        is an answer: no events."""
        deadline = self._clock() + budget_s
        prefix = f"{job_name}/"
        kwargs: dict[str, Any] = {
            "logGroupName": self._group,
            "logStreamNamePrefix": prefix,
            "startTime": start_ms,
        }
        if end_ms is not None:
            kwargs["endTime"] = end_ms
        if pattern:
            kwargs["filterPattern"] = pattern
        if limit is not None:
            kwargs["limit"] = limit
        token: str | None = None
        for page in itertools.count(1) if max_pages is None else range(1, max_pages + 1):
            if token:
                kwargs["nextToken"] = token
            try:
                resp = self._logs.filter_log_events(**kwargs)
            except ClientError as exc:
                if exc.response["Error"]["Code"] == _NOT_FOUND:
                    return
                raise
            # only this job's training streams count (CloudWatch filters by prefix already, moto does
            # not; neither leaves out the SSM agent's <job>/algo-<n>-<ts>/ssm of remote debugging)
            yield [e for e in resp.get("events", []) if _is_training_event(e, job_name)]
            nxt = resp.get("nextToken")
            if not nxt:
                return
            if nxt == token:
                raise LogReadIncomplete(f"FilterLogEvents for {job_name} returned the same nextToken twice")
            token = nxt
            if self._clock() >= deadline:
                raise LogReadIncomplete(
                    f"{what} of {job_name}: no complete answer after {page} pages ({budget_s:g} s budget)"
                )
        raise LogReadIncomplete(f"{what} of {job_name}: more than {max_pages} pages of log events")

    def activity(
        self, job_name: str, start_ms: int, end_ms: int, *, budget_s: float = ACTIVITY_BUDGET_S
    ) -> tuple[tuple[int, float], ...]:
        """Per-minute activity of the job read from its logs, as the heartbeat metric would carry
        it (log events, and the minutes a phase marker declares active): where no log subscription
        feeds the heartbeat, the hang windows are learned from this. Bounded by a time budget and a
        page count; an incomplete read raises `LogReadIncomplete` (nothing is learned from it)."""
        events: list[tuple[int, str]] = []
        for page in self._filter_pages(
            job_name, start_ms=start_ms, end_ms=end_ms, pattern=None, budget_s=budget_s, what="log activity"
        ):
            events += [(int(e.get("timestamp", 0)), str(e.get("message", ""))) for e in page]
        counts = activity_per_minute(events)
        return tuple(sorted((t, float(n)) for t, n in counts.items() if start_ms <= t < end_ms))

    def declared_phase_until(
        self, job_name: str, since_ms: int, *, budget_s: float = SILENCE_BUDGET_S
    ) -> int | None:
        """The end (ms) of the latest silent phase the job declared with a phase marker
        (`[sagewarden] phase=<name> max_minutes=<n>`) at or after `since_ms`; None when it declared
        none. Without a log subscription the sweep's log-silence check honours declared phases
        with this, as the heartbeat function does. Errors and incomplete reads propagate."""
        latest: int | None = None
        for page in self._filter_pages(
            job_name,
            start_ms=since_ms,
            end_ms=None,
            pattern=PHASE_PATTERN,
            budget_s=budget_s,
            what="phase markers",
        ):
            for e in page:
                cover = phase_cover(str(e.get("message", "")), int(e.get("timestamp", 0)))
                if cover:
                    end = cover[-1] + 60_000
                    latest = end if latest is None else max(latest, end)
        return latest

    def matching_lines(
        self,
        job_name: str,
        since_ms: int,
        pattern: str,
        *,
        keep: int | None = None,
        newest: bool = False,
        until_ms: int | None = None,
        budget_s: float = MATCH_BUDGET_S,
        secrets: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """The job's log events at or after `since_ms` (and before `until_ms`, if given) that
        match a filter pattern (a quoted phrase), as `[algo-<n>] <message>` lines in time order,
        at most `keep` (default MATCH_MAX_LINES, never more than MATCH_LINES_CAP): the first ones
        (the start-up scan's lines are printed once, at start), or with `newest` the last ones
        (every page is read: the step lines of a recent window, where the newest matter). One
        FilterLogEvents call per page, at most MATCH_MAX_PAGES pages (NEWEST_MAX_PAGES for
        `newest`) and `budget_s`: an incomplete read raises `LogReadIncomplete` (unknown, never
        "none printed"); other errors propagate."""
        max_lines = min(keep or MATCH_MAX_LINES, MATCH_LINES_CAP)
        out: list[tuple[int, str]] = []
        for page in self._filter_pages(
            job_name,
            start_ms=since_ms,
            end_ms=until_ms,
            pattern=pattern,
            budget_s=budget_s,
            what=f"lines matching {pattern}",
            max_pages=NEWEST_MAX_PAGES if newest else MATCH_MAX_PAGES,
        ):
            for e in page:
                parsed = training_stream(str(e.get("logStreamName", "")))
                host = f"algo-{parsed[1]}" if parsed is not None else "?"
                out.append((int(e.get("timestamp", 0)), _line(host, e, secrets)))
            if not newest and len(out) >= max_lines:
                break  # enough: the earliest lines are the ones that matter
        out.sort(key=lambda tl: tl[0])
        return tuple(text for _, text in (out[-max_lines:] if newest else out[:max_lines]))

    def host_triage(
        self,
        job_name: str,
        now_ms: int,
        *,
        budget_s: float = TRIAGE_BUDGET_S,
        max_rows: int = TRIAGE_MAX_ROWS,
        first: Sequence[str] = (),
        secrets: Sequence[str] = (),
    ) -> tuple[str, ...]:
        """One row per host, the host whose newest event is oldest (went quiet first) first:
        `algo-3: last log 31 min ago: <its last line>`; hosts without events come first. Every
        host's newest event is read (one call per host) until the time budget runs out; a first
        `[sagewarden]` row then says which hosts were not read. Past `max_rows` the healthiest
        hosts are folded into one closing row that says how many and how recent they are. Hosts
        named in `first` (suspects) are read before the others."""
        deadline = self._clock() + budget_s
        reads, unread, listing = self._read_hosts(job_name, 1, deadline, first, secrets)
        rows: list[tuple[int, str]] = []
        for r in reads:
            if not r.lines:
                rows.append((0, f"{r.host.name}: no log events"))
                continue
            ts, text, _ = r.lines[-1]
            message = text.split("] ", 1)[-1].strip()
            age = (now_ms - ts) / 60_000
            rows.append((ts, clip_text(f"{r.host.name}: last log {age:.0f} min ago: {message}", 256)))
        rows.sort(key=lambda row: row[0])  # the host that went quiet first comes first
        out = [text for _, text in rows]
        if len(out) > max(1, max_rows):
            keep = max(1, max_rows) - 1
            rest = rows[keep:]
            ages = [(now_ms - ts) / 60_000 for ts, _ in rest if ts]
            span = f"; last log {min(ages):.0f}-{max(ages):.0f} min ago" if ages else ""
            out = [*out[:keep], f"{MARK} ... and {len(rest):,} more hosts{span}"]
        notice = _unread_notice(unread, len(listing.hosts), listing.complete, "host triage")
        return (notice, *out) if notice else tuple(out)


def _is_training_event(event: dict[str, Any], job_name: str) -> bool:
    """Whether a FilterLogEvents event comes from one of the job's training streams (an event
    without a stream name, as some test doubles answer, is the job's)."""
    stream = event.get("logStreamName")
    if stream is None:
        return True
    parsed = training_stream(str(stream))
    return parsed is not None and parsed[0] == job_name


def _line(host: str, event: dict[str, Any], secrets: Sequence[str]) -> str:
    """One log event as `[algo-<n>] <message>`: scrubbed first, then clipped to LINE_MAX_BYTES."""
    message = scrub_text(str(event.get("message", "")).rstrip(), secrets)
    return clip_text(f"[{host}] {message}", LINE_MAX_BYTES)


def _unread_notice(unread: Sequence[tuple[str, str]], total: int, complete: bool, what: str) -> str | None:
    """`[sagewarden] log tail: 12 of 64 hosts not read (time budget ran out: algo-53, ...)`."""
    parts: list[str] = []
    if unread:
        reasons: dict[str, list[str]] = {}
        for host, why in unread:
            reasons.setdefault(why, []).append(host)
        detail = "; ".join(f"{why}: {', '.join(hosts)}" for why, hosts in reasons.items())
        parts.append(f"{len(unread):,} of {total:,} hosts not read ({detail})")
    if not complete:
        parts.append("the stream listing stopped at the time budget: more hosts may exist")
    if not parts:
        return None
    return clip_text(f"{MARK} {what}: {'; '.join(parts)}", LINE_MAX_BYTES)
