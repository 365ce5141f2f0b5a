#!/bin/bash
# Session 23's fourth H200 call (run from gpu/lead23/tree): the counter tests at the committed code, then a sweep
# of batch 1 and 8 over deep-pipelined configurations (prefetched page numbers, 3-7 K/V buffers) at 1-3 programs a
# multiprocessor, which the earlier sweeps never paired (their stage 1 ranks configurations at 4 a multiprocessor);
# the fastest plans into the device copy of the tables, then the benchmark of batch 1 and 8 (10 rounds, no Flex).
cd "$(dirname "$0")" || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
L=$OUT/s23_run4_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; } > $L 2>&1
timeout 60 python3 -m pytest -q --tb=short -p no:cacheprovider tests/kernels/test_counters.py > $OUT/s23_run4_pytest.log 2>&1
echo "pytest rc $? $(date -u)" >> $L
timeout ${SWEEP_S:-300} python3 benchmarks/bench_kernels.py --sweep --only attention --rounds 5 --batches 1,8 \
  --paged-configs "64,4,5,pf;64,4,6,pf;64,8,5,pf;128,8,3,pf;128,8,4,pf;128,4,4,pf;32,4,8,pf" \
  --paged-waves 1,1.5,2,3 --write-tables $OUT/s23_run4_sweep_tables.json > $OUT/s23_run4_sweep.log 2>&1
echo "sweep rc $? $(date -u)" >> $L
python3 s23_merge_tables.py $OUT/s23_run4_sweep_tables.json >> $L 2>&1
timeout ${BENCH_S:-90} python3 benchmarks/bench_kernels.py --rounds 10 --only attention --no-flex --batches 1,8 \
  > $OUT/s23_run4_bench.log 2>&1
echo "bench rc $? $(date -u)" >> $L
cat $L; tail -3 $OUT/s23_run4_pytest.log; grep -A8 "split plans" $OUT/s23_run4_sweep.log; sed -n '/^# paged sweep summary/,$p' $OUT/s23_run4_sweep.log; grep "paged_decode" $OUT/s23_run4_bench.log
