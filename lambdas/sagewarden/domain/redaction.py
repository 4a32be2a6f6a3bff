"""Secret redaction: what the API, the audit trail and the alerts show of a run's secrets.

The rule (README, "Who may do what"):

* a key *looks secret* when its name contains TOKEN, SECRET, PASSWORD, KEY or CREDENTIAL, in
  any case, anywhere in the name (HF_TOKEN, WANDB_API_KEY, AWS_SECRET_ACCESS_KEY, db_password);
* in the maps a run's secrets live in -- the training job's ``Environment`` and
  ``HyperParameters`` and the policy's ``environment_defaults`` -- the value of such a key is
  replaced by ``REDACTED`` (the key stays, so a reader still sees that it is set);
* a secret value of at least ``MIN_SCRUB_CHARS`` characters is also replaced wherever it shows
  up in free text (a SageMaker validation message that echoes a value, a failure reason, a
  training log tail that printed the environment, an alert's body). Shorter values are only
  redacted by key: scrubbing "1" or "false" out of every text would garble it, and a real
  token is far longer.

HyperParameters get the same rule as Environment: SageMaker hands both to the training
container and both end up in people's run files; a name such as ``max_tokens`` is redacted
too (a substring match, over-redaction is the safe side; the launched job keeps every value).

Only what is *shown* is redacted: the stored run keeps the real values, because every attempt
is launched from it. Pure and deterministic (no I/O).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_KEY_RE = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)
REDACTED = "<redacted>"
MIN_SCRUB_CHARS = 8
# the maps whose keys name secrets: the request's own, the policy's defaults, and the
# `environment` an audited launch lists
SECRET_MAPS = frozenset({"Environment", "HyperParameters", "environment_defaults", "environment"})
_MAX_DEPTH = 64


def secret_key(name: object) -> bool:
    """True when a variable or hyperparameter named `name` looks like it holds a secret."""
    return isinstance(name, str) and SECRET_KEY_RE.search(name) is not None


def redact_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an Environment-like map with the values of secret-looking keys replaced."""
    return {k: REDACTED if secret_key(k) else v for k, v in values.items()}


def secret_values(
    request: Mapping[str, Any], environment_defaults: Iterable[tuple[str, str]] = ()
) -> tuple[str, ...]:
    """The values of the secret-looking keys of a run (its request's Environment and
    HyperParameters, its policy's environment_defaults) long enough to scrub from free text,
    longest first (a secret that contains another is replaced whole)."""
    found: set[str] = set()
    pairs: list[tuple[Any, Any]] = list(environment_defaults)
    for section in ("Environment", "HyperParameters"):
        values = request.get(section)
        if isinstance(values, Mapping):
            pairs += list(values.items())
    for k, v in pairs:
        if secret_key(k) and isinstance(v, str) and len(v) >= MIN_SCRUB_CHARS:
            found.add(v)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of each secret value replaced."""
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with secrets redacted: the
    secret-looking keys of every SECRET_MAPS map, and every secret value in every string
    (keys included). Other values are returned as they are; containers are copied."""
    return _redact(value, secrets, 0)


def _redact(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    if isinstance(value, str):
        return scrub_text(value, secrets) if secrets else value
    if depth > _MAX_DEPTH:  # deeper than anything sagewarden writes: shown as nothing, not raw
        return REDACTED
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = scrub_text(k, secrets) if isinstance(k, str) and secrets else k
            if k in SECRET_MAPS and isinstance(v, Mapping):
                v = redact_map(v)
            out[key] = _redact(v, secrets, depth + 1)
        return out
    if isinstance(value, list | tuple):
        items = [_redact(v, secrets, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
