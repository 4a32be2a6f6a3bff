"""Console deep links and CLI commands appended to alerts (domain/vocabulary/links.py)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from hypothesis import given
from hypothesis import strategies as st

from sagewarden.domain.vocabulary.links import (
    attempt_links,
    console_origin,
    link_lines,
    log_streams_url,
    metrics_url,
    training_job_url,
)

JOB = "sw-llama-8b-01KE5Q86000DNQ47GXEV9VZMPH-a002"
RUN = "01KE5Q86000DNQ47GXEV9VZMPH"


def test_links_training_job_url_opens_the_job_in_its_region() -> None:
    assert training_job_url("eu-west-1", JOB) == (
        f"https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1#/jobs/{JOB}"
    )


def test_links_log_streams_url_filters_by_the_job_stream_prefix_with_console_escaping() -> None:
    url = log_streams_url("us-east-1", JOB)

    assert url == (
        "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
        "#logsV2:log-groups/log-group/$252Faws$252Fsagemaker$252FTrainingJobs"
        f"$3FlogStreamNameFilter$3D{JOB}$252F"
    )
    assert "/" not in urlsplit(url).fragment.removeprefix("logsV2:log-groups/log-group/")


def test_links_metrics_url_searches_for_the_job_name() -> None:
    assert metrics_url("us-west-2", JOB) == (
        f"https://us-west-2.console.aws.amazon.com/cloudwatch/home?region=us-west-2#metricsV2:graph=~();search={JOB}"
    )


def test_links_console_origin_per_partition() -> None:
    assert console_origin("us-east-1") == "https://us-east-1.console.aws.amazon.com"
    assert console_origin("cn-north-1") == "https://cn-north-1.console.amazonaws.cn"
    assert console_origin("us-gov-west-1") == "https://us-gov-west-1.console.amazonaws-us-gov.com"


def test_links_link_lines_carry_every_link_and_the_cli_commands() -> None:
    lines = link_lines("us-east-1", RUN, JOB)
    links = attempt_links("us-east-1", RUN, JOB)

    assert len(lines) == 4
    assert lines[0].endswith(links.training_job)
    assert lines[1].endswith(links.logs) and f"{JOB}/" in lines[1]
    assert lines[2].endswith(links.metrics)
    assert f"sagewarden get {RUN}" in lines[3] and f"sagewarden logs {RUN}" in lines[3]
    assert all("\n" not in line for line in lines)


def _console_decode(value: str) -> str:
    return unquote(unquote(value.replace("$", "%")))


@given(st.text(min_size=1, max_size=80))
def test_links_log_stream_prefix_round_trips_through_the_console_escaping(name: str) -> None:
    fragment = urlsplit(log_streams_url("us-east-1", name)).fragment
    group, _, prefix = fragment.removeprefix("logsV2:log-groups/log-group/").partition(
        "$3FlogStreamNameFilter$3D"
    )

    assert _console_decode(group) == "/aws/sagemaker/TrainingJobs"
    assert _console_decode(prefix) == name + "/"
    # nothing that would end the fragment's path or start a query/another fragment leaks through
    assert not set(prefix) & set("/?#&= ")
