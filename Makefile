# trtconv: `make demo` and `make test` each work alone on a fresh clone.
#
# Two ends of the supported range, each in its own environment:
#   .venv         the newest TensorFlow this Python has (2.21: NumPy 2, Keras 3.15): `make test`
#   .venv-oldest  TensorFlow 2.17 (the last with TF-TRT), NumPy 1.26, tf-keras 2.17:
#                 `make test-oldest`
# Both serve: the `serve` extra and Triton's server from PyTriton's wheel, installed without its
# dependencies (its numpy<2 pin would downgrade the newest end:
# trtconv/serving/server/triton_install.py).
# .ci/run runs both.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OLDEST := .venv-oldest

.PHONY: install demo test test-quick test-tensorflow test-oldest lint docs bench clean

install: $(STAMP)

# uv installs into the venv (which keeps its own pip): it downloads, unpacks and compiles in
# parallel, about 25 s from nothing where pip took 57-62 s from its cache on 2 cores, and
# resolves the same versions. uv reads no pip.conf: where it cannot reach an index (a mirror
# only pip is configured for), pip installs instead.
UV_INSTALL = $(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode
# dev-text (keras-hub) installs at the newest end only (pyproject.toml says why).
EXTRAS     ?= .[tensorflow,cpu,dev,dev-text,openvino,serve]
# The wheel that carries Triton's server (trtconv/serving/server/triton_install.py: TRITON_WHEEL).
TRITON_WHEEL := nvidia-pytriton==0.7.0
# What the environment must hold besides the extras (the oldest end pins TensorFlow 2.17).
PINS       ?=

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip "uv>=0.9"
	$(UV_INSTALL) -e "$(EXTRAS)" $(PINS) || $(BIN)/pip install --quiet -e "$(EXTRAS)" $(PINS)
	$(UV_INSTALL) --no-deps "$(TRITON_WHEEL)" || $(BIN)/pip install --quiet --no-deps "$(TRITON_WHEEL)"
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

# pytest-xdist workers; `serial` tests still run alone (tests/helpers/tiers.py). loadscope keeps a
# module's tests on one worker, so that its module-scoped fixtures are built once.
JOBS ?= 2
XDIST = -n $(JOBS) --dist loadscope

# The tests that import no TensorFlow; one that does fails the run (tests/helpers/tiers.py).
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

# The oldest end: the TensorFlow tier on TensorFlow 2.17 and NumPy 1.26, serving included,
# without dev-text (pyproject.toml says why). Lint and the quick tier import no TensorFlow and run
# in `make test`.
test-oldest:
	@$(MAKE) --no-print-directory VENV=$(OLDEST) EXTRAS=".[tensorflow,cpu,dev,openvino,serve]" \
	  PINS='"tensorflow==2.17.*"' test-tensorflow

demo: install
	bash examples/demo.sh

bench: install
	bash examples/bench.sh

clean:
	rm -rf $(VENV) $(OLDEST) build dist .pytest_cache .mypy_cache .ruff_cache models/demo
