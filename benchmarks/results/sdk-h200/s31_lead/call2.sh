#!/bin/bash
# Session 31, call 2 (a clean export of main in gpu/s31b, the run tool carrying it):
#   cd gpu/s31b && bash benchmarks/results/sdk-h200/s31_lead/call2.sh
# The kernel suite on CUDA (compile-time probes of Triton providers included: tests/kernels/test_compiled_quarantine.py),
# memcheck beside it, then replay's planted-fault suite on CUDA.
set -o pipefail
export PYTHONUNBUFFERED=1
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns31 && ln -sfn "$ROOT" /tmp/ns31/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns31:$ROOT
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
{ nvidia-smi --query-gpu=name,driver_version --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$OUT/env.txt" 2>&1
timeout ${MC_S:-150} python3 -m pytest -q -p no:cacheprovider "${W[@]}" tests/kernels/test_memcheck.py > "$OUT/memcheck.log" 2>&1 &
MC=$!
TORCHINDUCTOR_COMPILE_THREADS=1 timeout ${SUITE_S:-230} python3 -m pytest -q -p no:cacheprovider -n 12 "${W[@]}" tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py --ignore=tests/kernels/test_public_api.py \
  --ignore=tests/kernels/test_memcheck.py > "$OUT/kernels.log" 2>&1
echo "kernels rc=$?"; tail -15 "$OUT/kernels.log"
wait $MC; echo "memcheck rc=$?"; grep -E "ERROR SUMMARY|passed|failed" "$OUT/memcheck.log" | tail -3
[ "${FAULTS_S:-180}" = 0 ] || INFERENSICS_REPLAY_DEVICE=cuda timeout ${FAULTS_S:-180} python3 -m pytest -q -p no:cacheprovider -n 8 "${W[@]}" \
  tests/replay/test_fault_suite.py > "$OUT/faults.log" 2>&1
echo "faults rc=$?"; tail -15 "$OUT/faults.log"
