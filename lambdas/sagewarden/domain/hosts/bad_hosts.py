"""Bad hosts: which host an ending or a hang singled out, the same fault again on a reused warm pool,
GPU fingerprints, and the infra check. Pure. Why: docs/recovery.md (*Bad hosts and slow fabric*)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sagewarden.domain.capacity.warm_pools import fault_key, mark_bad_host, waits_for, watch_of
from sagewarden.domain.decision.alerts import notify
from sagewarden.domain.decision.pending import PendingDecision, request_stop
from sagewarden.domain.hangs.alarms import SIGNAL_GPU_LONE_IDLE
from sagewarden.domain.vocabulary.classifier.models import Classification, EndingClass
from sagewarden.domain.vocabulary.classifier.signatures import (
    CONFIRM_LOG_SIGNATURES,
    HARDWARE_LOG_LABELS,
    INFRA_LOG_SIGNATURES,
    NETWORK_CONFIRM_LABELS,
)
from sagewarden.domain.vocabulary.events import JobObserved
from sagewarden.domain.vocabulary.models import Attempt, Run
from sagewarden.domain.vocabulary.reasons import StopIntent

MAX_BAD_FINGERPRINTS = 16  # per run; the oldest is forgotten first
MAX_SERIALS = 16  # per host (8 GPUs on the largest instances today)
SERIAL_MAX_CHARS = 64
MAX_SINGLED_OUT = 2  # an ending naming more hosts than this points at the fabric, not at a host
FINGERPRINT_PATTERN = '"[sagewarden] host="'  # CloudWatch Logs filter pattern: the phrase as written
# a read of fingerprint lines keeps at least this many; the log reader's default for a read that
# names no bound is the same figure (adapters/cloudwatch_logs_reader.py takes it from here)
FINGERPRINT_MIN_LINES = 200
# a fingerprint read looks this long past Training's start (the contract prints the line once, at
# start): at an ending, and the start-up scan (domain/hosts/fabric.py) watches the same minutes
FINGERPRINT_WINDOW_MS = 20 * 60_000
# A GPU hardware line in any host's log (CloudWatch Logs filter syntax: `?"a" ?"b"` matches either
# phrase, case as written): Xid, ECC, fell/fallen off the bus, GPU lost -- the phrases of
# HARDWARE_LOG_LABELS. One FilterLogEvents over every host finds its printer on a job of hundreds
# of hosts, where the log tail's per-host reads run out of time before reaching it.
HARDWARE_PATTERN = '?"Xid" ?"ECC error" ?"off the bus" ?"GPU is lost"'
HARDWARE_WINDOW_MS = 30 * 60_000  # the printer's line is looked for in the last 30 min of the attempt
HARDWARE_LINES = 20  # the newest hardware lines read (more than MAX_SINGLED_OUT hosts names none)

_PREFIX = re.compile(r"^\s*\[(algo-\d+)\]\s*")
_POINTER = re.compile(r"^\s*\[sagewarden\] first error-looking line:\s*")
_NAMED = re.compile(r"\balgo-(\d+)\b")
_FINGERPRINT = re.compile(
    r"\[sagewarden\] host=(?:algo-)?(\d+) fingerprint=([A-Za-z0-9_.:/-]{1,64}(?:,[A-Za-z0-9_.:/-]{1,64})*)"
)
_HARDWARE = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern, label in INFRA_LOG_SIGNATURES
    if label in HARDWARE_LOG_LABELS
)
_COLLECTIVE = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern, label in (*INFRA_LOG_SIGNATURES, *CONFIRM_LOG_SIGNATURES)
    if label not in HARDWARE_LOG_LABELS
    and (label in NETWORK_CONFIRM_LABELS or (pattern, label) in INFRA_LOG_SIGNATURES)
)

# Peers by address. NCCL, Gloo and EFA name a peer by its IP address, never `algo-<n>`; each rank
# prints, at its first collective with NCCL_DEBUG=INFO, the address it uses -- "NCCL INFO Bootstrap :
# Using eth0:10.0.1.23<0>", "NET/Socket : Using [0]eth0:10.0.1.23<0>", "NET/IB : Using ... ; OOB
# eth0:10.0.1.23<0>" -- in its own host's stream, so the stream tells which host has the address.
# At a failure whose collective lines name peer addresses, the service looks each up in the
# attempt's first minutes (one FilterLogEvents per address, `address_pattern`) and the mapping
# singles out the named peer as `algo-<n>` would (docs/fidelity.md has the sources).
ADDRESS_WINDOW_MS = FINGERPRINT_WINDOW_MS  # NCCL prints its addresses at the first collective
ADDRESS_LINES = 5  # per address looked up: its host prints it once per rank
MAX_ADDRESSES = MAX_SINGLED_OUT  # more peer addresses than this single out no host: none is read
_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_DECLARED_AT = re.compile(r"(?:bootstrap ?: ?using|net/socket ?: ?using|; ?oob)\b", re.IGNORECASE)
_DECLARED_IP = re.compile(rf"[\w.-]+:({_IPV4})<\d+>")
# a peer's address in an error line: "10.0.0.82<38455>", "[18.25.6.30]:28048", "(172.17.0.9, 46229)",
# "peer 10.216.210.236<54862>"
_PEER_IP = re.compile(rf"(?<![\w.:])\[?({_IPV4})(?:\]?:\d+|<\d+>|, ?\d+\))")
_NCCL_PRINTER = re.compile(r"^\s*(algo-\d+):\d+:\d+ ")
_EC2_PRINTER = re.compile(r"^\s*ip-(\d{1,3})-(\d{1,3})-(\d{1,3})-(\d{1,3})\S*:\d+:\d+ ")


# --------------------------------------------------------------------------------------------
# reading lines (pure text work)


def _split(line: str, addresses: Mapping[str, str] | None = None) -> tuple[str | None, str]:
    """(the host whose log printed the line, from the reader's `[algo-<n>]` prefix -- or, without
    one, NCCL's own `algo-<n>:<pid>:<tid>` prefix, or an EC2 host name `ip-a-b-c-d` whose address
    is known; its text)."""
    text = _POINTER.sub("", line)
    m = _PREFIX.match(text)
    if m is not None:
        return m.group(1), text[m.end() :]
    nccl = _NCCL_PRINTER.match(text)
    if nccl is not None:
        return nccl.group(1), text
    ec2 = _EC2_PRINTER.match(text)
    if ec2 is not None and addresses:
        return addresses.get(".".join(ec2.groups())), text
    return None, text


def address_book(lines: Iterable[str]) -> dict[str, str]:
    """IP address -> the host (`algo-<n>`) whose stream declared it (the first host wins; a line
    without its host's prefix says nothing)."""
    book: dict[str, str] = {}
    for line in lines:
        printer, text = _split(line)
        at = _DECLARED_AT.search(text)
        if printer is None or at is None:
            continue
        for m in _DECLARED_IP.finditer(text, at.end()):
            book.setdefault(m.group(1), printer)
    return book


def peer_addresses(lines: Iterable[str]) -> tuple[str, ...]:
    """The peer addresses the tail's collective and network error lines name, in order; () when
    they name more than MAX_ADDRESSES (a fabric-wide fault singles out no host)."""
    found: list[str] = []
    for line in lines:
        _, text = _split(line)
        norm = _norm(text)
        if _DECLARED_AT.search(text) or not any(p.search(norm) for p in _COLLECTIVE):
            continue
        for m in _PEER_IP.finditer(text):
            ip = m.group(1)
            if ip not in found and not ip.startswith("127."):
                found.append(ip)
    return tuple(found) if len(found) <= MAX_ADDRESSES else ()


def address_pattern(ip: str) -> str:
    """The FilterLogEvents pattern of the lines declaring `ip` ("eth0:10.0.1.23<0>"): the quoted
    phrase `":10.0.1.23<"`, which no error line naming the peer contains (they write a space before
    the address)."""
    return f'":{ip}<"'


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def hosts_in_tail(
    lines: Iterable[str], instance_count: int, addresses: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Hosts the log tail singles out: the printing host of a GPU hardware line (ECC, Xid, lost,
    off the bus) and any host named inside one; a host named inside an NCCL/collective error line
    other than its printer -- as `algo-<n>`, or by its IP address when `addresses` (address_book)
    maps it. Hosts outside 1..instance_count are ignored; more than MAX_SINGLED_OUT hosts single
    out none (a fabric-wide fault)."""
    found: list[str] = []
    book = addresses or {}

    def add(host: str) -> None:
        n = int(host.split("-")[1])
        if 1 <= n <= instance_count and host not in found:
            found.append(host)

    for line in lines:
        printer, text = _split(line, book)
        norm = _norm(text)
        if any(p.search(norm) for p in _HARDWARE):
            if printer is not None:
                add(printer)
            for m in _NAMED.finditer(text):
                add(f"algo-{int(m.group(1))}")
        elif any(p.search(norm) for p in _COLLECTIVE):
            named = [f"algo-{int(m.group(1))}" for m in _NAMED.finditer(text)]
            named += [book[m.group(1)] for m in _PEER_IP.finditer(text) if m.group(1) in book]
            for host in named:
                if host != printer:
                    add(host)
    return tuple(found) if len(found) <= MAX_SINGLED_OUT else ()


def fingerprint_keep(instance_count: int) -> int:
    """How many fingerprint lines a read keeps: one per host at least (the contract prints one per
    host at start), so a job of more hosts than the reader's default loses none of them."""
    return max(FINGERPRINT_MIN_LINES, instance_count)


def fingerprints(lines: Iterable[str]) -> dict[str, str]:
    """host (`algo-<n>`) -> its serials (comma separated, at most MAX_SERIALS, sorted) from the
    contract's `[sagewarden] host=<n> fingerprint=<serials>` lines; the first line of a host wins."""
    out: dict[str, str] = {}
    for line in lines:
        m = _FINGERPRINT.search(line)
        if m is None:
            continue
        host = f"algo-{int(m.group(1))}"
        serials = sorted({s for s in m.group(2).split(",") if s})[:MAX_SERIALS]
        if serials and host not in out:
            out[host] = ",".join(serials)
    return out


def known_bad(run: Run, serials: str) -> tuple[str, str, int] | None:
    """The remembered bad fingerprint sharing a GPU serial with `serials` (None: none)."""
    mine = set(serials.split(","))
    return next((b for b in run.bad_fingerprints if mine & set(b[1].split(","))), None)


# --------------------------------------------------------------------------------------------
# endings and hangs that single out a host


@dataclass(frozen=True)
class SingledOut:
    hosts: tuple[str, ...]  # may be empty: a hardware FailureReason need not name its host
    why: str


def singled_out(
    att: Attempt, cls: Classification, tail: Sequence[str], addresses: Mapping[str, str] | None = None
) -> SingledOut | None:
    """Whether (and which host) the attempt's ending singles out (see the module doc); `addresses`
    maps the peers NCCL names by IP to their hosts (address_book)."""
    named = (
        hosts_in_tail(tail, att.instance_count, addresses)
        if cls.kind in (EndingClass.INFRASTRUCTURE, EndingClass.SUPERVISOR_STOP, EndingClass.UNKNOWN)
        else ()
    )
    # a hardware FailureReason may name the instance ("Instance algo-2 failed its health checks")
    in_reason = (
        tuple(
            f"algo-{int(m.group(1))}"
            for m in _NAMED.finditer(att.failure_reason or "")
            if 1 <= int(m.group(1)) <= att.instance_count
        )
        if cls.hardware
        else ()
    )
    hosts = tuple(dict.fromkeys((*att.suspect_hosts, *in_reason, *named)))
    if att.stop_intent == StopIntent.BAD_HOST:
        return SingledOut(hosts, "it ran on a host with a known-bad fingerprint")
    if att.stop_intent == StopIntent.STRAGGLER:
        return SingledOut(hosts, "a straggler (a host alive but slow, domain/hosts/stragglers.py)")
    if cls.hardware:
        return SingledOut(hosts, "a hardware fault")
    if SIGNAL_GPU_LONE_IDLE in att.hang_signals or att.suspect_hosts:
        return SingledOut(hosts, "a hang with one host idle or without metrics")
    if named:
        return SingledOut(hosts, "an error in the log naming the host")
    return None


def repeated_on_pool(att: Attempt, cls: Classification) -> str | None:
    """Why the attempt's instances are suspect when no host was named: it ran on the warm pool of
    an earlier attempt and ended with the same fault. A bad GPU behind a NaN loss, a NIC behind a
    spinning collective: nothing names the host, but the same instances failing the same way twice
    says enough to try others (with the infra check). None: not such a repeat."""
    key = fault_key(cls.kind, att.stop_intent)
    if att.pool_of is None or key is None or key != att.pool_fault:
        return None
    return f"the same ending as attempt {att.pool_of}, on its warm pool: its instances are suspect"


def note_ending(
    d: PendingDecision, att: Attempt, ended: Attempt, cls: Classification
) -> tuple[Attempt, Attempt]:
    """At an attempt's end: when it singled out a host, record the host(s) on the attempt (so its
    warm pool is never reused), remember their fingerprints, and ask for the infra check on the
    next attempts. Returns (att, ended) with the hosts recorded."""
    bad = singled_out(att, cls, d.obs.log_tail, address_book(d.obs.address_lines))
    again = repeated_on_pool(att, cls) if bad is None else None
    if bad is None and again is None:
        return att, ended
    if bad is None:
        assert again is not None
        bad = SingledOut((), again)
    att = dataclasses.replace(att, suspect_hosts=bad.hosts, pool_suspect=again is not None)
    ended = dataclasses.replace(ended, suspect_hosts=bad.hosts, pool_suspect=again is not None)
    d.put_attempt(ended)
    shown = ", ".join(bad.hosts) or "a host"
    d.note(f"{att.job_name} singled out {shown} ({bad.why})")
    remember(d, att, bad.hosts)
    _ask_check(d, att, bad.hosts, shown)
    return att, ended


def _ask_check(d: PendingDecision, att: Attempt, hosts: Sequence[str], shown: str) -> None:
    """After a host was singled out: the next attempts ask for SageMaker's infra check, unless
    every host printed a fingerprint now remembered (policy infra_check_unless_fingerprinted)."""
    if not d.policy.infra_check_after_bad_host or d.run.infra_check_pending:
        return
    if d.policy.infra_check_unless_fingerprinted and fingerprinted(d.run, att, hosts):
        d.note(
            f"no infra check for the next attempt: {shown} printed a fingerprint, now remembered, so "
            "it is stopped at its fingerprint line if it comes back (the check follows if it does)"
        )
    else:
        d.set(infra_check_pending=True)
        d.note("the next attempts ask SageMaker to check their instances first (InfraCheckConfig)")


def late_hardware_line(d: PendingDecision, e: JobObserved) -> None:
    """The run waits to resume on the warm pool of an ending that named no host, and the pool is
    now Available: before a job runs on those instances, the hosts that printed a GPU hardware line
    are looked up once more (the service reads them for this observation). Log lines reach
    CloudWatch Logs late (AWS publishes no bound), and the minutes spent waiting for the pool are
    time for them to land: a host named now is recorded as at the ending, and the pool's watch
    marks it as holding a bad host, so the replacement never runs on it (domain/capacity/warm_pools.py).
    A failed look-up leaves the decision taken at the ending as it was (noted)."""
    watch = watch_of(d.run, e.job_name)
    cur = d.run.current
    if e.warm_pool_status != "Available" or watch is None or watch.bad_host or cur is None:
        return
    if cur.job_name != e.job_name or not waits_for(d.run, watch):
        return
    if d.obs.hardware_printers_error is not None:
        d.note(f"which host printed a GPU hardware line is still unknown ({d.obs.hardware_printers_error})")
        return
    hosts = tuple(h for h in d.obs.suspect_hosts if h not in cur.suspect_hosts)
    if not hosts:
        return
    ended = dataclasses.replace(cur, suspect_hosts=(*cur.suspect_hosts, *hosts))
    d.put_attempt(ended)
    shown = ", ".join(hosts)
    d.note(
        f"{ended.job_name} singled out {shown} (a GPU hardware line that landed after its ending was "
        "decided): its warm pool is not reused"
    )
    remember(d, ended, hosts)
    _ask_check(d, ended, hosts, shown)
    mark_bad_host(d, watch)


def fingerprinted(run: Run, att: Attempt, hosts: Sequence[str]) -> bool:
    """Whether every host the attempt singled out has its fingerprint remembered from this very
    attempt, so that it is known at its fingerprint line should it come back on new instances. Not
    for an attempt stopped at a known fingerprint (the host came back once: the check is surer) nor
    for a fault that names no host."""
    if not hosts or att.stop_intent == StopIntent.BAD_HOST:
        return False
    known = {host for host, _, number in run.bad_fingerprints if number == att.number}
    return all(h in known for h in hosts)


def remember(d: PendingDecision, att: Attempt, hosts: Sequence[str]) -> None:
    """Remember the fingerprints of `hosts` (from the fingerprint lines the service read)."""
    if not hosts or att.stop_intent == StopIntent.BAD_HOST:
        return  # (stopped for a fingerprint already remembered)
    if d.obs.fingerprint_error is not None:
        d.note(
            f"fingerprint of {', '.join(hosts)} unknown: the log could not be read ({d.obs.fingerprint_error})"
        )
        return
    seen = fingerprints((*d.obs.fingerprint_lines, *d.obs.log_tail))
    bad = list(d.run.bad_fingerprints)
    for host in hosts:
        serials = seen.get(host)
        if serials is None:
            d.note(f"{host} printed no fingerprint line ([sagewarden] host=<n> fingerprint=...)")
            continue
        if any(b[1] == serials for b in bad):
            continue
        bad.append((host, serials, att.number))
        d.note(f"remembered the fingerprint of {host} ({serials}) as bad")
    while len(bad) > MAX_BAD_FINGERPRINTS:
        old = bad.pop(0)
        d.note(f"forgot the bad fingerprint {old[1]} (at most {MAX_BAD_FINGERPRINTS} per run)")
    d.set(bad_fingerprints=tuple(bad))


def on_training(d: PendingDecision, att: Attempt) -> None:
    """An attempt that reached Training after an infra check ends the infra-check spell."""
    if att.infra_check and d.run.infra_check_pending:
        d.set(infra_check_pending=False)
        d.note(f"attempt {att.number} passed SageMaker's infra check and trains: later attempts ask for none")


# --------------------------------------------------------------------------------------------
# a live attempt printing a known-bad fingerprint


def check_fingerprints(d: PendingDecision, cur: Attempt, lines: Sequence[str]) -> bool:
    """Stop the attempt when one of its hosts printed a known-bad fingerprint; True if it did."""
    if not d.run.bad_fingerprints or cur.stop_intent is not None:
        return False
    for host, serials in sorted(fingerprints(lines).items(), key=lambda hs: int(hs[0].split("-")[1])):
        hit = known_bad(d.run, serials)
        if hit is None:
            continue
        bad_host, bad_serials, where = hit
        shared = sorted(set(serials.split(",")) & set(bad_serials.split(",")))
        why = (
            f"{host} of {cur.job_name} has GPU serials {serials}, {len(shared)} of them also on "
            f"{bad_host} of attempt {where}, which failed"
        )
        d.put_attempt(dataclasses.replace(cur, suspect_hosts=(host,)))
        request_stop(d, d.run.current or cur, StopIntent.BAD_HOST, f"known-bad host: {why}")
        d.act(
            notify(
                d,
                "warning",
                "attempt.bad_host",
                f"{d.run.name}: attempt {cur.number} runs on a known-bad host ({host}); stopping it",
                [
                    f"Host: {host} of {cur.job_name}",
                    f"GPU serials: {serials}",
                    f"Known bad since attempt {where} ({bad_host}: {bad_serials})",
                    "The attempt is stopped now and resumed on new instances (no warm pool) with "
                    "SageMaker's infra check (InfraCheckConfig) when the policy allows it.",
                ],
            )
        )
        return True
    return False
