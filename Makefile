# One entry point for people and CI. Python 3.11+, a JDK 17+ and Maven are the prerequisites.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test test-delta-rs test-fast test-nightly jars lint typecheck demo demo-orders demo-kafka bench bench-scale bench-step bench-streaming bench-micro-batch bench-preview bench-evolve bench-tpch bench-tpcds bench-breadth bench-view-tests bench-log-opens bench-local-fs bench-class-archive bench-execute bench-kafka bench-cli bench-warm clean check-java constraints

RUN_STAMP := $(VENV)/.installed-run

# The package and what it runs on, for the demo (no test or docs tooling).
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml $(RUN_STAMP)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

check-java: $(RUN_STAMP)
	@$(BIN)/python -m reconciler.engine.spark.java

# Delta Lake's Spark jars, and hadoop-aws with its AWS SDK (and SLF4J's log4j binding) for s3a://: fetched once
# with Maven (~/.m2) and copied
# to ~/.cache/pipeline-reconciler/jars (or $RECONCILE_JARS); see reconciler/engine/spark/jars.py.
jars: $(STAMP)
	@$(BIN)/python -m reconciler.engine.spark.jars > /dev/null

test: $(STAMP) check-java jars
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 -m "not nightly"

# The same suite on the delta-rs fallback (a session without Delta's jars) instead of the
# writer the product chooses, which `make test` runs (docs/clusters.md, "Which writer the
# tests run").
test-delta-rs: $(STAMP) check-java jars
	RECONCILE_DELTA_WRITER=delta-rs $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 -m "not nightly"

# The quick loop: every test that starts no Spark (no JVM, about 45 s on 2 cores); the
# `spark` marker says which do (tests/conftest.py fails an unmarked one that starts Spark).
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 -m "not spark"

# The long run `make test` leaves out (a nightly job's): the stories on a standalone cluster,
# over Spark Connect and through eight JVMs sharing a metastore, the other kill points, and the
# oracles again, the maintenance one with more random cases and steps (docs/development.md).
test-nightly: $(STAMP) check-java jars
	RECONCILE_ORACLE_EXAMPLES=8 RECONCILE_ORACLE_STEPS=3 \
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=15 -m "nightly or oracle"

lint: $(STAMP)
	$(BIN)/ruff check .

# mypy, configured in pyproject.toml ([tool.mypy]): strict on desired/, state/, plan/,
# support/ and state_backends/, the rest of the package and bench/ at a basic level (about a
# minute cold, seconds warm).
typecheck: $(STAMP)
	$(BIN)/mypy

# The demo's project stores its tables in a local folder: Delta's jars only, no AWS SDK.
demo: $(RUN_STAMP) check-java
	@$(BIN)/python -m reconciler.engine.spark.jars --project examples/grades > /dev/null
	$(BIN)/python examples/grades/demo.py

# The Kafka example: a broker of its own (Apache Kafka's jars from Maven Central), a topic in,
# a topic out, a change applied without reading the topic again.
demo-kafka: $(RUN_STAMP) check-java
	@$(BIN)/python -m reconciler.engine.spark.jars --project examples/kafka_orders > /dev/null
	$(BIN)/python examples/kafka_orders/demo.py

bench: $(STAMP) check-java jars
	$(BIN)/python bench/plan_bench.py

# A step of 1,000 rows on 1M and 16M rows, maintained and recomputed (several minutes).
bench-step: $(STAMP) check-java jars
	$(BIN)/python bench/step_bench.py

# The step bench's pipeline as a hand-written Structured Streaming job (foreachBatch) against
# the engine's maintained step, alternately in one process, 1M rows (about 20 minutes).
bench-streaming: $(STAMP) check-java jars
	$(BIN)/python bench/streaming_anchor.py

# A 1,000-row step as its user pays it, side by side on 4M rows: a one-shot `reconcile run`
# process, the continuous runner's step, a Structured Streaming micro-batch and a full
# recompute, from the input file's arrival, alternating (long at its default
# 4M rows; `--rows 200000 --steps 2` to try it).
bench-micro-batch: $(STAMP) check-java jars
	$(BIN)/python bench/micro_batch_bench.py

# The seed story's 2-row `reconcile execute` in a warm process (a few minutes).
bench-execute: $(STAMP) check-java jars
	$(BIN)/python bench/execute_bench.py

# Delta log opens per command on the orders example, with and without the kept versions.
bench-log-opens: $(STAMP) check-java jars
	$(BIN)/python bench/log_opens_bench.py

# The orders example's steps on local storage, with Hadoop's local file system and the forkless one.
bench-local-fs: $(STAMP) check-java jars
	$(BIN)/python bench/local_fs_bench.py

bench-class-archive: $(STAMP) check-java jars
	$(BIN)/python bench/class_archive_bench.py

# The CLI's start: --help, --version, validate and plan of the examples in fresh processes.
bench-cli: $(RUN_STAMP)
	$(BIN)/python bench/cli_bench.py

# execute + query + query on the seed story, each command its own JVM against a warm Spark.
bench-warm: $(STAMP) check-java jars
	$(BIN)/python bench/warm_spark_bench.py

# Kafka: 2M messages ingested and a view kept, against a hand-written batch job (a few minutes).
bench-kafka: $(STAMP) check-java jars
	$(BIN)/python bench/kafka_bench.py

# A data preview against the bootstrap it previews, on the seed story with 2M grades.
bench-preview: $(STAMP) check-java jars
	$(BIN)/python bench/preview_bench.py

# reconcile test on the examples against the embedded session's start (fresh processes).
bench-view-tests: $(STAMP) check-java jars
	$(BIN)/python bench/view_tests_bench.py

# A table change on 1M and 8M rows: evolved in place or renamed, against a rebuild.
bench-evolve: $(STAMP) check-java jars
	$(BIN)/python bench/evolve_bench.py

# The 22 TPC-H queries at scale 1: refresh steps maintained, recomputed and under auto (about an hour).
bench-tpch: $(STAMP) check-java jars
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/tpch_bench.py

# TPC-DS's query texts are not in this repository: TPCDS_QUERIES=<a folder of q*.sql>
bench-tpcds: $(STAMP) check-java jars
	$(BIN)/python bench/tpcds_bench.py --queries $(TPCDS_QUERIES)

# The breadth corpus (bench/breadth: 127 analytic views over a small star schema): how many
# are maintained, and every view equal to its query from scratch after a load and 2 steps.
bench-breadth: $(STAMP) check-java jars
	$(BIN)/python bench/breadth_bench.py

# Ingest 12M and 48M rows against bare Spark, storage over 30 steps, Spark Connect RSS
# (several minutes; see the script's docstring).
bench-scale: $(STAMP) check-java jars
	$(BIN)/python bench/scale_bench.py --connect 10000000

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache examples/*/.reconcile

demo-orders: $(STAMP) check-java jars
	$(BIN)/python examples/orders/demo.py

# The versions the suite ran with, for action.yml's pinned install.
constraints: $(STAMP)
	{ echo "# Versions the test suite ran with: action.yml installs the reconciler under these"; \
	  echo "# constraints, so a pull request's run never picks up a release nothing tested."; \
	  echo "# Regenerate after changing dependencies: make constraints"; \
	  $(BIN)/pip freeze --exclude-editable | grep -v '^pipeline-reconciler'; } > constraints.txt
