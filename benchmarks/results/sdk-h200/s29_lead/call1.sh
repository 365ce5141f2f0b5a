#!/bin/bash
# Session 29, call 1: the host SDK's CUDA tests on current main (crash journal included), then the reduce-overhead study.
set -u
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
( cd "$H" && PYTHONPATH=/tmp/site:$H timeout 200 python3 -m pytest -q -ra -p no:cacheprovider tests/collector/host/test_fingerprint.py tests/collector/host/test_graph_counts.py \
  --deselect tests/collector/host/test_fingerprint.py::test_tracker_counts_an_output_modified_in_place > "$OUT/gputest.log" 2>&1; echo "pytest rc=$?" >> "$OUT/gputest.log" )
tail -6 "$OUT/gputest.log"
STEPS=ro PROCS_RO=16 BUDGET_RO=${BUDGET_RO:-150} SEED_RO=291 bash "$D/run.sh"
