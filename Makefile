# The two commands of the README:
#   make serve   index a notes folder (KB=path; without KB, the shipped example notes: --examples) and serve it over MCP
#                at http://$(BIND)/mcp (BIND=HOST:PORT, default 127.0.0.1:3100; GROOVE_STARTED_BY tells groove a busy
#                port's error is to name BIND=, not --bind)
#   make test    run the whole test suite (it installs the pinned MCP test clients through scripts/install-node-tools):
#                the fast tier first (make test-fast: no real model, child process, browser or npm tool), then the rest
#   make lint    ruff (lint and format check) and mypy over groove/ and bench/, as configured in pyproject.toml
#   make bench   run a benchmark pass and write docs/benchmarks.md and its charts (docs/benchmarks/*.png) from it;
#                SCALE=100000 adds a 100k-chunk step to the 1k / 10k ladder (not run by CI: it takes a while)
# Both create .venv and install groove into it when needed: `make serve` only what serving needs
# (pip install -e .), `make test`, `make lint` and `make bench` that plus the [test], [bench] and [lint] extras
# (selenium, hypothesis, pytest, the document parsers, matplotlib, ruff, mypy). One stamp file each, so either
# order works.

PYTHON ?= python3
VENV   ?= .venv
KB     ?=
SCALE  ?=
BIND   ?= 127.0.0.1:3100
BIN    := $(VENV)/bin
STAMP_SERVE := $(VENV)/.installed-serve
STAMP_TEST  := $(VENV)/.installed-test

, := ,
.PHONY: serve test test-fast lint install install-test node-tools bench bench-each clean

# groove and what it needs at run time.
$(STAMP_SERVE): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e .
	touch $(STAMP_SERVE)

# The same plus the test, bench and lint extras (a superset: it stands for the serve stamp too).
$(STAMP_TEST): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,bench,lint]'
	touch $(STAMP_SERVE) $(STAMP_TEST)

install: $(STAMP_SERVE)
install-test: $(STAMP_TEST)

# The MCP conformance suite, the Inspector CLI and Node 22, pinned (the tests call this script themselves).
node-tools:
	scripts/install-node-tools

serve: $(STAMP_SERVE)
	HF_HUB_OFFLINE=1 GROOVE_STARTED_BY="make serve" $(BIN)/groove serve $(if $(KB),--kb "$(KB)",--examples) --transport http --bind "$(BIND)"

# The fast tier: the tests that need no real model, no child process, no browser, no npm tool and no PostgreSQL
# server. tests/conftest.py marks the others from the fixtures they use (real_model, spawn, browser, npm_tools,
# postgres: tests/support/tiers.py).
# `make test` runs it first, so a broken build fails in minutes, then the rest.
FAST := not model and not process and not browser and not npm and not postgres

test-fast: $(STAMP_TEST)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m "$(FAST)"

test: test-fast
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q -m "not ($(FAST))"

# ruff's lint rules, ruff's formatter (checked, never applied) and mypy, over the package and the benches, and every
# `# noqa: CODE` / `# type: ignore[code]` saying why after it; all four run, and any finding fails the target.
# `$(BIN)/ruff format groove` applies the formatter.
LINTED := groove bench
UNEXPLAINED := '\#[[:space:]]*(noqa(:[[:space:]]*[A-Z0-9, ]+)?|type:[[:space:]]*ignore(\[[^]]*\])?)[[:space:]]*$$'
lint: $(STAMP_TEST)
	@status=0; \
	echo "ruff check $(LINTED)"; $(BIN)/ruff check $(LINTED) || status=1; \
	echo "ruff format --check $(LINTED)"; $(BIN)/ruff format --check $(LINTED) || status=1; \
	echo "mypy $(LINTED)"; $(BIN)/mypy $(LINTED) || status=1; \
	echo "every noqa / type: ignore says why"; \
	if grep -rnE --include='*.py' $(UNEXPLAINED) $(LINTED); then \
		echo "each line above silences a finding without saying why: add the reason after it"; status=1; fi; \
	exit $$status

bench: $(STAMP_TEST)
	HF_HUB_OFFLINE=1 nice -n 10 $(BIN)/python -m bench report $(if $(SCALE),--sizes 1000$(,)10000$(,)$(SCALE)) --invoked-as "make bench$(if $(SCALE), SCALE=$(SCALE))"

# Every bench once with its default sizes, printed (no report written).
bench-each: $(STAMP_TEST)
	HF_HUB_OFFLINE=1 $(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info

# Debian's chromium + chromium-driver for the web view's browser test (tests/test_ui.py calls this script itself
# when they are missing; apt-get as root, else the browser tests skip saying why).
.PHONY: browser
browser:
	scripts/install-browser
