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

.PHONY: help setup demo drill test test-fast lint format synth bench deploy destroy clean

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

bench: setup ## benchmarks: regenerate BENCHMARKS.md and docs/bench-*.png
	$(PY) -m benchmarks --write

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
