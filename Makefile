# recstack developer entry points. `make demo` and `make test` set up .venv on first use.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.recstack-setup-v5
PIP := $(BIN)/python -m pip install --disable-pip-version-check -q

.PHONY: setup demo test lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) torch==2.13.0
	$(PIP) fbgemm-gpu-cpu==1.8.0 tensordict torchmetrics==1.0.3 pyre-extensions tqdm
	$(PIP) --no-deps torchrec==1.8.0
	# public recommendation libraries (tests/test_public_models.py): --no-deps, their own requirements
	# could pull another torch; the pure-Python and wheel deps they import are pinned here instead
	$(PIP) scikit-learn==1.9.1 scipy==1.17.1 joblib==1.6.0 threadpoolctl==3.8.0 narwhals==2.28.0
	$(PIP) --no-deps deepctr-torch==0.3.0 torch-rechub==0.9.0 torchfm==0.7.0
	# results store, serving latency histograms, trace decoding (core), Ray (optional sweep executor)
	$(PIP) duckdb==2.0.1 hdrhistogram==0.10.8 msgspec==0.23.0 ray==2.60.0
	$(PIP) -e '.[dev,ray]'
	bash scripts/install-system.sh
	@touch $(STAMP)

demo: setup
	$(BIN)/recstack demo

lint: setup
	$(BIN)/ruff check src tests benchmarks

test: setup lint
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python benchmarks/bench_profiler.py --vs-torch-profiler
	$(BIN)/python benchmarks/bench_public_models.py
	$(BIN)/python benchmarks/bench_gather.py

clean:
	rm -rf $(VENV) build dist .pytest_cache
