# trtconv: `make demo` and `make test` each work alone on a fresh clone.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-quick test-tensorflow lint docs bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[cpu,dev,openvino,serve]"
	touch $(STAMP)

lint: install
	$(BIN)/ruff check trtconv tests
	$(BIN)/ruff format --check trtconv tests
	$(BIN)/mypy
	$(BIN)/python -m trtconv.cli.reference --check docs/cli.md

# docs/cli.md is generated from the CLI itself: never edit it by hand.
docs: install
	$(BIN)/python -m trtconv.cli.reference > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md \
	  || { rm -f docs/cli.md.tmp; exit 1; }

# pytest-xdist workers; `serial` tests still run alone (tests/tiers.py). loadscope keeps a
# module's tests on one worker, so that its module-scoped fixtures are built once.
JOBS ?= 2
XDIST = -n $(JOBS) --dist loadscope

# The tests that import no TensorFlow; one that does fails the run (tests/tiers.py).
test-quick: install
	$(BIN)/pytest -q --quick $(XDIST)

# The tests that import TensorFlow (the quick tier's guard keeps the two tiers apart).
test-tensorflow: install
	$(BIN)/pytest -q -m tensorflow $(XDIST)

# Everything: lint and both tiers, as three jobs at once. The TensorFlow tier leaves the cores
# idle about 15% of its time (its tests wait on servers, worker processes and timeouts);
# lint and the quick tier fill that instead of adding their half-minute after it. Each output
# line stays whole; make fails when any of the three fails.
test: install
	@$(MAKE) --no-print-directory -j 3 --output-sync=line test-tensorflow test-quick lint

demo: install
	bash examples/demo.sh

bench: install
	bash examples/bench.sh

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache models/demo
