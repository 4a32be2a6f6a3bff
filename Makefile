# sagewarden — every command a user or CI needs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION = 20
export PYTHONDONTWRITEBYTECODE = 1
SCENARIO ?= default
PYTEST_WORKERS ?= 2
SOAK_EXAMPLES ?= 10000

# --- deployment settings (make deploy / bootstrap / destroy) ----------------------------------
#   ALERT_EMAIL, ALLOWED_ROLE_ARNS   the alertEmail / allowedRoleArns context
#   STACK, JOB_PREFIX the stackName / jobPrefix context: a second deployment in one account and
#                     region needs its own of both (make doctor refuses a prefix another stack uses)
#   CONTEXT           more CDK context, as cdk takes it: CONTEXT='-c logSubscription=false'
#   PROFILE           an AWS CLI profile (AWS_PROFILE and AWS_REGION work as well)
#   FORCE=1           make destroy without a confirmation prompt (CI, no terminal)
#   REQUIRE_APPROVAL  e.g. never: make deploy without the IAM-change prompt (CI, no terminal)
#   PREFLIGHT=0       make deploy and make bootstrap without the preflight (python -m sagewarden_cli.doctor)
ALERT_EMAIL ?=
ALLOWED_ROLE_ARNS ?=
STACK ?=
JOB_PREFIX ?=
CONTEXT ?=
PROFILE ?=
FORCE ?=
REQUIRE_APPROVAL ?=
PREFLIGHT ?= 1
CDK_CONTEXT = $(if $(STACK),-c stackName=$(STACK)) $(if $(JOB_PREFIX),-c jobPrefix=$(JOB_PREFIX)) \
              $(if $(ALERT_EMAIL),-c alertEmail=$(ALERT_EMAIL)) \
              $(if $(ALLOWED_ROLE_ARNS),-c allowedRoleArns='$(ALLOWED_ROLE_ARNS)') $(CONTEXT)
AWS_ARGS = $(if $(PROFILE),--profile $(PROFILE))
# The CDK CLI pinned in package.json/package-lock.json; never a download prompt.
CDK = npx --no-install cdk

.PHONY: help prereqs prereqs-cdk cdk-cli setup lock demo drill test test-fast soak lint checkov format synth bench bootstrap doctor \
	deploy destroy clean openapi soak-api claims

help:
	@grep -E '^[a-z-]+:.*?## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | column -t -s $$'\t'

# Every target starts here: one line per missing prerequisite, then stop.
prereqs:
	@sh scripts/check-prereqs.sh "$(if $(wildcard $(PY)),$(PY),$(PYTHON))"

prereqs-cdk:
	@sh scripts/check-prereqs.sh "$(if $(wildcard $(PY)),$(PY),$(PYTHON))" --npm

$(VENV)/.installed: pyproject.toml requirements.lock | prereqs
	@echo "==> creating $(VENV) and installing the locked Python packages (first time: about 2 minutes)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade --progress-bar off pip
	$(PY) -m pip install --progress-bar off -r requirements.lock
	$(PY) -m pip install --progress-bar off --no-deps ".[infra,dev]"
	@echo "==> $(VENV) ready"
	touch $@

setup: prereqs $(VENV)/.installed ## create .venv with the locked dependencies (requirements.lock)

lock: setup ## regenerate requirements.lock from pyproject.toml's ranges (keeps current pins; UPGRADE=1 takes the newest)
	$(PY) -m piptools compile -q --strip-extras --no-emit-index-url --no-emit-find-links --extra infra --extra dev \
		$(if $(UPGRADE),--upgrade) -o requirements.lock pyproject.toml

demo: setup ## local drill on a simulated account (no AWS needed)
	$(PY) -m drill $(SCENARIO)

drill: demo ## alias of demo; SCENARIO=path/to.json picks another scenario

PORT ?= 8765
SPEED ?= 600
SUBMIT ?=
# A scenario only when one is asked for (SCENARIO= on the command line or in the environment): the
# server's default is a plain simulated account, not make demo's default scenario.
SERVE_SCENARIO = $(if $(and $(filter-out file default undefined,$(origin SCENARIO)),$(SCENARIO)),--scenario $(SCENARIO) $(if $(SUBMIT),--submit))
.PHONY: demo-serve
demo-serve: setup ## the API on a simulated account for `sagewarden --local ...` (PORT=8765 SPEED=600; SCENARIO=selftest loads a scenario, SUBMIT=1 submits its runs)
	$(PY) -m drill serve --port $(PORT) --speed $(SPEED) $(SERVE_SCENARIO)

test: setup ## every test: unit, adapters, infrastructure, scenarios
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup

test-fast: setup ## the product's unit tests, then the drill's and the bench's own (no AWS, seconds)
	$(PY) -m pytest -n $(PYTEST_WORKERS) tests/unit tests/drill tests/bench

soak: setup ## 10,000 random interleavings + a crash at every port call (prints counts, rate, counterexample)
	SAGEWARDEN_SOAK_EXAMPLES=$(SOAK_EXAMPLES) SAGEWARDEN_SOAK_DYNAMODB_EXAMPLES=200 SAGEWARDEN_CRASH_CALLS=0 \
	  $(PY) -m pytest tests/soak -p no:randomly
	$(MAKE) soak-api

lint: setup ## ruff (lint + format check), mypy (strict on the domain) and checkov on the template
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy --strict lambdas/sagewarden/domain
	$(PY) scripts/check_layers.py
	$(PY) -m mypy lambdas/sagewarden drill infra app.py benchmarks sagewarden_cli scripts
	$(PY) -m mypy examples/platform-app/app.py
	cd companion && ../$(PY) -m mypy --strict sagewarden_companion
	$(MAKE) checkov

# checkov pins an older boto3 than the project: it gets a virtualenv of its own, installed from
# its own lock (requirements-checkov.lock)
CHECKOV_VENV ?= .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.lock | prereqs
	@echo "==> creating $(CHECKOV_VENV) from requirements-checkov.lock"
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --progress-bar off -r requirements-checkov.lock
	touch $@

checkov: setup $(CHECKOV_VENV)/.installed ## checkov on a fresh synth; fails on any finding .checkov.yaml does not accept
	rm -rf .cache/checkov-synth
	CDK_OUTDIR=.cache/checkov-synth $(PY) app.py > /dev/null
	$(CHECKOV_VENV)/bin/checkov --config-file .checkov.yaml -f .cache/checkov-synth/*.template.json

format: setup
	$(PY) -m ruff format .
	$(PY) -m ruff check --fix .

synth: setup ## synthesize the CloudFormation template offline into cdk.out/
	CDK_OUTDIR=cdk.out $(PY) app.py && ls -1 cdk.out/*.template.json

openapi: setup ## regenerate docs/openapi.json from the API's resolver (a test fails when it is stale)
	PYTHONPATH=lambdas $(PY) -m sagewarden.openapi --write docs/openapi.json

claims: setup ## regenerate docs/claims.md from docs/claims.toml and the tests' @pytest.mark.claim markers
	$(PY) -m tests.claims

FUZZ_REQUESTS ?= 20000
soak-api: setup ## fuzz the API from docs/openapi.json with FUZZ_REQUESTS requests (default 20,000)
	SAGEWARDEN_FUZZ_REQUESTS=$(FUZZ_REQUESTS) $(PY) -m pytest tests/fuzz -m fuzz -s -q

bench: setup ## benchmarks: regenerate BENCHMARKS.md and docs/bench-*.png
	$(PY) -m benchmarks --write

.PHONY: iam-report
iam-report: setup ## IAM replay over the shipped scenarios: each call's decision, grants no call needed
	$(PY) -m drill.iam --table

node_modules/.installed: package.json package-lock.json | prereqs-cdk
	@echo "==> installing the pinned CDK CLI into node_modules (npm ci)"
	npm ci --no-audit --no-fund
	touch $@

cdk-cli: prereqs-cdk node_modules/.installed

bootstrap: setup cdk-cli ## credentials preflight, then cdk bootstrap the current AWS account and region (once per account and region)
ifneq ($(PREFLIGHT),0)
	$(PY) -m sagewarden_cli.doctor --credentials-only $(AWS_ARGS)
endif
	$(CDK) bootstrap $(AWS_ARGS)

doctor: setup ## deploy preflight: credentials, bootstrap, roles, log subscription slots, buckets, quotas
	$(PY) -m sagewarden_cli.doctor $(AWS_ARGS) $(CDK_CONTEXT)

deploy: setup cdk-cli ## preflight, then cdk deploy to the current AWS account (ALLOWED_ROLE_ARNS=..., ALERT_EMAIL=...)
ifneq ($(PREFLIGHT),0)
	$(PY) -m sagewarden_cli.doctor $(AWS_ARGS) $(CDK_CONTEXT)
endif
	$(CDK) deploy $(AWS_ARGS) $(CDK_CONTEXT) $(if $(REQUIRE_APPROVAL),--require-approval $(REQUIRE_APPROVAL))

destroy: setup cdk-cli ## remove the stack (the state table is retained); FORCE=1 without a prompt
ifeq ($(FORCE),)
	@if [ ! -t 0 ]; then echo "sagewarden: no terminal to confirm in: run make destroy FORCE=1" >&2; exit 2; fi
endif
	$(CDK) destroy $(AWS_ARGS) $(CDK_CONTEXT) $(if $(FORCE),--force)

clean:
	rm -rf cdk.out .cache .pytest_cache .mypy_cache .ruff_cache
