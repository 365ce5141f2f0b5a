#!/bin/bash
# Session 45, one call on the lent GPU (main exported as gpu/s45 with .whl, carried by the run tool):
#   cd gpu/s45 && DEF_S=420 bash benchmarks/results/sdk-h200/s45/call.sh       # call 1
#   cd gpu/s45 && FP_S=0 RO_S=400 bash benchmarks/results/sdk-h200/s45/call.sh   # call 2, same warm machine
#   REQUIRE_H200=1 ...: ends at once on another card
# After this session's host-SDK changes (delivery watch on the exporters, the journal kept until recovered rows are
# delivered, refusals read from the service's google.rpc.Status): the fingerprint's CUDA tests, then issue 25's
# default-mode study with session 36/38's protocol (16 fresh processes, blocks of 6 requests, A/A control) on whatever
# card came. On an H100 the default mode is device-bound (compare s36/call3_h100); on an H200 launch-bound (compare s38).
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
if [ "${REQUIRE_H200:-0}" = 1 ] && [[ "$name" != *H200* ]]; then echo "not an H200: nothing run"; exit 0; fi
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns && ln -sfn "$ROOT" /tmp/ns/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns:$ROOT
W=(-W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning")
{ date -u; nproc; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt"
[ "${FP_S:-120}" != 0 ] && timeout ${FP_S:-120} python3 -m pytest -q -rfE -p no:cacheprovider "${W[@]}" tests/collector/host/test_fingerprint.py \
  -k "kernel_matches_torch_ops_compiled or adds_no_device_synchronization or backlog_takes_per_row" > "$OUT/fingerprint_gpu.log" 2>&1; echo "fingerprint tests rc=$?"; tail -4 "$OUT/fingerprint_gpu.log"
STUDY=(--device cuda --hidden 4096 --layers 4 --tokens 8 --dtype bfloat16 --vocab 32000 --decode-steps 64
       --no-control --fork --reqs 4 --rounds 2 --warmup-rounds 1 --bursts 4 --interleave --blocks 16 --block-reqs 6 --aa)
cd "$ROOT/benchmarks"; export PYTHONPATH=$PYTHONPATH:$ROOT/benchmarks PYTORCH_NVML_BASED_CUDA_CHECK=1
if [ "${RO_S:-0}" != 0 ]; then
  TORCHINDUCTOR_COMPILE_THREADS=1 timeout $((RO_S + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --mode reduce-overhead --procs 16 \
    --seed ${SEED_RO:-451} --budget-s $RO_S --jsonl "$OUT/study_ro.jsonl" > "$OUT/study_ro.log" 2>&1
  echo "study ro rc=$?"; grep -A10 "^TARGETS" "$OUT/study_ro.log"
fi
if [ "${DEF_S:-0}" != 0 ]; then
  TORCHINDUCTOR_COMPILE_THREADS=1 timeout $((DEF_S + 40)) python3 bench_sdk_study.py "${STUDY[@]}" --mode default --procs 16 \
    --seed ${SEED_DEF:-452} --budget-s $DEF_S --jsonl "$OUT/study_default.jsonl" > "$OUT/study_default.log" 2>&1
  echo "study default rc=$?"; grep -A10 "^TARGETS" "$OUT/study_default.log"
fi
true
