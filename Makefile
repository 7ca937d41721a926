# Two commands for a fresh machine: `make demo` and `make test` (both set everything up).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch. On a GPU machine: make setup TORCH=torch  (the CUDA build, see README)
TORCH ?= torch==2.13.0
EXTRAS ?= all

.PHONY: setup floor-deps floor-setup demo test test-integration test-all test-floor bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

demo: setup
	$(VENV)/bin/rewardkit score data/demo/rollouts.jsonl --config data/demo/reward.yaml \
	    --reference-field reward_model.ground_truth -o runs/demo/scored.jsonl --overwrite

# Two workers, a file to a worker, in the order tests/conftest.py gives (LONGEST_FIRST):
# without --no-loadscope-reorder, xdist re-sorts the files by how many tests each holds, and the
# long files of few tests start last, one running alone at the end.
test: setup
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder

# What `make test` leaves out (pyproject's `integration` marker): a local Ray cluster, every part
# of the GPU script on the CPU. A fifth of the default suite's CPU between them; CI runs them here.
# Only the files that mark a test `integration` are collected (each worker collects what it is given).
test-integration: setup
	$(PY) -m pytest -n 2 --dist loadfile -m integration $$(grep -l "mark.integration" tests/test_*.py)

# The trainer on the oldest transformers the train extra allows (pyproject: transformers>=4.45).
FLOOR_VENV ?= .venv-floor
floor-setup: $(FLOOR_VENV)/.installed

# The part of it that does not read the checkout (CI builds it beside `make setup`).
floor-deps: $(FLOOR_VENV)/.deps

$(FLOOR_VENV)/.deps: Makefile
	$(PYTHON) -m venv $(FLOOR_VENV)
	$(FLOOR_VENV)/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(FLOOR_VENV)/bin/python -m pip install -q "$(TORCH)" pytest pytest-timeout pytest-xdist
	touch $@

$(FLOOR_VENV)/.installed: $(FLOOR_VENV)/.deps pyproject.toml setup.py
	$(FLOOR_VENV)/bin/python -m pip install -q -e ".[train]"
	$(FLOOR_VENV)/bin/python -m pip install -q "transformers==4.45.2" "peft==0.13.2"
	touch $@

test-floor: floor-setup
	$(FLOOR_VENV)/bin/python -c "import transformers, peft; print('transformers', transformers.__version__, 'peft', peft.__version__)"
	$(FLOOR_VENV)/bin/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests/test_trainer_*.py

test-all: setup
	$(PY) -m pytest -m "not gpu"

bench: setup
	$(PY) benchmarks/bench_overhead.py

clean:
	rm -rf $(VENV) $(FLOOR_VENV) runs build *.egg-info
