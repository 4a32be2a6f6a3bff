"""Job and alarm names: what a name carries, so that an event or an alarm leads to its run."""

from __future__ import annotations

import pytest

from sagewarden import keys
from sagewarden.adapters.cloudwatch_hang_alarms import alarm_name, parse_alarm_name
from sagewarden.domain.vocabulary.names import job_name, parse_job_name, training_stream

RUN_ID = "01KE5Q86000DNQ47GXEV9VZMPH"


def test_a_job_name_carries_its_run_id_and_attempt_so_no_scan_is_needed():
    name = job_name("sw", "llama-8b", RUN_ID, 12)
    assert name == f"sw-llama-8b-{RUN_ID}-a012"
    assert parse_job_name(name) == (RUN_ID, 12)
    assert parse_job_name("someone-elses-training-job") is None


def test_alarm_names_are_sagewarden_prefix_hang_job_and_signal():
    """docs/hang-detection.md: `sagewarden-<jobPrefix>-hang-<job>--<signal>`, one prefix per
    deployment, so one deployment's alarms are never read as the other's."""
    job = job_name("tb", "llama-8b", RUN_ID, 1)
    name = alarm_name(keys.alarm_prefix("tb"), job, "log_silence")
    assert name == f"sagewarden-tb-hang-{job}--log-silence"
    assert parse_alarm_name(keys.alarm_prefix("tb"), name) == (job, "log_silence")
    assert parse_alarm_name(keys.alarm_prefix("tb2"), name) is None


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        pytest.param(
            "sw-a-01KE5Q86000DNQ47GXEV9VZMPH-a001/algo-3-1767607200",
            ("sw-a-01KE5Q86000DNQ47GXEV9VZMPH-a001", 3, 1767607200),
            id="a training stream",
        ),
        pytest.param("job/algo-12", ("job", 12, -1), id="a training stream without its epoch"),
        pytest.param("job/algo-1-1767607200/ssm", None, id="the SSM agent's stream of remote debugging"),
        pytest.param("job/algo-x-1", None, id="no host number"),
        pytest.param("job", None, id="no stream part"),
        pytest.param("/algo-1-1", None, id="no job part"),
    ],
)
def test_training_stream_names_only_the_training_streams(stream, expected):
    assert training_stream(stream) == expected
