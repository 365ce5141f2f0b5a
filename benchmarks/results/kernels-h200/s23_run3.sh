#!/bin/bash
# Session 23's third H200 call (run from gpu/lead23/tree): the counters kept between calls. The paged tests on the
# GPU, a sweep of batch 1 and 8 (where a split launch counts on them), its rows into the device copy of the tables,
# then the attention benchmark (10 rounds, no Flex) over all nine cells.
cd "$(dirname "$0")" || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
L=$OUT/s23_run3_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; } > $L 2>&1
timeout ${PYTEST_S:-150} python3 -m pytest -q --tb=short -p no:cacheprovider tests/kernels/test_counters.py \
  tests/kernels/test_paged_plans.py tests/kernels/test_tables.py > $OUT/s23_run3_pytest.log 2>&1
echo "pytest rc $? $(date -u)" >> $L
timeout ${SWEEP_S:-280} python3 benchmarks/bench_kernels.py --sweep --only attention --rounds 5 --batches 1,8 \
  --paged-configs "64,4,2;64,4,3;64,4,4;64,4,5;64,4,3,pf;64,4,4,pf;32,4,4,pf" \
  --write-tables $OUT/s23_sweep_tables.json > $OUT/s23_run3_sweep.log 2>&1
echo "sweep rc $? $(date -u)" >> $L
python3 s23_merge_tables.py $OUT/s23_sweep_tables.json >> $L 2>&1
timeout ${BENCH_S:-120} python3 benchmarks/bench_kernels.py --rounds 10 --only attention --no-flex > $OUT/s23_run3_bench.log 2>&1
echo "bench rc $? $(date -u)" >> $L
cat $L; tail -5 $OUT/s23_run3_pytest.log; sed -n '/^# paged sweep summary/,$p' $OUT/s23_run3_sweep.log; grep -A14 "^# targets" $OUT/s23_run3_bench.log
