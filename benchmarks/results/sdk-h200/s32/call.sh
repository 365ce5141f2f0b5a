#!/bin/bash
# Session 32, H200, one short call: the release-bundle walk on CUDA (s31_walk.sh, no suite), the compile caches
# keyed on kernel providers (fresh processes, torch 2.11), then the SDK flush-tail diagnosis.
ROOT=$PWD
timeout ${WALK_S:-170} env SUITE=0 bash benchmarks/results/bundle-h200/s31_walk.sh > "$OUT/walk.log" 2>&1
echo "walk rc=$?"; grep -E "^== |rc=|error:|verified|accuracy|Error|FAILED|passed|failed|kernel evidence" "$OUT/walk.log" | head -50
mkdir -p /tmp/ns32 && ln -sfn "$ROOT" /tmp/ns32/inferensics
export PYTHONPATH=/tmp/site:/tmp/ns32:$ROOT PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off TORCHINDUCTOR_CACHE_DIR=/tmp/salt32
echo "== cache keyed on providers (expect '2.0 0', '2.0 1', '3.0 0')"
for p in twice_fresh twice_fresh thrice_fresh; do timeout 60 python3 -m tests.kernels.planted_providers $p 2>&1 | tail -1; done
cd "$ROOT/benchmarks"
timeout ${DIAG_S:-60} python3 results/sdk-h200/s31_lead/diag_tail.py --mode reduce-overhead --reps ${REPS:-10} 2>&1 | grep -v Warning | tee "$OUT/diag_tail.log"
