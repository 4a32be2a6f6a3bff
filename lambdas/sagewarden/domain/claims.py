"""What a live run holds so that no other live run can take it: its name and its checkpoint prefix.

Two live runs with one name make every `get`/`cancel` by name ambiguous; two live runs writing
one checkpoint prefix overwrite each other's checkpoints (SageMaker syncs the job's LocalPath to
`CheckpointConfig.S3Uri` and, when a job starts, downloads *everything* under it). Prefixes
collide when one contains the other, too: a run at `s3://b/ckpt/` downloads the checkpoints of
a run at `s3://b/ckpt/sub/`.

A run's claims are a tuple of keys, computed once at submit and stored with the run:

* ``name#<name>`` and ``ckpt#<prefix>``: held by this run alone (exclusive);
* ``under#<ancestor>`` for every proper ancestor of its prefix: a set this run joins, saying
  "a live run writes somewhere below <ancestor>" (shared).

Taking them is a set of conditions the store checks in the same transaction that writes the run
(`plan`): the exclusive keys must be free, no live run may sit at one of the ancestors
(``ckpt#<ancestor>`` free) and no live run may sit below the prefix (``under#<prefix>`` empty).
The store releases them in the transaction that makes the run terminal, and takes them again on
a resume. Pure; the store owns the item shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

NAME = "name#"
CHECKPOINT = "ckpt#"
UNDER = "under#"
# the deepest checkpoint prefix whose ancestors are all claimed: each ancestor is two items of
# the run's DynamoDB transaction (at most 100), and a prefix this deep is not a plan
MAX_PREFIX_DEPTH = 20


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


def claim_keys(name: str, s3_uri: str) -> tuple[str, ...]:
    prefix = checkpoint_prefix(s3_uri)
    return (NAME + name, CHECKPOINT + prefix, *(UNDER + a for a in ancestors(prefix)))


@dataclass(frozen=True)
class Plan:
    exclusive: tuple[str, ...]  # held by this run alone
    shared: tuple[str, ...]  # sets this run joins
    vacant: tuple[str, ...]  # must be held by nobody (exclusive) or empty (shared) for the claim


def plan(claims: tuple[str, ...]) -> Plan:
    exclusive = tuple(c for c in claims if not c.startswith(UNDER))
    shared = tuple(c for c in claims if c.startswith(UNDER))
    vacant = tuple(CHECKPOINT + c.removeprefix(UNDER) for c in shared) + tuple(
        UNDER + c.removeprefix(CHECKPOINT) for c in exclusive if c.startswith(CHECKPOINT)
    )
    return Plan(exclusive, shared, vacant)


def describe(claim: str) -> str:
    """What a conflicting claim means, for the 409's message."""
    if claim.startswith(NAME):
        return f"the name {claim.removeprefix(NAME)!r}"
    if claim.startswith(CHECKPOINT):
        return f"the checkpoint prefix {claim.removeprefix(CHECKPOINT)}"
    return f"a checkpoint prefix under {claim.removeprefix(UNDER)}"


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
