# Two commands for a fresh machine: `make demo` and `make test` (both set everything up).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch. On a GPU machine: make setup TORCH=torch  (the CUDA build, see README)
TORCH ?= torch==2.13.0
EXTRAS ?= all

.PHONY: setup demo test test-all bench clean

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

test: setup
	$(PY) -m pytest

test-all: setup
	$(PY) -m pytest -m "not gpu"

bench: setup
	$(PY) benchmarks/bench_overhead.py

clean:
	rm -rf $(VENV) runs build *.egg-info
