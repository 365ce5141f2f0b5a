#!/bin/bash
# attn4 visit 1 (session 15): the tensor-descriptor (TMA) plan tests on the H200, the TMA sweep against the
# incumbents and cuDNN (s15_attn_sweep.py), memcheck of the TMA plans.
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
L=$OUT/s15_attn_run1_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } > $L 2>&1
timeout 70 python3 -m pytest -x -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_paged_plans.py > $OUT/s15_attn_run1_pytest.log 2>&1
echo "pytest paged plans rc $? $(date -u)" >> $L
timeout 230 python3 s15_attn_sweep.py $OUT/s15_attn_run1_sweep.json > $OUT/s15_attn_run1_sweep.log 2>&1
echo "sweep rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 python3 memcheck_tma.py > $OUT/s15_attn_run1_memcheck.log 2>&1
echo "memcheck rc $? $(date -u)" >> $L
cat $L; tail -4 $OUT/s15_attn_run1_pytest.log; tail -3 $OUT/s15_attn_run1_memcheck.log; grep -A12 "^# summary" $OUT/s15_attn_run1_sweep.log || tail -30 $OUT/s15_attn_run1_sweep.log
