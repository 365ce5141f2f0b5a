#!/bin/bash
# session 37 call: eager Triton provider calls' host time, then the kernel suite (call.sh of s36)
export PYTHONUNBUFFERED=1 INFERENSICS_JOURNAL_DIR=off
ROOT=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ns && ln -sfn "$ROOT" /tmp/ns/inferensics
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $OUT/env.txt; cat $OUT/env.txt
if [ "${PROBE:-1}" != 0 ]; then
PYTHONPATH=/tmp/site:/tmp/ns:$ROOT timeout 200 python3 -W ignore benchmarks/results/kernels-h200/s37/probe_eager.py > $OUT/probe.log 2>&1; echo "probe rc=$?"
grep -E "^===|us/call" $OUT/probe.log
PYTHONPATH=/tmp/site:/tmp/ns:$ROOT timeout 120 python3 -W ignore benchmarks/bench_registry_dispatch.py --device cuda --dtype bfloat16 --rounds 7 > $OUT/registry.log 2>&1; echo "reg rc=$?"; cat $OUT/registry.log
fi
SUITE_S=${SUITE_S:-0} BENCH_S=0 RO_S=0 DEF_S=${DEF_S:-0} bash benchmarks/results/sdk-h200/s36/call.sh
