#!/bin/bash
# attn4 visit 2 (session 15): the paged tests (plans of several KV heads) and the differential suite's paged cases;
# sweep 2 (several KV heads a program) against the incumbents and cuDNN; its winning rows into the device copy of
# the tables; the benchmark (10 rounds, attention, no Flex); memcheck of the several-head plans.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/s15_attn_run2_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > $L 2>&1
timeout 90 python3 -m pytest -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py tests/kernels/test_tables.py tests/kernels/test_differential.py -k "paged or plan or table or several or divide" > $OUT/s15_attn_run2_pytest.log 2>&1
echo "pytest rc $? $(date -u)" >> $L
timeout 150 python3 s15_attn_sweep2.py $OUT/s15_attn_run2_sweep.json > $OUT/s15_attn_run2_sweep.log 2>&1
echo "sweep rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
[ -f $OUT/s15_attn_run2_sweep.tables.json ] && python3 s15_attn_merge_tables.py $OUT/s15_attn_run2_sweep.tables.json >> $L 2>&1
timeout 100 python3 benchmarks/bench_kernels.py --rounds 10 --only attention --no-flex > $OUT/s15_attn_run2_bench.log 2>&1
echo "bench rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
timeout 45 compute-sanitizer --tool memcheck --error-exitcode 1 python3 s15_attn_memcheck_hp.py > $OUT/s15_attn_run2_memcheck.log 2>&1
echo "memcheck rc $? $(date -u)" >> $L
cat $L; tail -4 $OUT/s15_attn_run2_pytest.log; tail -2 $OUT/s15_attn_run2_memcheck.log; grep -A12 "^# summary" $OUT/s15_attn_run2_sweep.log; grep -A14 "^# targets" $OUT/s15_attn_run2_bench.log
