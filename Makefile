# sagewarden — every command a user or CI needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION = 20
export PYTHONDONTWRITEBYTECODE = 1
SCENARIO ?= default
ALERT_EMAIL ?=
ALLOWED_ROLE_ARNS ?=
PYTEST_WORKERS ?= 2
SOAK_EXAMPLES ?= 10000

.PHONY: help setup demo drill test test-fast soak lint format synth bench deploy destroy clean openapi soak-api

help:
	@grep -E '^[a-z-]+:.*?## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet ".[infra,dev]"
	touch $@

setup: $(VENV)/.installed ## create .venv with the pinned dependencies

demo: setup ## local drill on a simulated account (no AWS needed)
	$(PY) -m drill $(SCENARIO)

drill: demo ## alias of demo; SCENARIO=path/to.json picks another scenario

test: setup ## every test: unit, adapters, infrastructure, scenarios
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

test-fast: setup ## unit tests only
	$(PY) -m pytest tests/unit

soak: setup ## 10,000 random interleavings + a crash at every port call (prints counts, rate, counterexample)
	SAGEWARDEN_SOAK_EXAMPLES=$(SOAK_EXAMPLES) SAGEWARDEN_SOAK_DYNAMODB_EXAMPLES=200 SAGEWARDEN_CRASH_CALLS=0 \
	  $(PY) -m pytest tests/soak -p no:randomly
	$(MAKE) soak-api

lint: setup ## ruff (lint + format check) and mypy (strict on the domain)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy --strict lambdas/sagewarden/domain
	$(PY) -m mypy lambdas/sagewarden drill infra app.py benchmarks cli

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

synth: setup ## synthesize the CloudFormation template offline into cdk.out/
	CDK_OUTDIR=cdk.out $(PY) app.py && ls -1 cdk.out/*.template.json

openapi: setup ## regenerate docs/openapi.json from the API's resolver (a test fails when it is stale)
	PYTHONPATH=lambdas $(PY) -m sagewarden.api.openapi --write docs/openapi.json

FUZZ_REQUESTS ?= 20000
soak-api: setup ## fuzz the API from docs/openapi.json with FUZZ_REQUESTS requests (default 20,000)
	SAGEWARDEN_FUZZ_REQUESTS=$(FUZZ_REQUESTS) $(PY) -m pytest tests/fuzz -m fuzz -s -q

bench: setup ## benchmarks: regenerate BENCHMARKS.md and docs/bench-*.png
	$(PY) -m benchmarks --write

.PHONY: iam-report
iam-report: setup ## IAM replay over the shipped scenarios: each call's decision, grants no call needed
	$(PY) -m drill.iam --table

node_modules/.installed: package.json
	npm install --no-audit --no-fund
	touch $@

deploy: setup node_modules/.installed ## cdk deploy to the current AWS account (needs credentials)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk deploy \
	  $(if $(ALERT_EMAIL),-c alertEmail=$(ALERT_EMAIL)) \
	  $(if $(ALLOWED_ROLE_ARNS),-c allowedRoleArns='$(ALLOWED_ROLE_ARNS)')

destroy: setup node_modules/.installed ## remove the stack (the state table is retained)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" npx cdk destroy

clean:
	rm -rf cdk.out .cache .pytest_cache .mypy_cache .ruff_cache
