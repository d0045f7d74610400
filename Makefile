# Two commands a newcomer needs: `make demo` and `make test`.
# Both create .venv on first use and install the project into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast bytecode docs lint typecheck check clean bench soak conformance conformance-risk proto browser

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The demo's runs stay readable in .demo/ (e.g. `federation --data-dir .demo runs`) until
# the next `make demo` replaces them; nothing piles up elsewhere.
demo: $(STAMP)
	rm -rf .demo
	$(BIN)/federation --data-dir .demo demo --case all

# The whole suite in parallel (pytest-xdist), a module's tests on one worker so that its
# module-scoped services start once: ports are reserved per worker (tests/servers.py) and
# shared scenarios run once per session (tests/scenarios.py); then the tests marked
# `serial` alone. The 30 slowest are listed so regressions show.
# Two workers per core: measured on 2 cores, two workers kept 1.2 of them busy, since
# most tests spend part of their time waiting on a process, a socket or a browser.
# Modules are handed out heaviest first (tests/module_seconds.txt); --no-loadscope-reorder
# keeps that order, which xdist would otherwise replace by each module's count of tests.
TEST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc) )))
# The modules with tests marked `serial` (each says why), named so that the serial pass
# collects only them: collecting the whole suite again cost 7 of its 10 s.
# tests/test_suite_limits.py checks that every module marking a test serial is named here.
SERIAL_TESTS = tests/coordinator/test_work_per_handoff.py
test: $(STAMP) bytecode docs browser lint typecheck
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial" --durations=30
	$(BIN)/python -m pytest -q -m serial $(SERIAL_TESTS)

# The inner loop: the same parallel run without the slowest tier (tests measured at 5s or
# more, listed in tests/slow_tier.txt: mostly real processes and the browser). CI runs
# `make test`, everything; a test not on the list (a new one, say) runs in both.
test-fast: $(STAMP) bytecode
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial and not slow"

# The tests start many processes of our own (services, the CLI, peers). Compiled
# once here, none of them compiles the project again: where PYTHONDONTWRITEBYTECODE is set
# each would, about 0.3 CPU-seconds a start (measured on `federation runs`).
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q -j0 agent_cards contracts coordinator member_kit remote_risk tests examples bench

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or anchor,
# or a page left out of the navigation, fails the build. Offline: no web fonts, no social cards.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The console's browser tests (tests/console) drive Debian's chromium through Playwright,
# never a browser downloaded by Playwright. Installed here when missing and run as root
# (as CI is); otherwise the tests say how to get it (and fail when CI is set).
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else \
		echo "the console's browser tests need Debian's chromium: apt-get install -y chromium"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Benchmarks (issue 7): figures against the a2a-sdk and FastAPI baselines, written to
# bench/results.json and bench/results.md; a few minutes. Not part of `make test`.
bench: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench

# 1,000 handoffs in flight against a slow remote; bounded to a few minutes, loopback only.
soak: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.soak

# The gRPC modules generated from agent_cards/bindings/grpc/a2a.proto (checked in).
proto: $(STAMP)
	$(BIN)/python -m agent_cards.bindings.regenerate

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .demo site

# Runs the A2A TCK (a local checkout, see README) against the conformance agent, a test fixture
# (tests/conformance_agent.py: no token checked, loopback only), once per binding.
TCK_DIR ?=
TCK_PYTHON ?= $(TCK_DIR)/.venv/bin/python
CONFORMANCE_PORT ?= 9999
CONFORMANCE_GRPC_PORT ?= 9998
TCK_TRANSPORTS ?= jsonrpc http_json grpc
# e.g. --resolve example.com=ADDRESS where the kit's example webhook host has no DNS
CONFORMANCE_FLAGS ?=
conformance: $(STAMP)
	@test -n "$(TCK_DIR)" && test -f "$(TCK_DIR)/run_tck.py" || \
		{ echo "set TCK_DIR to a local checkout of the A2A TCK (see README)"; exit 2; }
	PYTHONPATH=. $(BIN)/python -m tests.conformance_agent --port $(CONFORMANCE_PORT) \
		--grpc-port $(CONFORMANCE_GRPC_PORT) $(CONFORMANCE_FLAGS) & server=$$!; \
	trap 'kill $$server' EXIT; \
	for i in $$(seq 50); do \
		curl -sf http://127.0.0.1:$(CONFORMANCE_PORT)/.well-known/agent-card.json >/dev/null && break; \
		sleep 0.2; \
	done; \
	status=0; \
	for transport in $(TCK_TRANSPORTS); do \
		(cd "$(TCK_DIR)" && "$(TCK_PYTHON)" run_tck.py \
			--sut-host http://127.0.0.1:$(CONFORMANCE_PORT) --transport $$transport) || status=1; \
		cp "$(TCK_DIR)/reports/compatibility.json" "$(TCK_DIR)/reports/compatibility-$$transport.json"; \
	done; \
	$(BIN)/python -m tests.tck_figures $(foreach t,$(TCK_TRANSPORTS),"$(TCK_DIR)/reports/compatibility-$(t).json"); \
	exit $$status

# The same kit against the real remote_risk, which the kit can reach only without tokens:
# --insecure-anonymous (development only), a throwaway data directory, loopback.
RISK_PORT ?= 9990
RISK_GRPC_PORT ?= 9989
conformance-risk: $(STAMP)
	@test -n "$(TCK_DIR)" && test -f "$(TCK_DIR)/run_tck.py" || \
		{ echo "set TCK_DIR to a local checkout of the A2A TCK (see README)"; exit 2; }
	data=$$(mktemp -d); \
	$(BIN)/python -m remote_risk --port $(RISK_PORT) --grpc-port $(RISK_GRPC_PORT) \
		--insecure-anonymous --data-dir $$data & server=$$!; \
	trap 'kill $$server; rm -rf $$data' EXIT; \
	for i in $$(seq 50); do \
		curl -sf http://127.0.0.1:$(RISK_PORT)/.well-known/agent-card.json >/dev/null && break; \
		sleep 0.2; \
	done; \
	for transport in $(TCK_TRANSPORTS); do \
		(cd "$(TCK_DIR)" && "$(TCK_PYTHON)" run_tck.py \
			--sut-host http://127.0.0.1:$(RISK_PORT) --transport $$transport); \
		cp "$(TCK_DIR)/reports/compatibility.json" "$(TCK_DIR)/reports/risk-$$transport.json"; \
	done; \
	$(BIN)/python -m tests.tck_figures $(foreach t,$(TCK_TRANSPORTS),"$(TCK_DIR)/reports/risk-$(t).json")
