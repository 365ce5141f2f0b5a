#!/bin/bash
# call1b.sh cut to what a nearly spent budget allows: the walk (no demo bundles' second run), then the flush tail.
ROOT=$PWD
timeout ${WALK_S:-240} env SUITE=0 bash benchmarks/results/bundle-h200/s31_walk.sh > "$OUT/walk.log" 2>&1
echo "walk rc=$?"; grep -E "^== |rc=|error:|verified|accuracy|Error|FAILED|passed|failed|kernel evidence" "$OUT/walk.log" | head -60
mkdir -p /tmp/ns31 && ln -sfn "$ROOT" /tmp/ns31/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns31 PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
cd "$ROOT/benchmarks"
timeout ${DIAG_S:-110} python3 results/sdk-h200/s31_lead/diag_tail.py --mode reduce-overhead --reps ${REPS:-15} 2>&1 | grep -v Warning | tee "$OUT/diag_tail.log"
