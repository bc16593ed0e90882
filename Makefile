# Two commands, on a machine with only Python 3.11 and the package registries:
#   make run    the main job (every local system at the 1k-2k pace, then the reports)
#   make test   lint, type checks and the whole test suite (CI's command)
# Each bootstraps .venv itself and refreshes it when pyproject.toml changes. While working:
#   make check  lint, type checks and the fast tier of the tests, in under a minute

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test check lint bench bench-tools bench-peers clean chromium iproute2 hdrhistogram

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/evbench run --pace 1k-2k

# The report tests open real pages in Debian's headless Chromium.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the report tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# The cross-host tests build hosts from network namespaces with iproute2's `ip` (as root).
iproute2:
	@command -v ip >/dev/null 2>&1 || { \
	  echo "installing Debian's iproute2 for the cross-host tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null; }

# The HDR export's tests read its logs back with HdrHistogram's own HistogramLogProcessor (Java).
hdrhistogram:
	@test -f /usr/share/java/hdrhistogram.jar || { \
	  echo "installing Debian's libhdrhistogram-java for the HDR export tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libhdrhistogram-java >/dev/null; }

test: $(STAMP) chromium iproute2 hdrhistogram
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest

# The inner loop: the tests that need no Spark, no browser (Chromium) and no child process.
# tests/tiers.py sets each test's tier from what it uses (tests/e2e/, the `spark` fixture, the
# process fixtures, the e2e and browser markers), and under --fast fails a fast-tier test that
# starts a process anyway, so the tier stays right as tests are added.
check: lint
	$(BIN)/pytest --fast

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The tools the benchmarks compare against: hey (open-source Go load generator) and wrk.
bench-tools:
	@command -v hey >/dev/null 2>&1 && command -v wrk >/dev/null 2>&1 || { \
	  echo "installing Debian's hey and wrk for the benchmarks"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hey wrk >/dev/null; }

# DuckDB, the analysis benchmark's peer: a benchmark-only dependency (pyproject's [bench]).
bench-peers: $(STAMP)
	@$(BIN)/python -c "import duckdb" 2>/dev/null || $(BIN)/python -m pip install --quiet -e '.[bench]'

bench: $(STAMP) bench-tools bench-peers
	$(BIN)/python benchmarks/sender_rate.py --repeats 3
	$(BIN)/python benchmarks/sender_stuck.py
	$(BIN)/python benchmarks/receiver_rate.py
	$(BIN)/python benchmarks/fleet_rate.py --repeats 3
	$(BIN)/python benchmarks/search_known.py
	$(BIN)/python benchmarks/clock_skew.py --repeats 3
	$(BIN)/python benchmarks/analysis_scale.py --tiny --scales 1,2,4 --repeats 3 --breakdown

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
