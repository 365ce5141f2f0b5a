#!/bin/bash
# Session 22: the host SDK's CUDA-only tests (CI has no GPU) on current main, plus the kernel suite's fingerprint-adjacent files.
set -u
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"
  python3 -c "import pyarrow" 2>&1 | tail -1; } > "$OUT/env.txt" 2>&1
cd "$H"
timeout 300 python3 -m pytest -q -ra -p no:cacheprovider tests/collector/host/test_fingerprint.py tests/collector/host/test_graph_counts.py \
  --deselect tests/collector/host/test_fingerprint.py::test_tracker_counts_an_output_modified_in_place > "$OUT/gputest.log" 2>&1
echo "pytest rc=$?" >> "$OUT/gputest.log"
tail -25 "$OUT/gputest.log"
