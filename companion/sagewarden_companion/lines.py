"""Every line the companion prints, in one place (the formats are documented in docs/companion.md).

Three kinds of line:

- the training-script contract's lines, which the supervisor parses today (docs/recovery.md,
  *Training-script contract*; docs/hang-detection.md, *Declared long phases*): the fingerprint,
  the step line and the phase marker. They are printed exactly as the supervisor's parsers read
  them (`sagewarden.domain.hosts.bad_hosts`, `sagewarden.domain.hosts.stragglers`, `sagewarden.domain.hangs.cadence`).
- the companion's own lines, each starting `[sagewarden] <kind> ` where kind is one word
  (`companion`, `heartbeat`, `phase_end`, `sigterm`, `evidence`, `launcher`): none of them
  matches a contract parser or one of the supervisor's CloudWatch Logs filter phrases
  (`"[sagewarden] host="`, `"[sagewarden] phase="`, `"step_ms="`).
- inside an evidence block, every line (stack frames, nvidia-smi, py-spy) carries the prefix
  `[sagewarden] evidence host=<n> rank=<r> stall=<k> | `, so blocks of several ranks sharing a
  host's log stay apart and a reader can leave them out of anything it classifies.

Values are single tokens (no spaces): names are reduced to `[A-Za-z0-9_.-]`, numbers printed
plainly, an unknown value as `none`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MARK = "[sagewarden]"
NONE = "none"
MAX_LINE_CHARS = 512  # one evidence line; a stack frame or an nvidia-smi row is far shorter
MAX_PHASE_MINUTES = 120  # the supervisor caps a declared phase at 120 minutes (EMF's 2 h ahead)
MAX_SERIALS = 16  # the supervisor keeps at most 16 serials a host
_TOKEN = re.compile(r"[^A-Za-z0-9_.-]+")
_SERIAL = re.compile(r"^[A-Za-z0-9_.:/-]{1,64}$")  # what the supervisor's fingerprint parser reads


def token(value: object, limit: int = 64) -> str:
    """A value as one token: runs of other characters become `-`, at most `limit` characters."""
    text = _TOKEN.sub("-", str(value)).strip("-")[:limit]
    return text or NONE


def token_list(values: Sequence[object]) -> str:
    """Several values as one token, comma separated (`none` when there are none)."""
    return ",".join(token(v) for v in values) or NONE


def number(value: float | None, decimals: int = 1) -> str:
    """Seconds with one decimal (milliseconds with three), `none` when unknown."""
    if value is None or value != value or value < 0:  # NaN or negative: unknown
        return NONE
    return f"{value:.{decimals}f}"


def _opt(value: int | None) -> str:
    return NONE if value is None else str(int(value))


# -- the contract's lines (parsed by the supervisor today) -----------------------------------------


def fingerprint(host: int, serials: Sequence[str]) -> str:
    """`[sagewarden] host=<n> fingerprint=<serial>,<serial>,...`: docs/recovery.md, item 5."""
    return f"{MARK} host={host} fingerprint={','.join(serials)}"


def step(
    host: int,
    step_number: int,
    step_ms: float,
    compute_ms: float,
    total: int | None,
    timer: str,
    scope: str,
) -> str:
    """`[sagewarden] host=<n> step=<s> step_ms=<ms> compute_ms=<ms> total=<steps> timer=<t>
    compute=<scope>`: docs/recovery.md, item 6. `total=` is left out when the run's length is
    not known; the two fields the supervisor does not read come last, after the ones it does."""
    total_part = f" total={int(total)}" if total is not None else ""
    return (
        f"{MARK} host={host} step={int(step_number)} step_ms={number(step_ms, 3)} "
        f"compute_ms={number(compute_ms, 3)}{total_part} timer={timer} compute={scope}"
    )


def phase(name: str, max_minutes: int) -> str:
    """`[sagewarden] phase=<name> max_minutes=<n>`: docs/hang-detection.md, *Declared long phases*."""
    return f"{MARK} phase={token(name)} max_minutes={clamp_minutes(max_minutes)}"


def clamp_minutes(minutes: float) -> int:
    return max(1, min(MAX_PHASE_MINUTES, int(-(-minutes // 1))))


# -- the companion's own lines ----------------------------------------------------------------------


def fingerprint_unavailable(host: int, reason: str) -> str:
    """Said instead of a fingerprint when no GPU serial could be read (the supervisor's parser
    reads no fingerprint from it: an unknown host is never given a made-up identity)."""
    return f"{MARK} host={host} fingerprint_unavailable={token(reason)}"


def companion_start(
    host: int | None,
    rank: int | None,
    local_rank: int | None,
    version: str,
    attempt: int | None,
    resume_step: int | None,
    resume_dir_found: bool | None,
    total: int | None,
) -> str:
    found = NONE if resume_dir_found is None else ("yes" if resume_dir_found else "no")
    return (
        f"{MARK} companion start host={_opt(host)} rank={_opt(rank)} local_rank={_opt(local_rank)} "
        f"version={token(version)} attempt={_opt(attempt)} resume_step={_opt(resume_step)} "
        f"resume_dir_found={found} total={_opt(total)}"
    )


def companion_note(what: str, detail: str) -> str:
    return f"{MARK} companion note={token(what)} detail={token(detail, 200)}"


def heartbeat(host: int, last_step: int | None, in_phase: str | None, step_age_s: float | None) -> str:
    return (
        f"{MARK} heartbeat host={host} last_step={_opt(last_step)} "
        f"in_phase={token(in_phase) if in_phase else NONE} step_age_s={number(step_age_s)}"
    )


def phase_end(name: str, elapsed_s: float, result: str) -> str:
    return f"{MARK} phase_end={token(name)} elapsed_s={number(elapsed_s)} result={token(result)}"


def sigterm(event: str, host: int | None, rank: int | None, **fields: object) -> str:
    """`[sagewarden] sigterm <event> host=<n> rank=<r> key=value...`; events: received,
    save_start, save_done, save_failed, save_skipped, exit."""
    extra = "".join(f" {key}={token(value)}" for key, value in fields.items())
    return f"{MARK} sigterm {token(event)} host={_opt(host)} rank={_opt(rank)}{extra}"


def evidence_prefix(host: int | None, rank: int | None, stall: int) -> str:
    return f"{MARK} evidence host={_opt(host)} rank={_opt(rank)} stall={stall} | "


def evidence_begin(
    host: int | None,
    rank: int | None,
    stall: int,
    pid: int,
    last_step: int | None,
    in_phase: str | None,
    quiet_s: float,
    window_s: float,
    reason: str,
) -> str:
    return (
        f"{MARK} evidence begin host={_opt(host)} rank={_opt(rank)} stall={stall} pid={pid} "
        f"last_step={_opt(last_step)} in_phase={token(in_phase) if in_phase else NONE} "
        f"quiet_s={number(quiet_s)} window_s={number(window_s)} reason={token(reason)}"
    )


def evidence_section(prefix: str, name: str, status: str) -> str:
    """A section header inside a block: `... | section=<python-stacks|nvidia-smi|py-spy> status=<s>`."""
    return f"{prefix}section={token(name)} status={token(status, 120)}"


def evidence_end(
    host: int | None, rank: int | None, stall: int, lines: int, truncated: bool, took_ms: float
) -> str:
    return (
        f"{MARK} evidence end host={_opt(host)} rank={_opt(rank)} stall={stall} lines={lines} "
        f"truncated={'yes' if truncated else 'no'} took_ms={number(took_ms)}"
    )


def launcher(event: str, **fields: object) -> str:
    """`[sagewarden] launcher <event> key=value...`; events: start, signal, overdue, exit. A list
    value is printed comma separated."""
    extra = "".join(
        f" {key}={token_list(value) if isinstance(value, (list, tuple)) else token(value, 200)}"
        for key, value in fields.items()
    )
    return f"{MARK} launcher {token(event)}{extra}"


def clip(text: str, limit: int = MAX_LINE_CHARS) -> str:
    text = text.rstrip("\r\n").replace("\r", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def usable_serials(raw: Sequence[str]) -> list[str]:
    """GPU serials as the supervisor reads them: each a token of `[A-Za-z0-9_.:/-]`, with a digit
    (nvidia-smi prints `[N/A]` or `N/A` where a GPU has none), sorted, unique, at most 16."""
    found = {s.strip() for s in raw}
    good = sorted(s for s in found if _SERIAL.match(s) and any(c.isdigit() for c in s))
    return good[:MAX_SERIALS]
