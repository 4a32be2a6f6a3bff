"""docs/openapi.json: generated from the resolver, committed, valid, and describing the API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from openapi_spec_validator import validate

from sagewarden import openapi
from sagewarden.domain.vocabulary.policy import RANGES

DOC = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"


@pytest.mark.claim(
    "described by an OpenAPI 3.1 document, [`docs/openapi.json`](openapi.json), generated from the Lambda's own resolver (`make openapi`; a test fails when the committed file is stale)"
)
def test_openapi_committed_document_is_what_the_resolver_generates():
    assert DOC.read_text(encoding="utf-8") == openapi.render(), (
        "docs/openapi.json is stale: run `make openapi` and commit the result"
    )


@pytest.mark.claim(
    "described by an OpenAPI 3.1 document, [`docs/openapi.json`](openapi.json), generated from the Lambda's own resolver (`make openapi`; a test fails when the committed file is stale)"
)
def test_openapi_document_is_valid_openapi_3_1():
    doc = json.loads(DOC.read_text(encoding="utf-8"))
    assert doc["openapi"].startswith("3.1")
    validate(doc)


@pytest.mark.claim(
    "described by an OpenAPI 3.1 document, [`docs/openapi.json`](openapi.json), generated from the Lambda's own resolver (`make openapi`; a test fails when the committed file is stale)"
)
def test_openapi_document_describes_routes_parameters_bodies_and_responses():
    doc = openapi.document()
    paths = doc["paths"]
    expected = {
        ("/runs", "post"): {"200", "201", "400", "409", "413"},
        ("/runs", "get"): {"200", "400"},
        ("/runs/{run_id}", "get"): {"200", "404"},
        ("/runs/{run_id}/events", "get"): {"200", "400", "404"},
        ("/runs/{run_id}/cancel", "post"): {"200", "202", "404", "409"},
        ("/runs/{run_id}/resume", "post"): {"202", "404", "409"},
    }
    assert {(p, m) for p, ops in paths.items() for m in ops} == set(expected)
    for (path, method), codes in expected.items():
        assert codes <= set(paths[path][method]["responses"]), (path, method)
    params = {p["name"]: p for p in paths["/runs"]["get"]["parameters"]}
    assert {"status", "limit", "cursor"} <= set(params)
    assert [p["in"] for p in paths["/runs/{run_id}"]["get"]["parameters"]] == ["path"]
    body = paths["/runs"]["post"]["requestBody"]
    assert body["required"] is True
    schemas = doc["components"]["schemas"]
    submission = schemas["RunSubmission"]
    assert set(submission["properties"]) == {"name", "training_job", "policy"}
    assert set(submission["required"]) == {"name", "training_job"}
    job_ref = submission["properties"]["training_job"]["$ref"].rsplit("/", 1)[-1]
    job = schemas[job_ref]
    assert "TrainingJobName" not in job["properties"]
    assert {"RoleArn", "OutputDataConfig", "CheckpointConfig", "ResourceConfig"} <= set(job["required"])
    resource = schemas[job["properties"]["ResourceConfig"]["$ref"].rsplit("/", 1)[-1]]
    instance_type = schemas[resource["properties"]["InstanceType"]["$ref"].rsplit("/", 1)[-1]]
    assert "ml.p5.48xlarge" in instance_type["enum"]


def test_openapi_policy_schema_quotes_the_policy_ranges():
    policy = openapi.document()["components"]["schemas"]["Policy"]["properties"]
    for name, allowed in RANGES.items():
        variants = policy[name].get("anyOf", [policy[name]])
        numeric = next(v for v in variants if v.get("type") in ("integer", "number"))
        low_key = "exclusiveMinimum" if allowed.low_open else "minimum"
        high_key = "exclusiveMaximum" if allowed.high_open else "maximum"
        assert numeric[low_key] == allowed.low and numeric[high_key] == allowed.high, name


@pytest.mark.claim("403 unless the caller owns the run or is an admin.")
def test_openapi_cancel_and_resume_document_the_403_for_non_owners():
    paths = json.loads(DOC.read_text(encoding="utf-8"))["paths"]
    for route in ("/runs/{run_id}/cancel", "/runs/{run_id}/resume"):
        forbidden = paths[route]["post"]["responses"]["403"]
        assert "owner" in forbidden["description"] and "admin" in forbidden["description"]
    assert "403" not in paths["/runs/{run_id}"]["get"]["responses"]  # reading stays open


def test_the_api_handler_loads_no_openapi_models_at_a_cold_start():
    """The route annotations are for the document only: a cold start loads neither pydantic nor
    the OpenAPI parameters (they made the API's import 1.55x `import boto3`); rendering does."""
    code = (
        "import sys; sys.path.insert(0, 'lambdas')\n"
        "import sagewarden.handlers.api\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] == 'pydantic' or m.endswith('openapi.params'))\n"
        "assert not heavy, heavy\n"
        "from sagewarden import openapi\n"
        "assert '/runs/{run_id}/cancel' in openapi.document()['paths']\n"
        "assert 'pydantic' in sys.modules\n"
    )
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "true", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
