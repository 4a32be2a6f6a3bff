"""`SimSageMaker`: a simulated SageMaker training service on a virtual clock, called like a boto3 client.

Holds the API and the controls; by concern: `drill.sim.lifecycle`, `faults`, `checkpoints`, `logs`,
`series`, `model`, `texts`. Why: docs/drill.md (*The simulated services*)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from drill.clock import VirtualClock, from_ms
from drill.sim import faults
from drill.sim import hosts as sim_hosts
from drill.sim.lifecycle import SimCore
from drill.sim.model import (
    Fault,
    JobProfile,
    SimJob,
    StartupTimes,
    int_tag,
    script_profile,
    with_told_interval,
)
from drill.sim.reads import SimReads
from drill.sim.request_limits import length_problems, validation_message
from drill.sim.texts import (
    DEFAULT_MAX_RUNTIME_S,
    HANG_PHASES,
    MAX_PENDING_RANGE_S,
    MAX_RUNTIME_LIMIT_S,
    MINUTE_MS,
    NAME_PATTERN,
    NAME_RE,
    SPOT_WARM_POOL_MESSAGE,
    STATUS_MESSAGES,
    TRAINING_FAULTS,
    WARM_STARTING_MESSAGE,
    client_error,
    limit_error,
)
from drill.sim.warm_pools import WarmPoolSettings, is_spot, keep_alive_of
from sagewarden.domain.capacity.quotas import TOTAL_QUOTA, TOTAL_SPOT_QUOTA, training_quota
from sagewarden.domain.vocabulary.models import SM_DELETING as DELETING  # while DeleteTrainingJob removes it
from sagewarden.keys import (
    TAG_ATTEMPT,
    TAG_RUN_ID,
    TAG_RUN_NAME,
)

__all__ = ["SimSageMaker"]


@functools.lru_cache(maxsize=1)
def _create_input_shape() -> Any:
    import botocore.session  # local: loading the service model takes a moment

    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


class SimSageMaker(SimReads, SimCore):
    """A boto3-shaped SageMaker training API on a virtual clock (see module docstring)."""

    def __init__(
        self,
        clock: VirtualClock,
        *,
        s3_client: Any,
        logs_client: Any | None = None,
        account_id: str = "123456789012",
        region: str = "us-east-1",
        quotas: dict[str, int] | None = None,
        total_instance_quota: int | None = None,
        spot_quotas: dict[str, int] | None = None,
        total_spot_instance_quota: int | None = None,
        startup: StartupTimes | None = None,
        seed: int = 0,
        emit: Callable[[dict[str, Any]], None] | None = None,
        timestamp_form: str = "millis",
        progress_log_interval_s: int = 600,
        log_flush_interval_s: int = 0,
        heartbeat_metric: bool = True,
        warm_pools: WarmPoolSettings | None = None,
    ) -> None:
        super().__init__(
            clock,
            s3_client=s3_client,
            logs_client=logs_client,
            account_id=account_id,
            region=region,
            startup=startup,
            seed=seed,
            emit=emit,
            timestamp_form=timestamp_form,
            progress_log_interval_s=progress_log_interval_s,
            log_flush_interval_s=log_flush_interval_s,
            warm_pools=warm_pools,
        )
        self.quotas = dict(quotas or {})
        # whether the deployment's log subscription feeds the heartbeat metric (logSubscription);
        # without it no heartbeat datapoint exists at all
        self.heartbeat_metric = heartbeat_metric
        # stretches [start ms, end ms or None: for ever) in which the heartbeat pipeline delivers
        # nothing for any job (the heartbeat function failing or throttled, the subscription filter
        # removed, a Logs delivery problem): no heartbeat datapoint of a minute inside one exists,
        # ever, while the jobs' log lines are written as always (a scenario's account.heartbeat_outages)
        self.heartbeat_outages: list[tuple[int, int | None]] = []
        self.total_instance_quota = total_instance_quota
        # managed spot training's own quotas ("<type> for spot training job usage", "Number of
        # instances across all spot training jobs"): a spot job is checked against them only
        self.spot_quotas = dict(spot_quotas or {})
        self.total_spot_instance_quota = total_spot_instance_quota
        self._throttle = 0
        self._request_seq = 0
        self._bounds_cache: dict[tuple[Any, ...], tuple[list[Any], set[int]]] = {}
        # jobs DeleteTrainingJob removed (gone from the API, their names free again), in order
        self.deleted_jobs: list[SimJob] = []
        self._deleting: list[SimJob] = []
        self._job_seq = 0

    # ------------------------------------------------------------------------------------------
    # boto3-shaped API
    # ------------------------------------------------------------------------------------------

    def create_training_job(self, **request: Any) -> dict[str, Any]:
        op = "CreateTrainingJob"
        now = self.clock.now_ms
        self._gate(op)
        tags = self._tags_of(request)
        faults.refuse_throttled(self, tags, request)
        self._validate(request, op)
        self._settle_deletions(now)
        plan = self.training_plans.admit(request, now, op)  # drill/sim/training_plans.py
        name: str = request["TrainingJobName"]
        arn = self._arn(name)
        if name in self._jobs:
            raise client_error(
                "ResourceInUse",
                "Training job names must be unique within an AWS account and region, and a training "
                f"job with this name already exists ({arn})",
                op,
            )
        rc = request["ResourceConfig"]
        itype: str = rc["InstanceType"]
        count: int = rc["InstanceCount"]
        spot = is_spot(request)
        faults.refuse_over_quota(self, tags, itype, count, name, op, spot=spot)
        self.warm_pools.settle(now)
        pool = self.warm_pools.candidate(request)
        if spot:
            self._check_spot_quota(itype, count, op)
        else:
            self._check_quota(itype, count, op, taking=pool.instance_count if pool is not None else 0)

        run_name = tags.get(TAG_RUN_NAME)
        profile = self._profiles.get(run_name) if run_name else None
        profile = profile or script_profile(request)
        env = request.get("Environment") or {}
        start_step = int_tag(env.get("SAGEWARDEN_RESUME_STEP")) or 0
        profile = with_told_interval(profile, env)
        job = SimJob(
            name=name,
            arn=arn,
            request=copy.deepcopy(request),
            profile=profile,
            tags=tags,
            run_name=run_name,
            run_id=tags.get(TAG_RUN_ID),
            attempt=int_tag(tags.get(TAG_ATTEMPT)),
            instance_type=itype,
            instance_count=count,
            created_ms=now,
            seq=self._next_seq(),
            start_step=start_step,
            _step=start_step,
            _clock=self.clock,
            _salt=self._rng.getrandbits(64),
            _stepf=float(start_step),
            _last_saved_step=start_step,
            _lines_until=now,
        )
        self._jobs[name] = job
        self._go_live(job)

        if pool is not None:  # the pool's instances, bad ones included (KeepAlive or not)
            self.warm_pools.take(pool, job, now)
        capacity = None if job.warm_pool_used or plan else faults.take_capacity_fault(self, job)
        if capacity is None:  # (refused for capacity: it never gets instances, a lemon waits)
            sim_hosts.take_lemons(self, job)  # new instances may include a bad host that came back
        check_ms, check_fails = 0, None
        job.remote_debug = bool((request.get("RemoteDebugConfig") or {}).get("EnableRemoteDebug"))
        if sim_hosts.wants_infra_check(request):
            job.infra_check = True
            check_ms, check_fails = sim_hosts.infra_check(self, job)
        message = WARM_STARTING_MESSAGE if job.warm_pool_used else STATUS_MESSAGES["Starting"]
        self._transition(job, now, "InProgress", "Starting", message)
        if capacity is not None:
            job.capacity_wait = True
            job._capacity = capacity
            delay = max(round(capacity.fault.after_training_min * MINUTE_MS), 1000)
            self._set_timer(job, now + delay, "pending")
        elif check_fails is not None:
            job._infra_check_host = check_fails
            provision = self.startup.warm_provision_s if job.warm_pool_used else self.startup.provision_s
            self._set_timer(job, now + provision * 1000 + check_ms, "infra_check_fail")
        else:
            provision = self.startup.warm_provision_s if job.warm_pool_used else self.startup.provision_s
            self._set_timer(job, now + provision * 1000 + check_ms, "downloading")
        if plan is not None:  # reserved capacity: Pending until one of its windows has room
            self.training_plans.hold(self, job, plan, now)
        self._reschedule(job)
        return {"TrainingJobArn": arn, "ResponseMetadata": self._response_metadata()}

    def describe_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        job = self._existing_job(TrainingJobName, "DescribeTrainingJob")
        r = job.request
        out: dict[str, Any] = {
            "TrainingJobName": job.name,
            "TrainingJobArn": job.arn,
        }
        if job.status == "Completed":
            out["ModelArtifacts"] = {"S3ModelArtifacts": self._model_artifacts(job)}
        out["TrainingJobStatus"] = DELETING if job.deleted_ms is not None else job.status
        out["SecondaryStatus"] = job.secondary
        if job.failure_reason is not None:
            out["FailureReason"] = job.failure_reason
        out["HyperParameters"] = copy.deepcopy(r.get("HyperParameters", {}))
        out["AlgorithmSpecification"] = copy.deepcopy(r["AlgorithmSpecification"])
        out["RoleArn"] = r["RoleArn"]
        for key in ("InputDataConfig", "OutputDataConfig", "ResourceConfig", "VpcConfig"):
            if key in r:
                out[key] = copy.deepcopy(r[key])
        warm = self.warm_pools.status(job, self.clock.now_ms)
        if warm is not None:
            out["WarmPoolStatus"] = warm
        out["StoppingCondition"] = self._stopping_condition(job)
        out["CreationTime"] = from_ms(job.created_ms)
        if job.provisioned_ms is not None:
            out["TrainingStartTime"] = from_ms(job.provisioned_ms)
        if job.ended_ms is not None:
            out["TrainingEndTime"] = from_ms(job.ended_ms)
        out["LastModifiedTime"] = from_ms(job.last_modified_ms)
        out["SecondaryStatusTransitions"] = [
            {k: (from_ms(v) if k in ("StartTime", "EndTime") else v) for k, v in tr.items() if v is not None}
            for tr in job.transitions
        ]
        out["EnableNetworkIsolation"] = bool(r.get("EnableNetworkIsolation", False))
        out["EnableInterContainerTrafficEncryption"] = bool(
            r.get("EnableInterContainerTrafficEncryption", False)
        )
        out["EnableManagedSpotTraining"] = bool(r.get("EnableManagedSpotTraining", False))
        for key in ("CheckpointConfig", "Environment", "RetryStrategy", "InfraCheckConfig"):
            if key in r:
                out[key] = copy.deepcopy(r[key])
        if job.ended_ms is not None and job.provisioned_ms is not None:
            seconds = (job.ended_ms - job.provisioned_ms) // 1000
            out["TrainingTimeInSeconds"] = seconds
            out["BillableTimeInSeconds"] = seconds * job.instance_count
        out["ResponseMetadata"] = self._response_metadata()
        return out

    def describe_training_plan(self, *, TrainingPlanName: str) -> dict[str, Any]:
        self._gate("DescribeTrainingPlan")
        out = self.training_plans.describe(TrainingPlanName, self.clock.now_ms, self._live)
        return {**out, "ResponseMetadata": self._response_metadata()}

    def stop_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        op = "StopTrainingJob"
        job = self._existing_job(TrainingJobName, op)
        if job.is_terminal:
            status = DELETING if job.deleted_ms is not None else job.status
            raise client_error(
                "ValidationException",
                f"The request was rejected because the training job is in status {status}.",
                op,
            )
        if job.status == "InProgress":
            self._begin_stop(job, self.clock.now_ms, "Stopped", "stopped")
            self._reschedule(job)
        return {"ResponseMetadata": self._response_metadata()}

    def delete_training_job(self, *, TrainingJobName: str) -> dict[str, Any]:
        """DeleteTrainingJob (API Reference): only a job in a terminal state (Stopped, Failed,
        Completed) that keeps no Available warm pool; "you cannot delete a job that is in the
        InProgress or Stopping state". The job then shows TrainingJobStatus Deleting for
        ``StartupTimes.delete_s`` and is gone: DescribeTrainingJob answers as for a name never
        used, and the name may be used again. No event is emitted for either (AWS documents none:
        the unkind case, the supervisor only sees it by looking). The refusals' codes are the
        model's listed errors (ResourceNotFound, ResourceInUse); their wording is the simulator's."""
        op = "DeleteTrainingJob"
        self._gate(op)
        now = self.clock.now_ms
        self._settle_deletions(now)
        job = self._jobs.get(TrainingJobName)
        if job is None:
            raise client_error("ResourceNotFound", "Requested resource not found.", op)
        if job.deleted_ms is not None or not job.is_terminal:
            status = DELETING if job.deleted_ms is not None else job.status
            raise client_error(
                "ResourceInUse",
                f"Training job {job.name} is in status {status}: only a job in a terminal state can be deleted.",
                op,
            )
        self.warm_pools.settle(now)
        pool = self.warm_pools.pool_of(job.name)
        if pool is not None and pool.status == "Available":
            raise client_error(
                "ResourceInUse",
                f"Training job {job.name} retains an Available warm pool: release it before deleting the job.",
                op,
            )
        job.deleted_ms = now
        self._deleting.append(job)
        self.fault_log.append((now, job.name, "deleted", 0))
        return {"ResponseMetadata": self._response_metadata()}

    def update_training_job(
        self, *, TrainingJobName: str, ResourceConfig: dict[str, Any] | None = None, **_: Any
    ) -> dict[str, Any]:
        """Only what the supervisor uses: ResourceConfig.KeepAlivePeriodInSeconds of an ended job
        whose warm pool is Available (0 terminates the pool at once and stops its billing); any
        other job answers a ValidationException (drill.sim.warm_pools)."""
        op = "UpdateTrainingJob"
        job = self._existing_job(TrainingJobName, op)
        keep = (ResourceConfig or {}).get("KeepAlivePeriodInSeconds")
        if keep is None:
            raise client_error("ValidationException", "No updatable field was given.", op)
        self.warm_pools.update(job, int(keep), self.clock.now_ms, op)
        return {"TrainingJobArn": job.arn, "ResponseMetadata": self._response_metadata()}

    # ------------------------------------------------------------------------------------------
    # Simulation control
    # ------------------------------------------------------------------------------------------

    def set_profile(self, run_name: str, profile: JobProfile) -> None:
        """Behaviour of jobs tagged ``sagewarden:run-name = run_name`` created from now on."""
        if profile.checkpoint_layout not in ("hf", "megatron", "dcp"):
            raise ValueError(f"unknown checkpoint layout {profile.checkpoint_layout!r}")
        self._profiles[run_name] = profile

    def inject(self, fault: Fault) -> None:
        """Arm a fault. Training faults also bind to matching jobs already in Training."""
        state = self.arm(fault)
        if fault.kind in TRAINING_FAULTS:
            now = self.clock.now_ms
            for job in self._live.values():
                if job.secondary == "Training" and job.status == "InProgress" and faults.matches(fault, job):
                    if fault.after_run_training_min is not None and job._phase in HANG_PHASES:
                        continue  # a hung job's healthy clock has stopped
                    faults.bind(self, job, state, now)
                    self._reschedule(job)

    def fix_recurring(self, run: str | None = None) -> list[str]:
        """The person fixed the run's deterministic failures that have shown (recurring crashes
        that fired): they fire no more. Returns their labels (drill/sim/faults.py)."""
        return faults.fix_recurring(self, run)

    def throttle_next(self, n: int) -> None:
        """The next ``n`` API calls (create, describe or stop) raise ThrottlingException."""
        self._throttle += n

    # ------------------------------------------------------------------------------------------
    # Observation
    # ------------------------------------------------------------------------------------------

    def jobs(self) -> list[SimJob]:
        """Every job the account ran, deleted ones included, in the order they were created."""
        self._settle_deletions(self.clock.now_ms)
        return sorted([*self._jobs.values(), *self.deleted_jobs], key=lambda j: j.seq)

    def job(self, name: str) -> SimJob:
        return self._jobs[name]

    def live_jobs(self, run_id: str) -> list[str]:
        return sorted(self._live_by_run.get(run_id, ()), key=lambda n: self._jobs[n].seq)

    def runs_with_several_live_jobs(self) -> dict[str, list[str]]:
        """Runs (by run id) that have more than one non-terminal job now: kept up to date as jobs
        start and end, so checking it costs nothing however many runs there are."""
        return {run: self.live_jobs(run) for run in self._crowded}

    @property
    def live_count(self) -> int:
        """How many jobs are not terminal."""
        return len(self._live)

    # ------------------------------------------------------------------------------------------
    # API helpers
    # ------------------------------------------------------------------------------------------

    def _existing_job(self, name: str, op: str) -> SimJob:
        """Throttling first, then the job, as the API answers: unknown names (and deleted jobs)
        are a ValidationException."""
        self._gate(op)
        self._settle_deletions(self.clock.now_ms)
        job = self._jobs.get(name)
        if job is None:
            raise client_error("ValidationException", "Requested resource not found.", op)
        return job

    def _settle_deletions(self, now: int) -> None:
        """Jobs whose Deleting is over leave the API (their names are free again)."""
        for job in list(self._deleting):
            assert job.deleted_ms is not None
            if now >= job.deleted_ms + self.startup.delete_s * 1000:
                self._deleting.remove(job)
                if self._jobs.get(job.name) is job:
                    del self._jobs[job.name]
                self.warm_pools.forget(job.name)
                self.deleted_jobs.append(job)

    def _next_seq(self) -> int:
        self._job_seq += 1
        return self._job_seq - 1

    def _gate(self, op: str) -> None:
        if self._throttle > 0:
            self._throttle -= 1
            raise client_error("ThrottlingException", "Rate exceeded", op)

    def _response_metadata(self) -> dict[str, Any]:
        self._request_seq += 1
        return {"RequestId": f"sim-{self._request_seq:012d}", "HTTPStatusCode": 200, "RetryAttempts": 0}

    def _arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account_id}:training-job/{name.lower()}"

    @staticmethod
    def _tags_of(request: dict[str, Any]) -> dict[str, str]:
        tags: dict[str, str] = {}
        for tag in request.get("Tags") or []:
            if isinstance(tag, dict) and "Key" in tag:
                tags[str(tag["Key"])] = str(tag.get("Value", ""))
        return tags

    def _validate(self, request: dict[str, Any], op: str) -> None:
        from botocore.validate import ParamValidator

        report = ParamValidator().validate(request, _create_input_shape())
        if report.has_errors():
            raise client_error("ValidationException", report.generate_report(), op)
        too_long = length_problems(request, _create_input_shape())  # what botocore leaves to SageMaker
        if too_long:
            raise client_error("ValidationException", validation_message(too_long), op)
        for key in (
            "TrainingJobName",
            "AlgorithmSpecification",
            "RoleArn",
            "OutputDataConfig",
            "ResourceConfig",
            "StoppingCondition",
        ):
            if key not in request:
                raise client_error(
                    "ValidationException",
                    f"1 validation error detected: Value null at '{key[0].lower() + key[1:]}' failed to "
                    "satisfy constraint: Member must not be null",
                    op,
                )
        name = request["TrainingJobName"]
        if len(name) > 63 or not NAME_RE.match(name):
            raise client_error(
                "ValidationException",
                f"1 validation error detected: Value '{name}' at 'trainingJobName' failed to satisfy "
                f"constraint: Member must satisfy regular expression pattern: {NAME_PATTERN}",
                op,
            )
        rc = request["ResourceConfig"]
        for key in ("InstanceType", "InstanceCount", "VolumeSizeInGB"):
            if key not in rc:
                raise client_error(
                    "ValidationException",
                    f"1 validation error detected: Value null at 'resourceConfig.{key[0].lower() + key[1:]}' "
                    "failed to satisfy constraint: Member must not be null",
                    op,
                )
        sc = request["StoppingCondition"]
        max_runtime = sc.get("MaxRuntimeInSeconds", DEFAULT_MAX_RUNTIME_S)
        if not 1 <= max_runtime <= MAX_RUNTIME_LIMIT_S:
            raise client_error(
                "ValidationException",
                f"MaxRuntimeInSeconds must be between 1 and {MAX_RUNTIME_LIMIT_S} seconds.",
                op,
            )
        pending = sc.get("MaxPendingTimeInSeconds")
        if pending is not None and not MAX_PENDING_RANGE_S[0] <= pending <= MAX_PENDING_RANGE_S[1]:
            raise client_error(
                "ValidationException",
                f"MaxPendingTimeInSeconds must be between {MAX_PENDING_RANGE_S[0]} and "
                f"{MAX_PENDING_RANGE_S[1]} seconds.",
                op,
            )
        if is_spot(request) and keep_alive_of(request) > 0:
            raise client_error("ValidationException", SPOT_WARM_POOL_MESSAGE, op)
        ckpt = request.get("CheckpointConfig")
        if ckpt is not None and not str(ckpt.get("S3Uri", "")).startswith("s3://"):
            raise client_error("ValidationException", "CheckpointConfig.S3Uri must be an s3:// URI.", op)

    def _check_quota(self, itype: str, count: int, op: str, *, taking: int = 0) -> None:
        """The training-job quotas; idle warm pools count towards them ("All warm pool instance
        usage counts toward your SageMaker training resource limit"), except the pool the new job
        takes (``taking`` instances: they become the job's own)."""
        limit = self.quotas.get(itype)
        if limit is not None:
            used = self._live_instances.get(itype, 0) + self.warm_pools.idle_instances(itype) - taking
            if used + count > limit:
                raise limit_error(training_quota(itype), limit, used, count, op)
        if self.total_instance_quota is not None:
            used = sum(self._live_instances.values()) + self.warm_pools.idle_instances() - taking
            if used + count > self.total_instance_quota:
                raise limit_error(TOTAL_QUOTA, self.total_instance_quota, used, count, op)

    def _check_spot_quota(self, itype: str, count: int, op: str) -> None:
        """Managed spot training's quotas, apart from the on-demand ones (Service Quotas lists
        both); no warm pool is ever kept for a spot job, so none counts here."""
        limit = self.spot_quotas.get(itype)
        if limit is not None:
            used = self._live_spot_instances.get(itype, 0)
            if used + count > limit:
                raise limit_error(training_quota(itype, spot=True), limit, used, count, op)
        total = self.total_spot_instance_quota
        if total is not None:
            used = sum(self._live_spot_instances.values())
            if used + count > total:
                raise limit_error(TOTAL_SPOT_QUOTA, total, used, count, op)

    def _model_artifacts(self, job: SimJob) -> str:
        base = str(job.request["OutputDataConfig"].get("S3OutputPath", "")).rstrip("/")
        return f"{base}/{job.name}/output/model.tar.gz"
