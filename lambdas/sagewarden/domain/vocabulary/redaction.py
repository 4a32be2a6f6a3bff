"""Secret redaction: what the API, the audit trail and the alerts show of a run's secrets
(`secret_key`, `scrub_text`). Pure. Why: docs/api.md (*Secrets are redacted*)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

REDACTED = "<redacted>"
MIN_SCRUB_CHARS = 8
# key names containing one of these, anywhere, look secret
SECRET_SUBSTRINGS = ("TOKEN", "SECRET", "PASSW", "PASSPHRASE", "CREDENTIAL", "KEY", "PRIVATE", "SIGNATURE")
# ... and so do key names with one of these as a whole word (too short, or too common inside
# other words, to match anywhere: "pat" in "path", "auth" in "author", "pass" in "bypass")
SECRET_WORDS = frozenset(
    {
        "PASS", "PWD", "PW", "PAT", "AUTH", "AUTHN", "AUTHZ", "OAUTH", "AUTHORIZATION",
        "BEARER", "CRED", "CREDS", "COOKIE", "SIG", "DSN",
    }
)  # fmt: skip
# the maps whose keys name secrets: the request's own, the policy's defaults, the `environment`
# an audited launch lists, and the request's Tags in the map form events carry
SECRET_MAPS = frozenset({"Environment", "HyperParameters", "environment_defaults", "environment", "Tags"})
# the argument lists of AlgorithmSpecification
ARGUMENT_LISTS = frozenset({"ContainerArguments", "ContainerEntrypoint"})
_MAX_DEPTH = 64

_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
# a key as text writes it: an identifier that may hold - and . (never starting with either)
_KEY = r"[A-Za-z_][A-Za-z0-9_.-]*"
# exception names are keys only in appearance ("KeyError: 'x'")
_NOT_A_KEY = re.compile(r"(?:Error|Exception|Warning|Interrupt|Exit)$")

_PREFIXED_TOKENS = (
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"api_org_[A-Za-z0-9]{30,}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"glpat-[A-Za-z0-9_-]{20,}",  # GitLab
    r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",  # AWS access key ids
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
    r"sk-(?:proj|ant|svcacct|admin)-[A-Za-z0-9_-]{20,}",  # OpenAI, Anthropic
    r"sk-[A-Za-z0-9]{32,}",
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"npm_[A-Za-z0-9]{30,}",
    r"pypi-[A-Za-z0-9_-]{50,}",
    r"AIza[0-9A-Za-z_-]{35}",  # Google API keys
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # JWTs
)
_TOKENS = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(_PREFIXED_TOKENS) + ")")
# a token's head left by a cut: a prefix and at least 4 more characters, one of them a digit or a
# capital (a token's random part; not a word such as "hf_token"), ending where a cut would
_TOKEN_HEAD = re.compile(
    r"(?<![A-Za-z0-9_-])(?:hf_|api_org_|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox[abposr]-|sk-|"
    r"[sr]k_live_|npm_|pypi-|AIza|eyJ)(?=[A-Za-z0-9_.-]*[0-9A-Z])[A-Za-z0-9_.-]{4,}$"
)
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.S)
# an HTTP Authorization value: a bearer token, or Basic credentials (base64: a digit, + / or =)
_BEARER = re.compile(
    r"(\b(?i:bearer)\s+)(?!<redacted>)[A-Za-z0-9._~+/-]{8,}=*"
    r"|(\bBasic\s+)(?=[A-Za-z]*[0-9+/=])[A-Za-z0-9+/]{8,}={0,2}"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]*:)(?!<redacted>@)[^\s/@]+@")
# --key value, --key=value, -key value (a command line: what SageMaker's training toolkit makes
# of hyperparameters, quoted whole in an ExecuteUserScriptError's FailureReason)
_FLAG = re.compile(
    r"(?<![\w-])(?P<dash>--?)(?P<key>" + _KEY + r")(?P<sep>=|[ \t]+)"
    r"(?:(?P<q>[\"'])(?P<qv>[^\"'\n]*)(?P=q)|(?P<v>(?!-)[^\s\"']+))"
)
# '--key', 'value' (a command line printed as a Python or JSON list)
_LISTED_FLAG = re.compile(
    r"(?P<q>[\"'])--?(?P<key>" + _KEY + r")(?P=q)(?P<sep>\s*,\s*)(?P<q2>[\"'])(?P<v>[^\"'\n]*)(?P=q2)"
)
# key=value, key: value, "key": "value", 'key'='value' (environment dumps, JSON, YAML, dicts)
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<q>[\"']?)(?P<key>" + _KEY + r")(?P=q)(?P<sep>\s*=\s*|\s*:(?=\s|[\"'])\s*)"
    r"(?:(?P<q2>[\"'])(?P<qv>[^\"'\n]*)(?P=q2)|(?P<v>[^\s\"',;&)\]}]+))"
)
# where a cut may have left a secret's head (before) or its tail (after): the markers of
# domain/vocabulary/bounded.py ("… [cut 12 bytes]", "[cut 12 bytes] …"), an ellipsis, a line's end
_CUT_BEFORE = re.compile(r"…|\.\.\.|\[cut |\n|[\"']")
_CUT_AFTER = re.compile(r"\[cut [0-9,]+ bytes\] …|…|\.\.\.|\n")
_TOKEN_START = re.compile(
    r"hf_|api_org_|gh[pousr]_|github_pat_|glpat-|AKIA|ASIA|xox[abposr]-|sk-|[sr]k_|npm_|pypi-|AIza|eyJ"
)
# a text without one of these cannot hold a secret-looking key (SECRET_SUBSTRINGS, SECRET_WORDS)
_KEY_HINTS = ("token", "secret", "pass", "credential", "key", "private", "signature", "pwd", "pw",
              "pat", "auth", "bearer", "cred", "cookie", "sig", "dsn", "basic")  # fmt: skip
_SCHEMES = frozenset({"Bearer", "bearer", "Basic"})  # the token after one is _BEARER's
_MARKER = re.compile(r"…|\.\.\.|\[cut ")


@lru_cache(maxsize=4096)
def _looks_secret(name: str) -> bool:
    upper = name.upper()
    if any(word in upper for word in SECRET_SUBSTRINGS):
        return True
    return any(w.upper() in SECRET_WORDS for w in _WORDS.findall(name))


def secret_key(name: object) -> bool:
    """True when a variable, hyperparameter, tag or argument named `name` looks like it holds a
    secret (leading dashes of an argument are ignored)."""
    return isinstance(name, str) and _looks_secret(name.lstrip("-"))


def secret_text(value: str) -> bool:
    """True when a value looks like a secret by itself, whatever its key: a well-known token
    prefix, a URL with a password, a private-key block or a bearer token."""
    return scrub_patterns(value) != value


def redact_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an Environment-like map with the values of secret-looking keys replaced."""
    return {k: REDACTED if secret_key(k) else v for k, v in values.items()}


def redact_tags(tags: Sequence[Any]) -> list[Any]:
    """A copy of a CreateTrainingJob ``Tags`` list with the Value of each secret-looking Key
    replaced."""
    out: list[Any] = []
    for tag in tags:
        if isinstance(tag, Mapping) and secret_key(tag.get("Key")):
            tag = {**tag, "Value": REDACTED}
        out.append(tag)
    return out


def redact_arguments(args: Sequence[Any]) -> list[Any]:
    """A copy of an argument list (``ContainerArguments``, ``ContainerEntrypoint``) with the value
    of each secret-looking flag replaced: ``--hf-token x`` (the next item), ``--hf-token=x`` and
    ``HF_TOKEN=x`` (after the ``=``)."""
    out: list[Any] = list(args)
    for i, arg in enumerate(out):
        if not isinstance(arg, str):
            continue
        name, eq, _ = arg.partition("=")
        if eq and secret_key(name):
            out[i] = f"{name}={REDACTED}"
        elif arg.startswith("-") and secret_key(arg) and i + 1 < len(out):
            nxt = out[i + 1]
            if isinstance(nxt, str) and not nxt.startswith("-"):
                out[i + 1] = REDACTED
    return out


def _argument_values(args: Sequence[Any]) -> list[str]:
    values: list[str] = []
    for i, arg in enumerate(args):
        if not isinstance(arg, str):
            continue
        name, eq, value = arg.partition("=")
        if eq and secret_key(name):
            values.append(value)
        elif arg.startswith("-") and secret_key(arg) and i + 1 < len(args):
            nxt = args[i + 1]
            if isinstance(nxt, str) and not nxt.startswith("-"):
                values.append(nxt)
    return values


def _tag_pairs(tags: Any) -> list[tuple[Any, Any]]:
    if isinstance(tags, Mapping):
        return list(tags.items())
    if isinstance(tags, list | tuple):
        return [(t.get("Key"), t.get("Value")) for t in tags if isinstance(t, Mapping)]
    return []


def secret_values(
    request: Mapping[str, Any], environment_defaults: Iterable[tuple[str, str]] = ()
) -> tuple[str, ...]:
    """The secret values of a run long enough to scrub from free text, longest first (a secret
    that contains another is replaced whole): the values of secret-looking keys of its request's
    Environment, HyperParameters and Tags and of its policy's environment_defaults, the values of
    secret-looking flags of its container arguments and entrypoint, and, in any of their values,
    a URL's password and every token the patterns find."""
    found: set[str] = set()
    pairs: list[tuple[Any, Any]] = list(environment_defaults)
    for section in ("Environment", "HyperParameters"):
        values = request.get(section)
        if isinstance(values, Mapping):
            pairs += list(values.items())
    pairs += _tag_pairs(request.get("Tags"))
    plain: list[str] = [v for _, v in pairs if isinstance(v, str)]
    spec = request.get("AlgorithmSpecification")
    if isinstance(spec, Mapping):
        for name in ARGUMENT_LISTS:
            args = spec.get(name)
            if isinstance(args, list | tuple):
                found.update(v for v in _argument_values(args) if len(v) >= MIN_SCRUB_CHARS)
                plain += [a for a in args if isinstance(a, str)]
    for k, v in pairs:
        if secret_key(k) and isinstance(v, str) and len(v) >= MIN_SCRUB_CHARS:
            found.add(v)
    for text in plain:
        found.update(s for s in _embedded_secrets(text) if len(s) >= MIN_SCRUB_CHARS)
    return tuple(sorted(found, key=lambda s: (-len(s), s)))


def _embedded_secrets(text: str) -> list[str]:
    """The parts of a value that the patterns call secret: a URL's password, a token."""
    out = [m.group(0)[len(m.group(1)) : -1] for m in _URL_PASSWORD.finditer(text)]
    out += [m.group(0) for m in _TOKENS.finditer(text)]
    return out


def scrub_patterns(text: str) -> str:
    """`text` with what the patterns call secret replaced (no run's values needed: what the log
    reader applies before it clips a line)."""
    if not text:
        return text
    if "-----BEGIN" in text:
        text = _PEM.sub(REDACTED, text)
    if _TOKEN_START.search(text):  # most lines hold no token prefix: one search instead of two
        text = _TOKENS.sub(REDACTED, text)
        text = _scrub_token_heads(text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    lower = text.lower()
    if any(hint in lower for hint in _KEY_HINTS):  # no key word, no secret-looking key
        if "earer" in text or "EARER" in text or "Basic" in text:
            text = _BEARER.sub(lambda m: f"{m.group(1) or m.group(2)}{REDACTED}", text)
        if "-" in text:
            text = _LISTED_FLAG.sub(_keyed, text)
            text = _FLAG.sub(_keyed, text)
        if "=" in text or ":" in text:
            text = _ASSIGNMENT.sub(_assigned, text)
    return text


def _scrub_token_heads(text: str) -> str:
    """`text` without a token's head left directly before a cut marker or at its end."""
    ends = [len(text)] + [m.start() for m in _MARKER.finditer(text)]
    for end in sorted(set(ends), reverse=True):  # from the end: earlier positions stay valid
        head = _TOKEN_HEAD.search(text, 0, end)
        if head is not None:
            text = text[: head.start()] + REDACTED + text[end:]
    return text


def _keyed(m: re.Match[str]) -> str:
    if not secret_key(m.group("key")):
        return m.group(0)
    return _with_value_redacted(m)


def _assigned(m: re.Match[str]) -> str:
    key = m.group("key")
    if not secret_key(key) or (":" in m.group("sep") and _NOT_A_KEY.search(key)):
        return m.group(0)
    return _with_value_redacted(m)


def _with_value_redacted(m: re.Match[str]) -> str:
    group = "qv" if "qv" in m.re.groupindex and m.group("qv") is not None else "v"
    start, end = m.span(group)
    if m.group(group) == REDACTED or m.group(group) in _SCHEMES:  # `Authorization: Bearer <redacted>`
        return m.group(0)
    whole = m.group(0)
    offset = m.start()
    return whole[: start - offset] + REDACTED + whole[end - offset :]


def scrub_text(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every occurrence of each secret value replaced, the head of one left directly
    before a cut (or its tail directly after one) replaced, and then the patterns applied."""
    if not text:
        return text
    for secret in secrets:
        if not secret:
            continue
        if secret in text:
            text = text.replace(secret, REDACTED)
        # a head starts as the secret does, a tail ends as it does: else there is none to look for
        if len(secret) > MIN_SCRUB_CHARS and (
            secret[:MIN_SCRUB_CHARS] in text or secret[-MIN_SCRUB_CHARS:] in text
        ):
            text = _scrub_cut(text, secret)
    return scrub_patterns(text)


def _scrub_cut(text: str, secret: str) -> str:
    """`text` without a head of `secret` (>= MIN_SCRUB_CHARS) that ends where a cut would (the
    end, a line's end, a cut marker, a quote), nor a tail that starts where a kept end would (the
    start, a line's start, after a cut marker)."""
    spans: list[tuple[int, int]] = []
    for end in {len(text), *(m.start() for m in _CUT_BEFORE.finditer(text))}:
        k = _head_at(text, end, secret)
        if k:
            spans.append((end - k, end))
    for start in {0, *(m.end() for m in _CUT_AFTER.finditer(text))}:
        k = _tail_at(text, start, secret)
        if k:
            spans.append((start, start + k))
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    for a, b in reversed(merged):  # from the end: earlier spans keep their offsets
        text = text[:a] + REDACTED + text[b:]
    return text


def _head_at(text: str, end: int, secret: str) -> int:
    """The length of the longest head of `secret` (MIN_SCRUB_CHARS or more, not all of it) that
    ends at `end` in `text`, else 0."""
    if end < MIN_SCRUB_CHARS:
        return 0
    chunk = text[end - MIN_SCRUB_CHARS : end]
    best, j = 0, secret.find(chunk, 0, len(secret) - 1)
    while j != -1 and j + MIN_SCRUB_CHARS < len(secret):
        k = j + MIN_SCRUB_CHARS
        if k <= end and text[end - k : end] == secret[:k]:
            best = max(best, k)
        j = secret.find(chunk, j + 1, len(secret) - 1)
    return best


def _tail_at(text: str, start: int, secret: str) -> int:
    """The length of the longest tail of `secret` (MIN_SCRUB_CHARS or more, not all of it) that
    starts at `start` in `text`, else 0."""
    chunk = text[start : start + MIN_SCRUB_CHARS]
    if len(chunk) < MIN_SCRUB_CHARS:
        return 0
    best, j = 0, secret.find(chunk, 1)
    while j != -1:
        k = len(secret) - j
        if text.startswith(secret[j:], start):
            best = max(best, k)
        j = secret.find(chunk, j + 1)
    return best


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with secrets redacted: the
    secret-looking keys of every SECRET_MAPS map, Tags list and argument list, and every string
    (keys included) scrubbed (`scrub_text`). Other values are returned as they are; containers
    are copied."""
    return _redact(value, secrets, 0)


def _redact(value: Any, secrets: tuple[str, ...], depth: int) -> Any:
    if isinstance(value, str):
        return scrub_text(value, secrets)
    if depth > _MAX_DEPTH:  # deeper than anything sagewarden writes: shown as nothing, not raw
        return REDACTED
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = scrub_text(k, secrets) if isinstance(k, str) else k
            if k in SECRET_MAPS and isinstance(v, Mapping):
                v = redact_map(v)
            elif k == "Tags" and isinstance(v, list | tuple):
                v = redact_tags(v)
            elif k in ARGUMENT_LISTS and isinstance(v, list | tuple):
                v = redact_arguments(v)
            out[key] = _redact(v, secrets, depth + 1)
        return out
    if isinstance(value, list | tuple):
        items = [_redact(v, secrets, depth + 1) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
