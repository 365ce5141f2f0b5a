#!/bin/bash
# attn3 visit 2 (session 14): the PDL test again (torch 2.11's import-time DeprecationWarning filtered), then the
# benchmark with the committed tables (10 rounds, Flex in every cell, Dynamo's cache reset per Flex shape).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/s14_attn_run2_env.log
{ date -u; nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; } > $L 2>&1
timeout 40 python3 -m pytest -x -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py -k "pdl" > $OUT/s14_attn_run2_pytest.log 2>&1
echo "pytest pdl rc $? $(date -u)" >> $L
timeout 55 python3 benchmarks/bench_kernels.py --rounds 10 --only attention > $OUT/s14_attn_run2_bench.log 2>&1
echo "bench rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
cat $L; tail -3 $OUT/s14_attn_run2_pytest.log; grep "flex paged b=64\|^paged_decode" $OUT/s14_attn_run2_bench.log | cut -c1-140; grep -A10 "^paged batch=1,c" $OUT/s14_attn_run2_bench.log
