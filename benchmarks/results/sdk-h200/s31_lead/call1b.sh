#!/bin/bash
# Session 31, the one call a scarce loan allows (a clean export of main in gpu/s31, the run tool carrying it):
#   cd gpu/s31 && bash benchmarks/results/sdk-h200/s31_lead/call1b.sh
# (1) bundles, kernel evidence and compile-time provider probes on CUDA (bundle-h200/s31_walk.sh, no fault suite);
# (2) the kernel suite on CUDA with memcheck beside it; (3) the flush's tail after the device, reduce-overhead.
ROOT=$PWD
timeout ${WALK_S:-250} env SUITE=0 bash benchmarks/results/bundle-h200/s31_walk.sh > "$OUT/walk.log" 2>&1
echo "walk rc=$?"; grep -E "^== |rc=|error:|verified|accuracy|Error|FAILED|passed|failed|kernel evidence" "$OUT/walk.log" | head -60
SUITE_S=${SUITE_S:-190} MC_S=${MC_S:-150} FAULTS_S=0 bash benchmarks/results/sdk-h200/s31_lead/call2.sh 2>&1 | head -40
export PYTHONPATH=/tmp/site:/tmp/ns31 PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
cd "$ROOT/benchmarks"
timeout ${DIAG_S:-100} python3 results/sdk-h200/s31_lead/diag_tail.py --mode reduce-overhead --reps ${REPS:-20} 2>&1 | grep -v Warning | tee "$OUT/diag_tail.log"
