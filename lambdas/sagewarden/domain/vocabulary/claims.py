"""What a live run holds so that no other run can take it (its name, checkpoint prefix and archive
prefix), and what a resumable run still holds (its prefix): the claim keys and the plans to take,
release and check them. Pure. Why: docs/reliability.md (*Claims as keys*)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

NAME = "name#"
CHECKPOINT = "ckpt#"
UNDER = "under#"
ARCHIVE = "arch#"
ARCHIVE_UNDER = "archunder#"
HOLD = "hold#"  # a conflict with a resumable run's hold (reported, never stored in a run's claims)
# the deepest checkpoint or archive prefix whose ancestors are all claimed: each ancestor is two
# items of the run's DynamoDB transaction (at most 100), and a prefix this deep is not a plan
MAX_PREFIX_DEPTH = 20

# item attributes (both stores spell them so)
HOLDER = "run_id"  # the one live run holding a name, or synced at a prefix
BELOW = "holders"  # live runs synced strictly below a prefix
ARCHIVERS = "archivers"  # live runs whose archive is a prefix
ARCHIVES_BELOW = "archives_below"  # live runs whose archive is strictly below a prefix
HOLD_RUN, HOLD_OWNER, HOLD_UNTIL = "hold_run", "hold_owner", "hold_until"
SETS = (BELOW, ARCHIVERS, ARCHIVES_BELOW)


def checkpoint_prefix(s3_uri: str) -> str:
    """The prefix SageMaker syncs, as one spelling: ``s3://bucket/a/b/`` (a trailing slash added,
    the bucket root as ``s3://bucket/``). ``s3://b/ckpt`` and ``s3://b/ckpt/`` name one prefix."""
    bucket, _, key = s3_uri.removeprefix("s3://").partition("/")
    key = key.rstrip("/")
    return f"s3://{bucket}/" + (f"{key}/" if key else "")


def ancestors(prefix: str) -> tuple[str, ...]:
    """The proper ancestors of a normalized prefix, shallowest first: ``s3://b/x/y/`` ->
    (``s3://b/``, ``s3://b/x/``)."""
    bucket_root, _, key = prefix.removeprefix("s3://").partition("/")
    parts = [p for p in key.split("/")[:-1]]
    out = [f"s3://{bucket_root}/"]
    for i in range(1, len(parts)):
        out.append(f"s3://{bucket_root}/" + "/".join(parts[:i]) + "/")
    return tuple(out) if parts else ()


def depth(s3_uri: str) -> int:
    return len(ancestors(checkpoint_prefix(s3_uri)))


def claim_keys(name: str, s3_uri: str, archive_uri: str | None = None) -> tuple[str, ...]:
    prefix = checkpoint_prefix(s3_uri)
    keys = [NAME + name, CHECKPOINT + prefix, *(UNDER + a for a in ancestors(prefix))]
    if archive_uri:
        archive = checkpoint_prefix(archive_uri)
        keys += [ARCHIVE + archive, *(ARCHIVE_UNDER + a for a in ancestors(archive))]
    return tuple(keys)


def prefix_of(claim: str) -> str:
    return claim.partition("#")[2]


@dataclass(frozen=True)
class ItemTake:
    """What taking a run's claims needs of one item: ``holder`` -- it becomes the item's one
    holder (free, or already this run's); ``joins`` -- set attributes it is added to; ``free`` --
    attributes that must be absent; ``held`` -- a hold by another principal's resumable run that
    has not expired refuses it; ``clears_hold`` -- taking it ends a hold there (the run writes at
    the held prefix itself, which the hold allowed)."""

    item: str
    holder: bool = False
    joins: frozenset[str] = field(default_factory=frozenset)
    free: frozenset[str] = field(default_factory=frozenset)
    held: bool = False
    clears_hold: bool = False


@dataclass(frozen=True)
class ItemRelease:
    """What a run gives back at one item when it ends: ``holder`` (it was the item's holder),
    ``leaves`` (set attributes it leaves) and ``hold`` ((owner identity, until ms): the run may be
    resumed, so its synced prefix stays held)."""

    item: str
    holder: bool = False
    leaves: frozenset[str] = field(default_factory=frozenset)
    hold: tuple[str, int] | None = None


def _merge_takes(parts: Iterable[ItemTake]) -> tuple[ItemTake, ...]:
    merged: dict[str, ItemTake] = {}
    for p in parts:
        old = merged.get(p.item)
        if old is not None:
            p = ItemTake(
                p.item,
                old.holder or p.holder,
                old.joins | p.joins,
                old.free | p.free,
                old.held or p.held,
                old.clears_hold or p.clears_hold,
            )
        if (p.holder and HOLDER in p.free) or p.joins & p.free:
            raise ValueError(f"claims overlap themselves at {p.item}: a prefix both taken and required free")
        merged[p.item] = p
    return tuple(merged.values())


def take_plan(claims: Sequence[str]) -> tuple[ItemTake, ...]:
    """Per item, what taking ``claims`` writes and requires (one action per item)."""
    parts: list[ItemTake] = []
    for c in claims:
        p = prefix_of(c)
        if c.startswith(NAME):
            parts.append(ItemTake(c, holder=True))
        elif c.startswith(CHECKPOINT):  # synced at p: nobody else synced or archiving at p, none below
            parts.append(ItemTake(c, holder=True, free=frozenset({ARCHIVERS}), held=True, clears_hold=True))
            parts.append(ItemTake(UNDER + p, free=frozenset({BELOW, ARCHIVES_BELOW})))
        elif c.startswith(UNDER):  # synced below p: nobody synced or archiving at p, p not held
            parts.append(ItemTake(c, joins=frozenset({BELOW})))
            parts.append(ItemTake(CHECKPOINT + p, free=frozenset({HOLDER, ARCHIVERS}), held=True))
        elif c.startswith(ARCHIVE_UNDER):  # archiving below p: nobody synced at p, p not held
            parts.append(ItemTake(UNDER + p, joins=frozenset({ARCHIVES_BELOW})))
            parts.append(ItemTake(CHECKPOINT + p, free=frozenset({HOLDER}), held=True))
        elif c.startswith(ARCHIVE):  # archiving at p (shared): nobody synced at or below p
            parts.append(
                ItemTake(CHECKPOINT + p, joins=frozenset({ARCHIVERS}), free=frozenset({HOLDER}), held=True)
            )
            parts.append(ItemTake(UNDER + p, free=frozenset({BELOW})))
        else:
            raise ValueError(f"unknown claim {c!r}")
    return _merge_takes(parts)


def release_plan(claims: Sequence[str], hold: tuple[str, int] | None = None) -> tuple[ItemRelease, ...]:
    """Per item, what ending gives back; ``hold`` (owner identity, until ms) keeps the synced
    prefix held for a resume."""
    merged: dict[str, ItemRelease] = {}
    for c in claims:
        p = prefix_of(c)
        if c.startswith(NAME):
            part = ItemRelease(c, holder=True)
        elif c.startswith(CHECKPOINT):
            part = ItemRelease(c, holder=True, hold=hold)
        elif c.startswith(UNDER):
            part = ItemRelease(c, leaves=frozenset({BELOW}))
        elif c.startswith(ARCHIVE_UNDER):
            part = ItemRelease(UNDER + p, leaves=frozenset({ARCHIVES_BELOW}))
        elif c.startswith(ARCHIVE):
            part = ItemRelease(CHECKPOINT + p, leaves=frozenset({ARCHIVERS}))
        else:
            raise ValueError(f"unknown claim {c!r}")
        old = merged.get(part.item)
        if old is not None:
            part = ItemRelease(
                part.item, old.holder or part.holder, old.leaves | part.leaves, old.hold or part.hold
            )
        merged[part.item] = part
    return tuple(merged.values())


def _conflict_claim(item: str, attribute: str) -> str:
    """The claim of the *other* run that an attribute of ``item`` stands for."""
    p = prefix_of(item)
    if attribute == ARCHIVERS:
        return ARCHIVE + p
    if attribute == ARCHIVES_BELOW:
        return ARCHIVE_UNDER + p
    return item  # name#, ckpt# (HOLDER) and under# (BELOW)


def blocking(
    plan: Sequence[ItemTake],
    items: Mapping[str, Mapping[str, Any]],
    run_id: str,
    owner: str,
    now_ms: int,
    *,
    take_held: bool = False,
) -> tuple[str, str] | None:
    """(the other run's id, its claim) that keeps ``run_id`` from taking ``plan`` given the items
    as they are (attribute -> value; sets as Python sets, numbers as ints), or None. ``owner`` is
    the run's owner identity (domain.ownership.principal); ``take_held``: the run may take a
    prefix another principal's resumable run holds (an admin's run)."""
    for t in plan:
        item = items.get(t.item) or {}
        checks = ({HOLDER} if t.holder else set()) | set(t.free)
        for attribute in sorted(checks):
            value = item.get(attribute)
            if attribute == HOLDER:
                if value and value != run_id:
                    return str(value), _conflict_claim(t.item, attribute)
                continue
            others = sorted(str(v) for v in (value or ()) if v != run_id)
            if others:
                return others[0], _conflict_claim(t.item, attribute)
        hold_run = item.get(HOLD_RUN)
        if (
            t.held
            and not take_held
            and hold_run
            and hold_run != run_id
            and item.get(HOLD_OWNER) != owner
            and int(item.get(HOLD_UNTIL) or 0) >= now_ms
        ):
            return str(hold_run), HOLD + prefix_of(t.item)
    return None


def apply_take(items: dict[str, dict[str, Any]], plan: Sequence[ItemTake], run_id: str) -> None:
    """Write ``plan`` into ``items`` (the in-memory store; check `blocking` first)."""
    for t in plan:
        item = items.setdefault(t.item, {})
        if t.holder:
            item[HOLDER] = run_id
        for attribute in t.joins:
            item.setdefault(attribute, set()).add(run_id)
        if t.clears_hold:
            for attribute in (HOLD_RUN, HOLD_OWNER, HOLD_UNTIL):
                item.pop(attribute, None)


def apply_release(items: dict[str, dict[str, Any]], plan: Sequence[ItemRelease], run_id: str) -> None:
    """Give ``plan`` back in ``items`` (the in-memory store)."""
    for r in plan:
        item = items.setdefault(r.item, {})
        if r.holder:
            item.pop(HOLDER, None)
        for attribute in r.leaves:
            members = item.get(attribute)
            if members is not None:
                members.discard(run_id)
                if not members:
                    del item[attribute]
        if r.hold is not None:
            item.update({HOLD_RUN: run_id, HOLD_OWNER: r.hold[0], HOLD_UNTIL: r.hold[1]})
        if not item:
            del items[r.item]


def describe(claim: str) -> str:
    """What a conflicting claim means, for the 409's message."""
    p = prefix_of(claim)
    if claim.startswith(NAME):
        return f"the name {p!r}"
    if claim.startswith(CHECKPOINT):
        return f"the checkpoint prefix {p}"
    if claim.startswith(UNDER):
        return f"a checkpoint prefix under {p}"
    if claim.startswith(ARCHIVE_UNDER):
        return f"an archive prefix under {p}"
    if claim.startswith(ARCHIVE):
        return f"the archive prefix {p}"
    return f"the checkpoint prefix {p}, held for a resume"


def overlaps(name: str, s3_uri: str, other_name: str, other_uri: str) -> tuple[str, ...]:
    """What two runs could not both hold while live: "name", "checkpoint_prefix" (the same prefix,
    or one inside the other), both or neither. The store's claims decide; this is the same rule
    for a look at listed runs (`submit --dry-run`)."""
    out: list[str] = []
    if name == other_name:
        out.append("name")
    if s3_uri and other_uri:
        mine, theirs = checkpoint_prefix(s3_uri), checkpoint_prefix(other_uri)
        if mine.startswith(theirs) or theirs.startswith(mine):
            out.append("checkpoint_prefix")
    return tuple(out)
