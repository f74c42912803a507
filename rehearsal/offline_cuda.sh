#!/bin/bash
# The `paper` rehearsal on a CUDA machine that reaches no package index and has no DVC: the CUDA
# tests, then `rehearsal.run --without-dvc` at the paper's batches and precision, within a time budget.
#
#   WHEELS=.whl OUT=/tmp/out BUDGET=500 PIPELINES="root blackmamba masked_mixers manticore" bash rehearsal/offline_cuda.sh
#
# WHEELS: a folder of wheels for what the machine's Python lacks, installed into /tmp/site and put
# first on PYTHONPATH (2026-11-28, an image with torch 2.11 and transformers 5.17: datasets, dill,
# multiprocess, fsspec, huggingface_hub 2.x with httpx2, httpcore2, truststore, hf-xet, click, idna,
# anyio; transformers 5.23; lm-eval with evaluate, pytablewriter and its five helpers, chardet,
# pytz, rouge-score, nltk, defusedxml, sqlitedict, word2number, more-itertools).
# OUT: where the environment, the test log, the records and the stage logs go.
# PIPELINES, STAGES: rehearsal.run's --pipelines and --stages (default: all of them).
# BUDGET: seconds for the whole script; the rehearsal is stopped when they run out, and the records
# of the stages that finished are kept.
set -u
OUT=${OUT:-data/rehearsal/cuda}; BUDGET=${BUDGET:-3600}; T0=$(date +%s)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$WHEELS"/*.whl > "$OUT/install.log" 2>&1 || { tail -20 "$OUT/install.log"; exit 3; }
  export PYTHONPATH=/tmp/site:$PWD
fi
python3 - <<'PY' 2>&1 | tee "$OUT/env.txt"
import importlib, sys, torch
print(sys.version.split()[0], "torch", torch.__version__,
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "NO CUDA")
for name in ["pyarrow", "fsspec", "datasets", "transformers", "huggingface_hub", "lightning", "torchmetrics",
             "lm_eval", "tokenizers", "numpy", "scipy", "pandas", "psutil", "einops", "matplotlib"]:
    try:
        print(name, importlib.import_module(name).__version__)
    except Exception as err:
        print(name, "FAILED", type(err).__name__, err)
PY
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py > "$OUT/test_cuda.log" 2>&1
echo "test_cuda rc=$? at $(( $(date +%s) - T0 )) s"; tail -2 "$OUT/test_cuda.log"
# rehearsal.run copies the tree through git; a copy made without .git gets an index here.
git ls-files > /dev/null 2>&1 || { git init -q && git add -A; }
timeout $(( BUDGET - ($(date +%s) - T0) )) python3 -m rehearsal.run --without-dvc --no-readiness \
  --work /tmp/rehearsal_work --standins /tmp/rehearsal_standins --out "$OUT/records_cuda.json" \
  ${PIPELINES:+--pipelines $PIPELINES} ${STAGES:+--stages $STAGES} > "$OUT/rehearsal.log" 2>&1
echo "rehearsal rc=$? at $(( $(date +%s) - T0 )) s (124: stopped at the budget)"
grep -E " s, peak |rehearsal:" "$OUT/rehearsal.log"
tar czf "$OUT/logs.tgz" -C /tmp/rehearsal_work rehearsal_logs 2>/dev/null
