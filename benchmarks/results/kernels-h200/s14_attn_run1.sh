#!/bin/bash
# attn3 visit 1 (session 14): the PDL merge's GPU test (with traceback), the plan tests, a sweep of the prefetched-page
# configurations against the incumbents (stage 2: waves x merge x PDL), its plans into the device copy of the tables,
# then the benchmark (10 rounds, Flex in every cell, forced non-decode kernel where its own choice fails).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/s14_attn_run1_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > $L 2>&1
timeout 60 python3 -m pytest -x -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py -k "pdl or prefetch" > $OUT/s14_attn_run1_pytest.log 2>&1
echo "pytest pdl rc $? $(date -u)" >> $L
timeout 25 python3 -m pytest -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py tests/kernels/test_tables.py -k "not pdl" >> $OUT/s14_attn_run1_pytest.log 2>&1
echo "pytest plans rc $? $(date -u)" >> $L
timeout 105 python3 benchmarks/bench_kernels.py --sweep --only attention --rounds 5 \
  --paged-configs "64,4,3,pf;64,4,4,pf;64,8,4,pf;32,4,3,pf;32,4,4,pf;32,4,5,pf" \
  --paged-waves 2,3,4,6,8,16 --write-tables $OUT/s14_attn_run1_sweep_tables.json > $OUT/s14_attn_run1_sweep.log 2>&1
echo "sweep rc $? $(date -u)" >> $L
[ -f $OUT/s14_attn_run1_sweep_tables.json ] && python3 merge_tables.py $OUT/s14_attn_run1_sweep_tables.json >> $L 2>&1
timeout 90 python3 benchmarks/bench_kernels.py --rounds 10 --only attention > $OUT/s14_attn_run1_bench.log 2>&1
echo "bench rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
cat $L; tail -5 $OUT/s14_attn_run1_pytest.log; grep -A12 "paged sweep summary" $OUT/s14_attn_run1_sweep.log; grep -A10 "^# targets" $OUT/s14_attn_run1_bench.log
