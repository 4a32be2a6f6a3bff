"""Use cases triggered by API requests: submit, cancel, resume, and the reads (get, list, events).

Reached as `Supervisor.requests`; the Supervisor supplies the ports and the shared loop
(``handle``: decide, save, carry out); the refusals are the exceptions below, which the API handler
maps to status codes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sagewarden.domain.checkpoints.retention import archive_of
from sagewarden.domain.lookups import RESUMABLE
from sagewarden.domain.vocabulary.claims import claim_keys
from sagewarden.domain.vocabulary.events import CancelRequested, ResumeRequested, Submitted
from sagewarden.domain.vocabulary.launch import warm_pool_request
from sagewarden.domain.vocabulary.models import Run, RunStatus
from sagewarden.domain.vocabulary.ownership import is_admin, may_change
from sagewarden.domain.vocabulary.policy import RunPolicy
from sagewarden.ports.aws import (
    AuditEntry,
    ClaimConflict,
    IdempotentReplay,
    Page,
)
from sagewarden.usecases import admission
from sagewarden.usecases.audit_text import redacted_entry, run_secrets
from sagewarden.usecases.errors import InvalidRequest

if TYPE_CHECKING:
    pass

# a listing under readScope=owner reads at most this many pages of the store per request: a page
# may then hold fewer runs than asked for (even none) with a next cursor to follow
LIST_SCAN_PAGES = 10


if TYPE_CHECKING:
    from sagewarden.usecases.supervisor import Supervisor


class RunNotFound(Exception):
    """No such run -- or, under readScope=owner, none the caller may see (the same answer: a run
    of someone else's is not told to exist)."""


class RunFinished(Exception):
    def __init__(self, run: Run) -> None:
        super().__init__(run.run_id)
        self.run = run


class NotRunOwner(Exception):
    """Only the run's owner or an admin may cancel or resume it (`domain.ownership`)."""

    def __init__(self, run: Run, caller: str, action: str) -> None:
        super().__init__(run.run_id)
        self.run = run
        self.caller = caller
        self.action = action


class RunNotResumable(Exception):
    """Only a FAILED or CANCELLED run can be resumed (or its checkpoints cannot be read now)."""

    def __init__(self, run: Run, reason: str) -> None:
        super().__init__(reason)
        self.run = run
        self.reason = reason


class RunRequests:
    """What an API request asks of the supervisor (`Supervisor.requests`)."""

    def __init__(self, sup: Supervisor) -> None:
        self._sup = sup

    def submit(
        self,
        *,
        name: str,
        owner: str,
        training_job: Mapping[str, Any],
        policy: RunPolicy,
        idempotency_key: str | None = None,
        admins: Sequence[str] | None = None,
    ) -> tuple[Run, bool]:
        """Store a new run and launch its first attempt. Returns (run, created).

        Raises InvalidRequest when the account says the run can never work (its checkpoint
        bucket cannot be listed, its instance count is above a known quota) and RunConflict when
        another live run holds its name, or a prefix that overlaps its checkpoint or archive
        prefix, or a resumable run of another principal holds its checkpoint prefix (domain.claims;
        an admin, one of `admins`, may take that); nothing is stored then."""
        now = self._sup.clock()
        body_hash = hashlib.sha256(
            json.dumps(
                {"name": name, "training_job": training_job, "policy": policy.to_dict()}, sort_keys=True
            ).encode()
        ).hexdigest()
        run = Run(
            run_id=self._sup.new_id(),
            name=name,
            owner=owner,
            request=dict(training_job),
            policy=policy,
            status=RunStatus.SUBMITTED,
            created_ms=now,
            updated_ms=now,
            job_prefix=self._sup.settings.job_prefix,
            idempotency_key=idempotency_key,
        )
        run = dataclasses.replace(run, claims=claim_keys(name, run.checkpoint_uri, archive_of(run)))
        problems = admission.checkpoint_problems(self._sup.checkpoints, run.checkpoint_uri)
        archive = archive_of(run)
        if archive is not None:
            problems += admission.checkpoint_problems(
                self._sup.checkpoints, archive, "policy.checkpoint_archive_uri"
            )
        problems += admission.quota_problems(self._sup.quotas, training_job, policy)
        problems += admission.plan_problems(self._sup.plans, training_job, policy)
        if problems:
            raise InvalidRequest(problems)
        warning = admission.storage_warning(self._sup.versioning, run.checkpoint_uri, policy)
        if warning is not None:
            run = dataclasses.replace(run, storage_warning=warning)
        if warm_pool_request(training_job, policy)[0] > 0:
            # a warm-pool quota known to be 0: no attempt asks for a pool (the first restart
            # would wait for one that never comes); the submitted alert says why restarts are cold
            no_pool = admission.no_warm_pool_quota(self._sup.quotas, training_job)
            if no_pool is not None:
                run = dataclasses.replace(run, warm_pool_off=True)
        try:
            self._sup.store.create(
                run,
                [AuditEntry(now, "event", f"run submitted by {owner}", {"name": name})],
                body_hash,
                take_held=admins is not None and is_admin(owner, admins),
            )
        except IdempotentReplay as replay:
            if not replay.same_body:
                raise
            existing = self._sup.store.get(replay.run_id, all_attempts=True)
            if existing is None:  # pragma: no cover - the idempotency item points at a stored run
                raise RunNotFound(replay.run_id) from replay
            return existing, False
        except ClaimConflict as taken:
            raise admission.conflict(self._sup.store, taken, run) from taken
        self._sup.handle(run.run_id, Submitted())
        return self._sup.store.get(run.run_id, all_attempts=True) or run, True

    def cancel(self, run_id: str, by: str, *, admins: Sequence[str] | None = None) -> Run:
        """Cancel a run. `admins`: the deployment's admin principals; given (the API always
        gives them), only the run's owner or an admin may cancel (NotRunOwner otherwise); None
        is for callers inside the deployment, which are trusted."""
        run = self._visible(self._sup.store.get(run_id), run_id, by, admins)
        if admins is not None and not may_change(run.owner, by, admins):
            raise NotRunOwner(run, by, "cancel")
        if run.status.terminal:
            raise RunFinished(run)
        self._sup.handle(run_id, CancelRequested(by))
        return self._sup.store.get(run_id, all_attempts=True) or run

    def resume(self, run_id: str, by: str, *, admins: Sequence[str] | None = None) -> Run:
        """Reopen a FAILED or CANCELLED run: a new attempt from its newest verified checkpoint,
        with fresh restart and wall-clock budgets. Audited like every decision. `admins`: as
        for `cancel`."""
        run = self._visible(self._sup.store.get(run_id), run_id, by, admins)
        if admins is not None and not may_change(run.owner, by, admins):
            raise NotRunOwner(run, by, "resume")
        if run.status not in RESUMABLE:
            raise RunNotResumable(
                run, f"run is {run.status.value}: only a FAILED or CANCELLED run can be resumed"
            )
        try:
            outcome = self._sup._decide_and_save(run_id, ResumeRequested(by))
        except ClaimConflict as taken:  # another live run took the name or prefix meanwhile
            raise admission.conflict(self._sup.store, taken, run, resuming=True) from taken
        if outcome is None:
            raise RunNotFound(run_id)
        after, decision, outbox = outcome
        if decision.ignored is not None:
            # refused, nothing stored: the checkpoints cannot be read right now, or another
            # request reopened the run first (its status is no longer FAILED or CANCELLED)
            raise RunNotResumable(after, decision.ignored)
        self._sup._follow_up(after, decision, outbox)
        # carried out and audited; a run that failed again at once (e.g. a quota that can never
        # fit) says why in its outcome: the resume itself happened, so it is not refused
        return self._sup.store.get(run_id, all_attempts=True) or after

    # -- reads: `reader` and `admins` as the API gives them (None: a caller inside the deployment)
    def _scoped(self, reader: str | None, admins: Sequence[str] | None) -> bool:
        """True when `reader` sees only the runs it owns (readScope=owner, not an admin)."""
        if reader is None or admins is None or self._sup.settings.read_scope != "owner":
            return False
        return not is_admin(reader, admins)

    def _visible(self, run: Run | None, run_id: str, reader: str | None, admins: Sequence[str] | None) -> Run:
        """The run, if it exists and `reader` may see it; RunNotFound otherwise (the same answer)."""
        if run is None or (self._scoped(reader, admins) and not may_change(run.owner, reader or "", ())):
            raise RunNotFound(run_id)
        return run

    def get(self, run_id: str, *, reader: str | None = None, admins: Sequence[str] | None = None) -> Run:
        return self._visible(self._sup.store.get(run_id, all_attempts=True), run_id, reader, admins)

    def list_runs(
        self,
        status: str | None,
        limit: int,
        cursor: str | None,
        *,
        reader: str | None = None,
        admins: Sequence[str] | None = None,
    ) -> Page:
        """A page of runs, newest first. Under readScope=owner only the reader's own (an admin's:
        all): store pages are read until `limit` own runs are found, the listing ends, or
        LIST_SCAN_PAGES pages were read; each store page asks for no more runs than are still
        wanted, so the cursor returned resumes exactly after the last run read."""
        if not self._scoped(reader, admins):
            return self._sup.store.list_runs(status, limit, cursor)
        found: list[Run] = []
        for _ in range(LIST_SCAN_PAGES):
            page = self._sup.store.list_runs(status, limit - len(found), cursor)
            found += [r for r in page.items if may_change(r.owner, reader or "", ())]
            cursor = page.cursor
            if cursor is None or len(found) >= limit:
                break
        return Page(found, cursor)

    def events(
        self,
        run_id: str,
        limit: int,
        cursor: str | None,
        *,
        reader: str | None = None,
        admins: Sequence[str] | None = None,
    ) -> Page:
        """A page of the run's audit trail, redacted (entries written before redaction existed
        included): the values of the run's secret-looking keys never leave the table."""
        run = self._visible(self._sup.store.get(run_id), run_id, reader, admins)
        page = self._sup.store.list_audit(run_id, limit, cursor)
        secrets = run_secrets(run)
        return Page([redacted_entry(e, secrets) for e in page.items], page.cursor)
