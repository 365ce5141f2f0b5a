#!/bin/bash
# attn19 run 2 (session 19): the control (the persistent kernel given the incumbent's splits), then the two test
# files run 1's 100 s limit cut off (the bf16 differential-sample test of the persistent plans, test_tables).
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
L=$OUT/s19_attn_run2_env.log
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime; } > $L 2>&1
timeout 100 python3 s19_attn_control.py $OUT/s19_attn_run2_control.json > $OUT/s19_attn_run2_control.log 2>&1
echo "control rc $? $(date -u) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $L
timeout 150 python3 -m pytest -q --tb=short -p no:xdist -p no:randomly tests/kernels/test_tables.py "tests/kernels/test_paged_plans.py::test_persistent_plans_pass_the_op_rule_on_every_differential_sample" > $OUT/s19_attn_run2_pytest.log 2>&1
echo "pytest rc $? $(date -u)" >> $L
cat $L; tail -4 $OUT/s19_attn_run2_pytest.log; cat $OUT/s19_attn_run2_control.log
