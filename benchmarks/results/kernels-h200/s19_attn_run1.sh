#!/bin/bash
# attn19 run 1 (session 19): the persistent grid. Sweep (incumbent, persistent grids, cuDNN in the same shuffled
# rounds) first; its won rows into the device copy of the tables and, only if any, the benchmark (10 rounds,
# attention, no Flex); then the paged tests and memcheck of the persistent plans.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
L=$OUT/s19_attn_run1_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > $L 2>&1
timeout ${SWEEP_S:-240} python3 s19_attn_sweep.py $OUT/s19_attn_run1_sweep.json > $OUT/s19_attn_run1_sweep.log 2>&1
echo "sweep rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
M=$(python3 s19_attn_merge_tables.py $OUT/s19_attn_run1_sweep.tables.json 2>&1); echo "$M" >> $L
if ! echo "$M" | grep -q "^merged 0 "; then
  timeout 80 python3 benchmarks/bench_kernels.py --rounds 10 --only attention --no-flex > $OUT/s19_attn_run1_bench.log 2>&1
  echo "bench rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
fi
timeout ${PYTEST_S:-120} python3 -m pytest -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py tests/kernels/test_tables.py -k "not pdl" > $OUT/s19_attn_run1_pytest.log 2>&1
echo "pytest rc $? $(date -u)" >> $L
timeout ${MEMCHECK_S:-60} compute-sanitizer --tool memcheck --error-exitcode 1 python3 s19_attn_memcheck.py > $OUT/s19_attn_run1_memcheck.log 2>&1
echo "memcheck rc $? $(date -u)" >> $L
cat $L; tail -4 $OUT/s19_attn_run1_pytest.log; tail -3 $OUT/s19_attn_run1_memcheck.log; sed -n "/^# persistent kernel as/,\$p" $OUT/s19_attn_run1_sweep.log; grep -A14 "^# targets" $OUT/s19_attn_run1_bench.log 2>/dev/null
