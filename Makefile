# aks-gpu: two commands set up everything on a fresh machine: `make plan` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STACK ?= dev
STAMP := $(VENV)/.installed
CHECKOV_VENV := .venv-checkov
CHECKOV_STAMP := $(CHECKOV_VENV)/.installed
# Prometheus's promtool checks and unit-tests the alert rules (tests/monitoring). Debian's `prometheus` package ships
# it (tools/ensure-debian-package); the promtool tests fail without it.
PROMTOOL_STAMP := $(VENV)/.promtool
# The audit's HTML report is opened in headless Chromium (tests/audit/test_html_browser.py): Debian's `chromium`
# package, installed the same way; without it that test fails (it never skips unless AKSGPU_SKIP_BROWSER_TESTS=1).
CHROMIUM_STAMP := $(VENV)/.chromium

.PHONY: setup plan test lint typecheck unit up preview bench schema checkov-venv promtool chromium clean tools e2e

# The venv is rebuilt whenever requirements.txt or pyproject.toml change, and the package reinstalled when its version
# (components/aks_gpu/__init__.py, pyproject's dynamic version) may have: pip records it at install, and `aksgpu
# --version` reads that record.
$(STAMP): requirements.txt pyproject.toml components/aks_gpu/__init__.py
	@PYTHON=$(PYTHON) tools/setup-venv $(VENV) requirements.txt --editable
	@touch $(STAMP)

# checkov scans the rendered manifests in the tests; it cannot share the project's venv (see requirements-checkov.txt).
$(CHECKOV_STAMP): requirements-checkov.txt
	@PYTHON=$(PYTHON) tools/setup-venv $(CHECKOV_VENV) requirements-checkov.txt
	@touch $(CHECKOV_STAMP)

checkov-venv: $(CHECKOV_STAMP)

# Debian packages the tests run (tools/ensure-debian-package installs them as root or with passwordless sudo, or says
# how); a stamp is written once the command is there, so a machine without it is asked again next time.
$(PROMTOOL_STAMP): $(STAMP)
	@tools/ensure-debian-package promtool prometheus "the promtool tests"
	@if command -v promtool >/dev/null 2>&1; then promtool --version | head -1; touch $(PROMTOOL_STAMP); fi

promtool: $(PROMTOOL_STAMP)

$(CHROMIUM_STAMP): $(STAMP)
	@tools/ensure-debian-package chromium chromium "the HTML report test"
	@if command -v chromium >/dev/null 2>&1; then chromium --version; touch $(CHROMIUM_STAMP); fi

chromium: $(CHROMIUM_STAMP)

# The environment alone: .venv with the pinned dependencies and the package (aksgpu in .venv/bin).
setup: $(STAMP)

plan: $(STAMP)
	$(BIN)/aksgpu plan --stack $(STACK)

test: lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) $(CHECKOV_STAMP) $(PROMTOOL_STAMP) $(CHROMIUM_STAMP)
	$(BIN)/python -m pytest

# The pinned Go-built tools of tools/go/versions (control plane, etcd, kwok, pulumi and its kubernetes provider, helm)
# into .tools/bin, from a machine-wide cache (docs/local.md). Needs Go; without it, says so (exit 2). A warm cache:
# seconds.
tools:
	tools/go/build-tools

# The real engines in the loop (tests/e2e): `aksgpu local` clusters of every shipped stack, the real API server, the real
# scheduler and the real Pulumi CLI. Not part of `make test` (pyproject: norecursedirs), which needs no Go.
e2e: $(STAMP) tools
	$(BIN)/python -m pytest -p no:cacheprovider tests/e2e

# The config models are the one source: the component args (components/aks_gpu/specs.py), the key table of docs/config.md
# and the stack file's JSON schema (shipped, and in stacks/) are written from them; the component package's schema from
# the components.
schema: $(STAMP)
	$(BIN)/python -m aks_gpu.config.generate
	$(BIN)/aksgpu schema --components > components/aks_gpu/schema.json

bench: $(STAMP)
	$(BIN)/python -m bench

# Real deployments: needs the Pulumi CLI, a logged-in backend and Azure credentials.
preview: $(STAMP)
	pulumi preview --stack $(STACK)

up: $(STAMP)
	pulumi up --stack $(STACK)

clean:
	rm -rf build .mypy_cache .ruff_cache .pytest_cache
