"""The synthesized CloudFormation template of the stack, cached on disk.

The local drill and the scenario tests route events through the template's own EventBridge
rules and API routes, so they need the real template, not a hand-written copy. Synthesis goes
through jsii/Node and takes seconds, so it runs once per source state: in a subprocess
(``python app.py``, offline, no AWS credentials passed), into
``<repo>/.cache/synth/<hash>/``, where ``<hash>`` covers ``infra/**/*.py``, ``app.py``,
``cdk.json``, ``lambdas/sagewarden/keys.py``, any context overrides and the alarm-shape check's
fingerprint (which follows the Lambda code that builds the hang alarms). Later calls, from any
process, read the cached file; concurrent callers wait on a file lock instead of synthesizing
twice.

Usage::

    from .template import synthesized_template

    template = synthesized_template()                                    # cdk.json defaults
    template = synthesized_template(context={"logSubscription": False})  # overrides
    rules = {k: r for k, r in template["Resources"].items() if r["Type"] == "AWS::Events::Rule"}
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from . import REPO_ROOT, constants

CACHE_DIR = REPO_ROOT / ".cache" / "synth"
TEMPLATE_FILE = f"{constants.STACK_ID}.template.json"  # with the default stack name
SYNTH_TIMEOUT_SECONDS = 300
STALE_AFTER_SECONDS = 7 * 24 * 3600  # cached assemblies of older source states are pruned

# Environment variables the synth subprocess may see. Everything else (AWS credentials,
# profiles, CDK_DEFAULT_ACCOUNT/REGION, proxies) stays out, so the result cannot depend on them.
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT", "NODE_PATH")


class SynthError(RuntimeError):
    """``python app.py`` failed (bad context, cdk-nag findings, a CDK error)."""


def source_files() -> list[Path]:
    """The files whose content decides the template (hashed into the cache key)."""
    files = sorted(p for p in (REPO_ROOT / "infra").rglob("*.py") if "__pycache__" not in p.parts)
    files += [REPO_ROOT / "app.py", REPO_ROOT / "cdk.json", REPO_ROOT / "lambdas" / "sagewarden" / "keys.py"]
    return [p for p in files if p.exists()]


def cache_key(context: Mapping[str, Any] | None = None) -> str:
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(json.dumps(dict(context or {}), sort_keys=True).encode())
    digest.update(_shape_fingerprint(context).encode())
    return digest.hexdigest()[:20]


def _shape_fingerprint(context: Mapping[str, Any] | None) -> str:
    """The alarm-shape check's fingerprint (a property of the template) for ``context``: it follows
    the Lambda code that builds the alarms (sagewarden.adapters.alarm_shapes), which the files above omit."""
    from sagewarden import keys
    from sagewarden.adapters import alarm_shapes

    from .config import SupervisorConfig

    path = REPO_ROOT / "cdk.json"
    defaults = json.loads(path.read_text(encoding="utf-8")).get("context", {}) if path.exists() else {}
    try:
        config = SupervisorConfig.from_mapping({**defaults, **dict(context or {})})
    except ValueError:  # a bad context: the synthesis says what is wrong
        return ""
    props = alarm_shapes.resource_properties(
        keys.alarm_prefix(config.job_prefix), config.policy_defaults_json
    )
    return props[keys.SHAPE_CHECK_PROP_FINGERPRINT]


def cache_path(context: Mapping[str, Any] | None = None) -> Path:
    """Directory of the cloud assembly for the current sources (it may not exist yet)."""
    return CACHE_DIR / cache_key(context)


def synthesized_template(
    refresh: bool = False, *, context: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The parsed ``Sagewarden.template.json`` for the current sources.

    Args:
        refresh: synthesize again even if a cached template exists.
        context: CDK context overriding the ``cdk.json`` defaults (e.g. ``{"jobPrefix": "ml"}``).

    Raises:
        SynthError: synthesis failed; the message carries the app's output.
    """
    outdir = cache_path(context)
    template_path = outdir / template_file(context)
    if not refresh and template_path.exists():
        return _load(template_path)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with _lock(CACHE_DIR / f"{outdir.name}.lock"):
        if refresh or not template_path.exists():  # another process may have finished meanwhile
            _synthesize_into(outdir, context)
            _prune_stale(keep=outdir)
    return _load(template_path)


def template_file(context: Mapping[str, Any] | None = None) -> str:
    """The template's file name in the cloud assembly: ``<stack name>.template.json``."""
    name = (context or {}).get("stackName") or constants.STACK_ID
    return f"{name}.template.json"


def _load(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return result


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prune_stale(keep: Path) -> None:
    """Remove assemblies of source states nobody has synthesized for a week."""
    cutoff = time.time() - STALE_AFTER_SECONDS
    for entry in CACHE_DIR.iterdir():
        if (
            entry != keep
            and entry.is_dir()
            and not entry.name.startswith(".")
            and entry.stat().st_mtime < cutoff
        ):
            shutil.rmtree(entry, ignore_errors=True)
            entry.with_suffix(".lock").unlink(missing_ok=True)


def _synthesize_into(outdir: Path, context: Mapping[str, Any] | None) -> None:
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}-", dir=CACHE_DIR))
    try:
        run_app(staging, context=context)
        if outdir.exists():
            shutil.rmtree(outdir)
        staging.rename(outdir)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def run_app(outdir: Path, *, context: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python app.py`` into ``outdir`` with a minimal environment (no AWS credentials)."""
    env = {name: os.environ[name] for name in _PASSED_ENV if name in os.environ}
    env["CDK_OUTDIR"] = str(outdir)
    env["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if context:
        env["CDK_CONTEXT_JSON"] = json.dumps(dict(context))
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "app.py")],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=SYNTH_TIMEOUT_SECONDS,
        check=False,
    )
    if proc.returncode != 0 or not (outdir / template_file(context)).exists():
        raise SynthError(
            f"`python app.py` failed (exit {proc.returncode}):\n{proc.stderr.strip()}\n{proc.stdout.strip()}"
        )
    return proc
