# DataFarm: `make demo` runs the main job, `make test` runs the tests; both set up what they need.
VENV ?= .venv
PY := $(VENV)/bin/python
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export LITELLM_LOCAL_MODEL_COST_MAP := True
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
# Test processes (pytest-xdist; 0 runs in this process). Most tests wait on a simulation, a server or a
# subprocess as much as they compute, so two processes use two cores: about 23 min here (one: 40+).
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

.PHONY: setup demo test test-fast bench doctor clean

setup:
	@bash scripts/setup.sh

demo: setup
	bash scripts/demo.sh

test: setup
	$(PYTEST)

test-fast: setup
	$(PYTEST) -m "not slow"

bench: setup
	$(PY) benchmarks/rig_speed.py

doctor: setup
	$(VENV)/bin/datafarm doctor

clean:
	rm -rf out .pytest_cache
