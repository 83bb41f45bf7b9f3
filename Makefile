# aks-gpu: two commands set up everything on a fresh machine: `make plan` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed

.PHONY: plan test lint typecheck unit up preview bench schema checkov-venv clean

# The venv is rebuilt whenever requirements.txt or pyproject.toml change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# checkov scans the rendered manifests in the tests; it cannot share the project's venv (see requirements-checkov.txt).
$(CHECKOV_STAMP): requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -r requirements-checkov.txt
	touch $(CHECKOV_STAMP)

checkov-venv: $(CHECKOV_STAMP)

plan: $(STAMP)
	$(BIN)/aksgpu plan --stack $(STACK)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) $(CHECKOV_STAMP)
	$(BIN)/python -m pytest

schema: $(STAMP)
	$(BIN)/aksgpu schema > stacks/stack-config.schema.json
	$(BIN)/aksgpu schema --components > components/schema.json

bench: $(STAMP)
	$(BIN)/python -m bench

# Real deployments: needs the Pulumi CLI, a logged-in backend and Azure credentials.
preview: $(STAMP)
	pulumi preview --stack $(STACK)

up: $(STAMP)
	pulumi up --stack $(STACK)

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
