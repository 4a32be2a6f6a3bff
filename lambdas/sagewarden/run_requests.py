"""Use cases triggered by API requests: submit, cancel, resume, and the reads (get, list, events).

A mixin of :class:`sagewarden.service.Supervisor`, which supplies the ports and the shared loop
(``handle``: decide, save, carry out); the refusals are the exceptions below, which the API handler
maps to status codes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sagewarden import admission
from sagewarden.api.errors import InvalidRequest
from sagewarden.audit_text import redacted_entry, run_secrets
from sagewarden.domain.claims import claim_keys
from sagewarden.domain.decide import Decision
from sagewarden.domain.events import CancelRequested, Event, ResumeRequested, Submitted
from sagewarden.domain.launch import warm_pool_request
from sagewarden.domain.models import Run, RunStatus
from sagewarden.domain.ownership import is_admin, may_change
from sagewarden.domain.policy import RunPolicy
from sagewarden.domain.retention import archive_of
from sagewarden.domain.wants import RESUMABLE
from sagewarden.ports import (
    AuditEntry,
    CheckpointFinder,
    ClaimConflict,
    IdempotentReplay,
    OutboxMessage,
    Page,
    QuotaReader,
    RunStore,
    TrainingPlanReader,
    VersioningReader,
)

if TYPE_CHECKING:
    from sagewarden.settings import SupervisorSettings


class RunNotFound(Exception):
    pass


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
    """What an API request asks of the supervisor."""

    store: RunStore
    checkpoints: CheckpointFinder
    quotas: QuotaReader | None
    plans: TrainingPlanReader | None
    versioning: VersioningReader | None
    clock: Callable[[], int]
    new_id: Callable[[], str]
    settings: SupervisorSettings

    if TYPE_CHECKING:  # the shared loop, in sagewarden.service

        def handle(self, run_id: str, event: Event, *, known: Run | None = None) -> Run | None: ...

        def _decide_and_save(
            self, run_id: str, event: Event, *, known: Run | None = None
        ) -> tuple[Run, Decision, list[OutboxMessage]] | None: ...

        def _follow_up(self, run: Run, decision: Decision, outbox: list[OutboxMessage]) -> Run | None: ...

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
        now = self.clock()
        body_hash = hashlib.sha256(
            json.dumps(
                {"name": name, "training_job": training_job, "policy": policy.to_dict()}, sort_keys=True
            ).encode()
        ).hexdigest()
        run = Run(
            run_id=self.new_id(),
            name=name,
            owner=owner,
            request=dict(training_job),
            policy=policy,
            status=RunStatus.SUBMITTED,
            created_ms=now,
            updated_ms=now,
            job_prefix=self.settings.job_prefix,
            idempotency_key=idempotency_key,
        )
        run = dataclasses.replace(run, claims=claim_keys(name, run.checkpoint_uri, archive_of(run)))
        problems = admission.checkpoint_problems(self.checkpoints, run.checkpoint_uri)
        archive = archive_of(run)
        if archive is not None:
            problems += admission.checkpoint_problems(
                self.checkpoints, archive, "policy.checkpoint_archive_uri"
            )
        problems += admission.quota_problems(self.quotas, training_job, policy)
        problems += admission.plan_problems(self.plans, training_job, policy)
        if problems:
            raise InvalidRequest(problems)
        warning = admission.storage_warning(self.versioning, run.checkpoint_uri, policy)
        if warning is not None:
            run = dataclasses.replace(run, storage_warning=warning)
        if warm_pool_request(training_job, policy)[0] > 0:
            # a warm-pool quota known to be 0: no attempt asks for a pool (the first restart
            # would wait for one that never comes); the submitted alert says why restarts are cold
            no_pool = admission.no_warm_pool_quota(self.quotas, training_job)
            if no_pool is not None:
                run = dataclasses.replace(run, warm_pool_off=True)
        try:
            self.store.create(
                run,
                [AuditEntry(now, "event", f"run submitted by {owner}", {"name": name})],
                body_hash,
                take_held=admins is not None and is_admin(owner, admins),
            )
        except IdempotentReplay as replay:
            if not replay.same_body:
                raise
            existing = self.store.get(replay.run_id, all_attempts=True)
            if existing is None:  # pragma: no cover - the idempotency item points at a stored run
                raise RunNotFound(replay.run_id) from replay
            return existing, False
        except ClaimConflict as taken:
            raise admission.conflict(self.store, taken, run) from taken
        self.handle(run.run_id, Submitted())
        return self.store.get(run.run_id, all_attempts=True) or run, True

    def cancel(self, run_id: str, by: str, *, admins: Sequence[str] | None = None) -> Run:
        """Cancel a run. `admins`: the deployment's admin principals; given (the API always
        gives them), only the run's owner or an admin may cancel (NotRunOwner otherwise); None
        is for callers inside the deployment, which are trusted."""
        run = self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if admins is not None and not may_change(run.owner, by, admins):
            raise NotRunOwner(run, by, "cancel")
        if run.status.terminal:
            raise RunFinished(run)
        self.handle(run_id, CancelRequested(by))
        return self.store.get(run_id, all_attempts=True) or run

    def resume(self, run_id: str, by: str, *, admins: Sequence[str] | None = None) -> Run:
        """Reopen a FAILED or CANCELLED run: a new attempt from its newest verified checkpoint,
        with fresh restart and wall-clock budgets. Audited like every decision. `admins`: as
        for `cancel`."""
        run = self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        if admins is not None and not may_change(run.owner, by, admins):
            raise NotRunOwner(run, by, "resume")
        if run.status not in RESUMABLE:
            raise RunNotResumable(
                run, f"run is {run.status.value}: only a FAILED or CANCELLED run can be resumed"
            )
        try:
            outcome = self._decide_and_save(run_id, ResumeRequested(by))
        except ClaimConflict as taken:  # another live run took the name or prefix meanwhile
            raise admission.conflict(self.store, taken, run, resuming=True) from taken
        if outcome is None:
            raise RunNotFound(run_id)
        after, decision, outbox = outcome
        if decision.ignored is not None:
            # refused, nothing stored: the checkpoints cannot be read right now, or another
            # request reopened the run first (its status is no longer FAILED or CANCELLED)
            raise RunNotResumable(after, decision.ignored)
        self._follow_up(after, decision, outbox)
        # carried out and audited; a run that failed again at once (e.g. a quota that can never
        # fit) says why in its outcome: the resume itself happened, so it is not refused
        return self.store.get(run_id, all_attempts=True) or after

    def get(self, run_id: str) -> Run:
        run = self.store.get(run_id, all_attempts=True)
        if run is None:
            raise RunNotFound(run_id)
        return run

    def list_runs(self, status: str | None, limit: int, cursor: str | None) -> Page:
        return self.store.list_runs(status, limit, cursor)

    def events(self, run_id: str, limit: int, cursor: str | None) -> Page:
        """A page of the run's audit trail, redacted (entries written before redaction existed
        included): the values of the run's secret-looking keys never leave the table."""
        run = self.store.get(run_id)
        if run is None:
            raise RunNotFound(run_id)
        page = self.store.list_audit(run_id, limit, cursor)
        secrets = run_secrets(run)
        return Page([redacted_entry(e, secrets) for e in page.items], page.cursor)
