# Two commands a newcomer needs: `make demo` and `make test`. Each does the whole set-up.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The editable install maps optimizer.rules and optimizer.cost to the folders rules/ and cost/ (pyproject's
# package-dir) through an import hook, and setuptools says so in a 9-line warning on every install: the
# hook is what we want, so the warning is silenced for that one command.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

.PHONY: install java demo demo-install test test-connect lint fuzz fuzz-hostile mutate bench bench-backend explain-screenshot clean

# System packages: Java for Spark, Graphviz's dot for `explain --format svg|html`, Chromium for the tests
# that open the HTML page in a browser.
java:
	@missing=""; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	command -v dot >/dev/null 2>&1 || missing="$$missing graphviz"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 2; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(EDITABLE) $(PY) -m pip install -q -e '.[test,bench]'
	touch $(STAMP)

install: java $(STAMP)

# Two worker processes (pytest-xdist), each with its one SparkSession; a test file runs whole on one worker
# (--dist loadfile), so its module fixtures (TPC-DS's plans, a Spark server) run once; the longest files go
# first (tests/conftest.py). Spark's JVM waits between the stages of a small query: on 2 cores the two
# overlap.
#
# Every JVM the tests start (their Spark sessions, the CLI's, the servers) reads TEST_JVM: the suite runs
# thousands of queries of a few rows, for which C2's compiles, G1's threads and Spark's default memory page
# (up to 64 MiB, allocated and zeroed by each hash aggregate and join task) cost more CPU than they save.
# Spark's JVM CPU over 60 TPC-DS SF 0.01 plans: 142 s with the defaults, 66 s with these. They change
# no answer: a collector, a JIT tier, and the size of the pages Spark allocates its memory in. The two
# workers' own sessions live for the whole run: they compile with C2 after all (tests/conftest.py).
# Besides, they read Spark's classes from a class-data-sharing archive made once under .cache/jvm
# (testing/jvm_archive.py: a CLI `run` starts in 10 s instead of 16); without one, as before.
TEST_JVM_OPTIONS := -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dspark.buffer.pageSize=1m
TEST_JVM_ARCHIVE := JDK_JAVA_OPTIONS="$(TEST_JVM_OPTIONS)" $(PY) -m testing.jvm_archive
TEST_JVM := JDK_JAVA_OPTIONS="$(TEST_JVM_OPTIONS) $$($(TEST_JVM_ARCHIVE))"

test: install
	$(VENV)/bin/ruff check optimizer rules cost workloads testing tests benchmarks
	$(TEST_JVM) $(PY) -m pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadfile --no-loadscope-reorder

# Every Spark test of the suite on a Spark Connect session (a server the tests start on 127.0.0.1).
test-connect: install
	$(TEST_JVM) SUBSTRAIT_OPT_TEST_SPARK=connect $(PY) -m pytest -q -p no:cacheprovider -m spark

# `make demo` installs only what the demo needs: Java, the package with its SQL producers (the datafusion
# and duckdb extras: plans, and the TPC-H data); no test or bench extras, no Graphviz or Chromium. A venv
# `make install` made (and kept current) has all of it already.
DEMO_STAMP := $(VENV)/.demo-installed

demo-install:
	@command -v java >/dev/null 2>&1 || { \
	  echo "installing: openjdk-17-jre-headless"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
	@if [ ! -f $(STAMP) ] || [ pyproject.toml -nt $(STAMP) ]; then $(MAKE) --no-print-directory $(DEMO_STAMP); fi

$(DEMO_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=python3"; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(EDITABLE) $(PY) -m pip install -q -e '.[datafusion,duckdb]'
	touch $(DEMO_STAMP)

demo: demo-install
	$(PY) -m workloads.demo

fuzz: install fuzz-hostile
	$(PY) -m testing.fuzz --long

# Mutation score of the fuzzer: 12 planted bugs, one campaign each; writes docs/benchmarks/mutation.json
mutate: install
	$(PY) -m testing.mutate $(ARGS)

# TPC-H SF 1 (three producers, ~21 min), then TPC-DS SF 1 (DataFusion's 99 plans and DuckDB's ~47, ~45 min); each writes
# docs/benchmarks/. e.g. make bench ARGS='--scale 0.01 --queries 3,5' TPCDS_ARGS='--scale 0.1 --reps 5 --name tpcds_sf0.1'
TPCDS_ARGS ?=
bench: install
	$(PY) benchmarks/tpch.py --reps 5 $(ARGS)
	$(PY) benchmarks/tpch.py --suite tpcds --scale 1 --reps 3 --name tpcds_sf1 $(TPCDS_ARGS)

# The backend against Spark SQL (overhead and execution), e.g. make bench-backend ARGS='--scale 1'
bench-backend: install
	$(PY) benchmarks/backend.py $(ARGS)

# docs/explain-q5.png: `explain --format html --analyze` of TPC-H Q5 (SF 0.01) in headless Chromium.
explain-screenshot: install
	$(PY) -m workloads.browser --out docs/explain-q5.png

clean:
	rm -rf $(VENV) .cache

# Hostile plans (docs/security.md): 2,000 inputs, each a right answer or exit 2/3 with one line.
fuzz-hostile: install
	$(PY) -m testing.hostile --inputs 2000 --spark 40 --subprocess 60
