"""Renders the API's OpenAPI document from `handlers/api.py`'s resolver, with `training_job` as
SageMaker's CreateTrainingJob input (`api.sagemaker_model`).

`make openapi` writes docs/openapi.json; a test compares the committed copy. Why: docs/api.md.

    PYTHONPATH=lambdas python -m sagewarden.openapi [--write docs/openapi.json]"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

TITLE = "sagewarden"
VERSION = "1"
DESCRIPTION = (
    "Supervised SageMaker training runs. Every route uses AWS_IAM authorisation (SigV4). "
    "Bad input is a 400 (413 when too large) whose `errors` name every problem by field path; "
    "nothing is stored for a rejected request."
)
# What sagewarden requires beyond SageMaker's model, by shape name (see api.validation).
REQUIRED_BY_SAGEWARDEN = {
    "CreateTrainingJobRequest": ["AlgorithmSpecification", "ResourceConfig", "CheckpointConfig"],
    "ResourceConfig": ["InstanceType", "InstanceCount"],
}


def document() -> dict[str, Any]:
    from sagewarden.api import route_docs, sagemaker_model
    from sagewarden.handlers.api import app

    route_docs.resolve(app)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Powertools warns that pydantic v2 means OpenAPI 3.1
        text = app.get_openapi_json_schema(
            title=TITLE,
            version=VERSION,
            description=DESCRIPTION,
            security_schemes={
                "sigv4": {  # type: ignore[dict-item]
                    "type": "apiKey",
                    "name": "Authorization",
                    "in": "header",
                    "description": "AWS Signature Version 4 (API Gateway AWS_IAM authorisation)",
                }
            },
            security=[{"sigv4": []}],
        )
    doc: dict[str, Any] = json.loads(text)
    schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
    # Powertools adds its 422 validation-error shapes; this API never answers them.
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    root, shapes = sagemaker_model.json_schemas(REQUIRED_BY_SAGEWARDEN)
    schemas.update(shapes)
    job = schemas["RunSubmission"]["properties"]["training_job"]
    schemas["RunSubmission"]["properties"]["training_job"] = {
        "$ref": f"#/components/schemas/{root}",
        "description": job.get("description", ""),
    }
    for operations in doc["paths"].values():
        for operation in operations.values():
            if "requestBody" in operation:  # every body this API takes is required
                operation["requestBody"]["required"] = True
    doc["info"]["x-sagemaker-model"] = f"botocore {sagemaker_model.model().botocore_version}"
    return doc


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", metavar="PATH", help="write the document here instead of stdout")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text, encoding="utf-8")
        print(f"wrote {args.write} ({len(text):,} characters)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
