# The two commands of the README:
#   make serve   index a notes folder (KB=path; without KB, the shipped example notes: --examples) and serve it over MCP
#   make test    run the whole test suite (it installs the pinned MCP test clients through scripts/install-node-tools)
#   make bench   run a benchmark pass and write docs/benchmarks.md and its charts (docs/benchmarks/*.png) from it;
#                SCALE=100000 adds a 100k-chunk step to the 1k / 10k ladder (not run by CI: it takes a while)
# Both create .venv and install groove into it when needed.

PYTHON ?= python3
VENV   ?= .venv
KB     ?=
SCALE  ?=
BIND   ?= 127.0.0.1:3100
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

, := ,
.PHONY: serve test install node-tools bench bench-each clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,bench]'
	touch $(STAMP)

install: $(STAMP)

# The MCP conformance suite, the Inspector CLI and Node 22, pinned (the tests call this script themselves).
node-tools:
	scripts/install-node-tools

serve: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/groove serve $(if $(KB),--kb "$(KB)",--examples) --transport http --bind "$(BIND)"

test: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q

bench: $(STAMP)
	HF_HUB_OFFLINE=1 nice -n 10 $(BIN)/python -m bench report $(if $(SCALE),--sizes 1000$(,)10000$(,)$(SCALE)) --invoked-as "make bench$(if $(SCALE), SCALE=$(SCALE))"

# Every bench once with its default sizes, printed (no report written).
bench-each: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m bench

clean:
	rm -rf $(VENV) build *.egg-info

# Debian's chromium + chromium-driver for the web view's browser test (tests/test_ui.py calls this script itself
# when they are missing; apt-get as root, else the browser tests skip saying why).
.PHONY: browser
browser:
	scripts/install-browser
