"""domain/vocabulary/redaction.py: which keys look secret, what the patterns find in free text, and that a
secret cut in two by a bound leaves no head behind (issue 32 items 7 and 8)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.bounded import clip_lines, clip_text
from sagewarden.domain.vocabulary.redaction import (
    MIN_SCRUB_CHARS,
    REDACTED,
    redact,
    scrub_patterns,
    scrub_text,
    secret_key,
    secret_text,
    secret_values,
)

HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
GHP = "ghp_0123456789abcdefghijABCDEFGHIJ012345"
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP"


@pytest.mark.claim("`DB_PASS`, `GITHUB_PAT`, `HF_AUTH`, `passwd`, `hfAuthToken`, and also `max_tokens`")
@pytest.mark.parametrize(
    "name",
    [
        "DB_PASS",
        "GITHUB_PAT",
        "HF_AUTH",
        "passwd",
        "hfAuthToken",
        "dbPass",
        "SENTRY_DSN",
        "PWD",
        "client_secret",
        "--hf-token",
        "-password",
        "MY_PRIVATE_KEY",
        "x-amz-signature",
        "session_cookie",
        "OAUTH_CLIENT",
        "max_tokens",  # a substring match: over-redaction is the safe side
    ],
)
def test_secret_key_covers_the_scanners_key_words_and_abbreviations(name):
    assert secret_key(name)


@pytest.mark.claim("but not `PATH`, `patience` or `author`")
@pytest.mark.parametrize(
    "name",
    ["PATH", "output_path", "patience", "author", "bypass_cache", "num_passes", "EPOCHS", "learning_rate", 7],
    ids=[
        "PATH",
        "output_path",
        "patience",
        "author",
        "bypass_cache",
        "num_passes",
        "EPOCHS",
        "learning_rate",
        "a number",
    ],
)
def test_secret_key_leaves_words_that_only_contain_a_short_key_word(name):
    assert not secret_key(name)


@pytest.mark.claim("Text is also searched for what the run never declared")
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(
            "DATABASE_URL=postgres://user:pw0rd-42@db.internal:5432/app",
            f"DATABASE_URL=postgres://user:{REDACTED}@db.internal:5432/app",
            id="a URL's password",
        ),
        pytest.param("DB_PASS=hunter22 EPOCHS=3", f"DB_PASS={REDACTED} EPOCHS=3", id="key=value"),
        pytest.param('export HF_AUTH="a b c"', f'export HF_AUTH="{REDACTED}"', id="key=quoted value"),
        pytest.param("passwd: qwerty12", f"passwd: {REDACTED}", id="key: value"),
        pytest.param(
            '{"hf_token": "x1", "lr": "0.1"}',
            f'{{"hf_token": "{REDACTED}", "lr": "0.1"}}',
            id="a JSON member",
        ),
        pytest.param("{'GITHUB_PAT': 'x1'}", f"{{'GITHUB_PAT': '{REDACTED}'}}", id="a Python dict"),
        pytest.param(
            "train.py --epochs 3 --hf-token abc123 --lr 0.1",
            f"train.py --epochs 3 --hf-token {REDACTED} --lr 0.1",
            id="--key value",
        ),
        pytest.param("train.py --db_password=abc123", f"train.py --db_password={REDACTED}", id="--key=value"),
        pytest.param(
            "Command \"['python', 'train.py', '--hf_token', 'abc123']\"",
            f"Command \"['python', 'train.py', '--hf_token', '{REDACTED}']\"",
            id="a command line printed as a list",
        ),
        pytest.param(f"login with {HF}", f"login with {REDACTED}", id="hf_ token"),
        pytest.param(f"clone {GHP}", f"clone {REDACTED}", id="ghp_ token"),
        pytest.param(f"clone {PAT}", f"clone {REDACTED}", id="github_pat_ token"),
        pytest.param("id AKIAIOSFODNN7EXAMPLE used", f"id {REDACTED} used", id="AKIA key id"),
        pytest.param("id ASIAIOSFODNN7EXAMPLE used", f"id {REDACTED} used", id="ASIA key id"),
        pytest.param("post xoxb-1234567890-abcdefghij", f"post {REDACTED}", id="Slack xoxb- token"),
        pytest.param("sk-" + "a1B2" * 12, REDACTED, id="sk- key"),
        pytest.param("glpat-abcdefghij0123456789", REDACTED, id="GitLab token"),
        pytest.param(
            "Authorization: Bearer abcdefghijklmnop1234",
            f"Authorization: Bearer {REDACTED}",
            id="bearer token",
        ),
        pytest.param(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY----- ok",
            f"{REDACTED} ok",
            id="a private-key block",
        ),
        pytest.param(
            "hub 401 for hf_AbCdEfGh… [cut 9 bytes]",
            f"hub 401 for {REDACTED}… [cut 9 bytes]",
            id="a token's head at a cut",
        ),
    ],
)
def test_scrub_patterns_finds_secrets_in_free_text(text, shown):
    assert scrub_patterns(text) == shown
    assert scrub_patterns(shown) == shown  # idempotent: every layer may scrub again


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("run sk-learn-benchmark-run-2024-01 started", id="a run name after sk-"),
        pytest.param(
            "not authorized to perform: secretsmanager:GetSecretValue on arn:aws:secretsmanager:us-east-1:"
            "123456789012:secret:ml/hf-token-AbCdEf",
            id="an ARN that names a secret",
        ),
        pytest.param("KeyError: 'optimizer'", id="an exception name"),
        pytest.param("[sagewarden] host=3 step=100 step_ms=1234.5 compute_ms=1000 total=5", id="a step line"),
        pytest.param("[sagewarden] host=2 fingerprint=1654321098765,1654321098766", id="a fingerprint line"),
        pytest.param("[sagewarden] phase=checkpoint max_minutes=30", id="a phase marker"),
        pytest.param(
            'AlgorithmError: ExecuteUserScriptError:\nExitCode 1\nErrorMessage "OOM"', id="SageMaker's text"
        ),
        pytest.param("capacity in ASIA; pass hf_token", id="words that start like a token"),
        pytest.param("basic training works", id="the word basic"),
        pytest.param(
            "s3://bucket/llama/checkpoints/ and https://host:8443/path", id="URLs without a password"
        ),
    ],
)
def test_scrub_patterns_leaves_normal_text_alone(text):
    assert scrub_patterns(text) == text


def test_secret_values_come_from_every_place_a_run_keeps_secrets():
    request = {
        "Environment": {"DATABASE_URL": "postgres://app:dbpassword9@db:5432/x", "MODEL": HF, "EPOCHS": "3"},
        "HyperParameters": {"passwd": "hp-password-1", "lr": "0.1"},
        "Tags": [
            {"Key": "GITHUB_TOKEN", "Value": "tag-token-value-1"},
            {"Key": "team", "Value": "ml-research"},
        ],
        "AlgorithmSpecification": {
            "ContainerArguments": [
                "--hf-token",
                "arg-token-value",
                "--epochs",
                "3",
                "--db-pass=arg-pass-value",
            ],
            "ContainerEntrypoint": ["env", "WANDB_API_KEY=entry-key-value", "python", "train.py"],
        },
    }
    found = set(secret_values(request, (("HF_AUTH", "default-auth-value"),)))
    assert found == {
        "dbpassword9",
        HF,
        "hp-password-1",
        "tag-token-value-1",
        "arg-token-value",
        "arg-pass-value",
        "entry-key-value",
        "default-auth-value",
    }
    assert secret_values({"Tags": {"GITHUB_TOKEN": "event-tag-value"}}) == (
        "event-tag-value",
    )  # events' map form


def test_redact_hides_tags_container_arguments_and_embedded_secrets():
    request = {
        "Environment": {"DATABASE_URL": "postgres://app:dbpassword9@db:5432/x", "MODEL": HF},
        "Tags": [{"Key": "GITHUB_TOKEN", "Value": "tag-token-value-1"}, {"Key": "team", "Value": "ml"}],
        "AlgorithmSpecification": {
            "ContainerArguments": ["--hf-token", "arg-token-value", "--epochs", "3", "--db-pass=x"],
            "ContainerEntrypoint": ["env", "WANDB_API_KEY=entry-key-value", "python", "train.py"],
        },
    }
    shown = redact(request, secret_values(request))
    assert shown["Environment"] == {"DATABASE_URL": f"postgres://app:{REDACTED}@db:5432/x", "MODEL": REDACTED}
    assert shown["Tags"] == [{"Key": "GITHUB_TOKEN", "Value": REDACTED}, {"Key": "team", "Value": "ml"}]
    spec = shown["AlgorithmSpecification"]
    assert spec["ContainerArguments"] == ["--hf-token", REDACTED, "--epochs", "3", f"--db-pass={REDACTED}"]
    assert spec["ContainerEntrypoint"] == ["env", f"WANDB_API_KEY={REDACTED}", "python", "train.py"]
    assert redact({"Tags": {"GITHUB_TOKEN": "v", "team": "ml"}}) == {
        "Tags": {"GITHUB_TOKEN": REDACTED, "team": "ml"}
    }


@pytest.mark.parametrize(
    ("value", "secret"),
    [
        ("postgres://u:pw@h/db", True),
        (HF, True),
        ("--hf_token=x", True),
        ("WARN", False),
        ("s3://bucket/prefix/", False),
        ("0.0003", False),
    ],
    ids=[
        "a url with a password",
        "a hugging face token",
        "a token flag",
        "a log level",
        "an s3 uri",
        "a small number",
    ],
)
def test_secret_text_tells_a_value_that_looks_secret_by_itself(value, secret):
    assert secret_text(value) is secret


SECRET = "Zq8" + "x7Lm2Pw9Rt4Vb6Nc1Hj5" * 2  # 43 characters, no pattern: only its value finds it


def _leaks(text: str) -> list[str]:
    """Every run of MIN_SCRUB_CHARS or more characters of SECRET left in `text`."""
    return [
        SECRET[i : i + MIN_SCRUB_CHARS]
        for i in range(len(SECRET) - MIN_SCRUB_CHARS + 1)
        if SECRET[i : i + MIN_SCRUB_CHARS] in text
    ]


@pytest.mark.claim("a head of 8 characters or more of a secret left before the cut marker is replaced too")
@settings(max_examples=150, deadline=None)
@given(before=st.integers(0, 400), limit=st.integers(40, 500), keep=st.sampled_from(["head", "tail"]))
def test_a_known_secret_cut_by_a_bound_leaves_no_head_or_tail_of_8_characters(before, limit, keep):
    text = "x" * before + f" token {SECRET} " + "y" * 300
    for cut in (
        clip_text(text, limit, keep=keep),
        text[:limit] + "...",
        "\n".join(clip_lines(text.split(" "), limit, keep=keep, line_max_bytes=limit // 2)),
    ):
        shown = scrub_text(cut, (SECRET,))
        assert not _leaks(shown), (cut, shown)
        assert scrub_text(shown, (SECRET,)) == shown


_FRAGMENTS = st.sampled_from(
    [" ", "\n", "=", ": ", "--", "'", '"', ",", "…", "[cut 3 bytes]", "HF_TOKEN", "lr", "0.1", "hf_", HF,
     "postgres://u:p@h", "Bearer ", "abcdef123456", "sk-", "KeyError", "<redacted>", "max_tokens", "PASS"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_FRAGMENTS, max_size=12))
def test_scrub_text_is_idempotent(parts):
    text = "".join(parts)
    once = scrub_text(text, (HF, "abcdef123456"))
    assert scrub_text(once, (HF, "abcdef123456")) == once
    assert HF not in once
