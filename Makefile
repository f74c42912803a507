# The two commands of the README: `make repro` and `make test`.
# Both create .venv on first use and install the pinned environment; later runs skip the
# install unless pyproject.toml or the lock file changed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXTRAS ?= dev
comma := ,
empty :=
space := $(empty) $(empty)
# One stamp per set of extras, so asking for other extras installs them.
STAMP := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
LOCK := requirements/constraints.txt
# The `gpu` extra's packages compile CUDA code against the installed torch, which pip's build
# isolation hides from them (mamba-ssm's setup.py imports torch): they are installed last, without
# it. Read from pyproject.toml's `gpu` extra, each quoted for the shell.
GPU_PACKAGES = $(shell $(PYTHON) -c 'import tomllib; print(" ".join(repr(p) for p in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["gpu"]))')
BASE_EXTRAS := $(subst $(space),$(comma),$(filter-out gpu,$(subst $(comma),$(space),$(EXTRAS))))

export DVC_NO_ANALYTICS := 1
# Stage commands in dvc.yaml call `python`: make it the project's interpreter.
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: install repro smoke exp-show test test-pipeline test-numerics test-slow notebooks rehearse bench bench-gpu lock clean-venv

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first and pinned exactly: an unpinned resolve would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -c $(LOCK) -e ".[$(BASE_EXTRAS)]"
	$(if $(filter gpu,$(subst $(comma),$(space),$(EXTRAS))),$(BIN)/python -m pip install --quiet setuptools wheel ninja \
	    && $(BIN)/python -m pip install --no-build-isolation $(GPU_PACKAGES))
	touch $(STAMP)

install: $(STAMP)

# Every pipeline: the root one and each paper's papers/<paper>/dvc.yaml; then the claims pages
# from the papers' ledgers (not a DVC stage: see common/claims/page.py).
repro: $(STAMP)
	$(BIN)/dvc repro --all-pipelines
	$(BIN)/python -m common.claims.page

# One paper's pipeline (PAPER=blackmamba, manticore, masked_mixers or root) at `smoke`, in a throwaway
# copy under data/smoke/ that leaves the checkout untouched (common/smoke.py).
smoke: $(STAMP)
	$(BIN)/python -m common.smoke $(PAPER)

# One paper's experiments (`dvc exp run`) as a table that fits a screen: a column per experiment, a row
# per headline metric of its ledger, and the params each changed (common/exp_table.py).
exp-show: $(STAMP)
	$(BIN)/python -m common.exp_table $(PAPER)

# One pytest worker per core (pytest-xdist); each keeps to one torch thread (tests/conftest.py).
TEST_WORKERS ?= 2

# `make test`: unit, oracle, ledger and contract tests, a few minutes. `make test-pipeline`: the tests
# marked `pipeline`, which run stages, whole pipelines, worker pools and subprocesses end to end.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

test-pipeline: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "pipeline and not slow"

# The tests that check numbers against an oracle (blocks, models, the MoE router, layers against
# Hugging Face's) again on torch's narrowest kernels, as on a CPU with neither AVX2 nor AVX-512: an
# assertion that holds only by one CPU's rounding fails here on any machine. CI runs it after `test`.
NUMERICS_TESTS := tests/test_blocks.py tests/test_block_options.py tests/test_masked_mixer.py tests/test_moe.py \
	tests/test_mamba.py tests/test_hyena.py tests/test_hf_layers.py tests/test_lm.py tests/test_blackmamba_model.py \
	tests/test_masked_mixers_models.py tests/test_masked_mixers_expansion.py tests/test_manticore_hybrid.py \
	tests/test_manticore_vocabulary.py tests/test_ledger.py tests/test_blackmamba_report.py

test-numerics: $(STAMP)
	ATEN_CPU_CAPABILITY=default $(BIN)/python -m pytest -q -n $(TEST_WORKERS) $(NUMERICS_TESTS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

# Execute every notebook on the committed results and save it with its outputs, which are committed
# (tests/test_notebooks.py fails when they no longer match the results).
notebooks: $(STAMP)
	cd notebooks && ../$(BIN)/jupyter nbconvert --to notebook --execute --inplace *.ipynb

# The `paper` profile end to end on CPU, at the paper's shapes, on local stand-ins for the Hub, in a
# throwaway copy under data/rehearsal/ (committed results and locks are left alone), in batches of 2 rows
# and fp32 (rehearsal/README.md says why). It rewrites its records (rehearsal/records.json) and the READMEs'
# readiness tables, which are committed. See rehearsal/run.py.
# PAPER=<paper> rehearses that paper's pipeline (after the root one) alone.
rehearse: $(STAMP)
	$(BIN)/python -m rehearsal.run --batch-rows 2 --precision 32-true $(if $(PAPER),--pipelines $(PAPER))

# On a CUDA machine: the GPU benchmark and the `paper` networks' training steps (benchmarks/README.md).
bench-gpu:
	$(MAKE) install EXTRAS=dev,gpu
	$(BIN)/python -m benchmarks.cuda_kernels
	$(BIN)/python -m rehearsal.gpu_steps

# CPU benchmarks against named peers; each writes benchmarks/results/<name>.json, and the pages'
# tables are generated from those files.
bench:
	$(MAKE) install EXTRAS=dev,bench
	for b in mamba_speed moe_speed mixer_memory generation blackmamba_step task_speed task_learnability \
	  manticore_overhead parallel_runs allocator; do $(BIN)/python -m benchmarks.$$b || exit 1; done
	$(BIN)/python -m benchmarks.page

# Regenerate the lock file from a fresh resolve (maintainers only).
lock:
	rm -rf /tmp/lock-venv && $(PYTHON) -m venv /tmp/lock-venv
	/tmp/lock-venv/bin/python -m pip install --quiet torch==2.13.0
	/tmp/lock-venv/bin/python -m pip install --quiet -e ".[dev,bench]"
	/tmp/lock-venv/bin/python -m pip freeze --exclude-editable | sed 's/+cpu$$//' > $(LOCK)

clean-venv:
	rm -rf $(VENV)
