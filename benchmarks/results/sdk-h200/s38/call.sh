#!/bin/bash
# Session 38: issue 25's default-mode study on an H200, 16 fresh processes (s36/call.sh's protocol).
#   cd gpu/s38 && REQUIRE_H200=1 DEF_S=420 bash benchmarks/results/sdk-h200/s38/call.sh
# REQUIRE_H200=1 ends the call at once when the loan is not an H200 (an H100's processes are device-bound:
# its figure does not stand for the H200's launch-bound default mode).
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $name"
if [ "${REQUIRE_H200:-0}" = 1 ] && [[ "$name" != *H200* ]]; then echo "not an H200: nothing run"; exit 0; fi
SUITE_S=${SUITE_S:-0} BENCH_S=${BENCH_S:-0} RO_S=${RO_S:-0} DEF_S=${DEF_S:-420} bash benchmarks/results/sdk-h200/s36/call.sh
