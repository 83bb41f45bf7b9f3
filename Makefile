# aks-gpu: two commands set up everything on a fresh machine: `make plan` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed

.PHONY: plan test lint typecheck unit up preview bench schema clean

# The venv is rebuilt whenever requirements.txt or pyproject.toml change.
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

plan: $(STAMP)
	$(BIN)/aksgpu plan --stack $(STACK)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest

schema: $(STAMP)
	$(BIN)/aksgpu schema > stacks/stack-config.schema.json

bench: $(STAMP)
	$(BIN)/python -m bench

# Real deployments: needs the Pulumi CLI, a logged-in backend and Azure credentials.
preview: $(STAMP)
	pulumi preview --stack $(STACK)

up: $(STAMP)
	pulumi up --stack $(STACK)

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
