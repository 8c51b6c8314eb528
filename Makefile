# nib: two commands a newcomer needs. Both do their own set-up first and are idempotent.
#   make run    set up, then a demo research task on the embedded local devnet
#   make test   set up, then lint, type-check and the whole suite

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
ANVIL  := tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
SOLC   := tools/node_modules/solc/package.json
STAMP  := $(VENV)/.installed
export NIB_HOME ?= $(CURDIR)/.nib
export NIB_WALLET_PASSWORD ?= nib-devnet

.PHONY: setup run test lint typecheck pytest bench clean demo-down

CHROMIUM := /usr/bin/chromium

setup: $(STAMP) $(ANVIL) $(SOLC) $(CHROMIUM)

# The report test renders in headless Chromium (Debian's package); installed when missing.
$(CHROMIUM):
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(VENV)/bin/python
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

$(ANVIL) $(SOLC): tools/package.json
	cd tools && npm install --no-audit --no-fund --loglevel=error
	@test -x $(ANVIL) || { echo "Anvil binary missing after npm install; expected $(ANVIL). Fix: check npm can reach the registry and rerun make setup."; exit 1; }
	touch $(ANVIL) $(SOLC)

run: setup
	$(VENV)/bin/nib run --demo

test: setup lint typecheck pytest

lint: setup
	$(VENV)/bin/ruff check agent wallet judge chain storage tests bench

typecheck: setup
	$(VENV)/bin/mypy

pytest: setup
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench: setup
	$(PY) -m bench

demo-down: setup
	$(VENV)/bin/nib devnet down

clean:
	rm -rf $(VENV) tools/node_modules .nib
