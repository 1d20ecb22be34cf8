# One entry point for people and CI. Python 3.11+ and a JDK 17+ are the only prerequisites.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint demo demo-orders bench clean check-java

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

check-java: $(STAMP)
	@$(BIN)/python -m reconciler.engine.java

test: $(STAMP) check-java
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

demo: $(STAMP) check-java
	$(BIN)/python examples/grades/demo.py

bench: $(STAMP) check-java
	$(BIN)/python bench/plan_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache examples/*/.reconcile

demo-orders: $(STAMP) check-java
	$(BIN)/python examples/orders/demo.py
