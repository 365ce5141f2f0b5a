#!/bin/bash
# Session 13's one H200 visit (rows2): sweep -> merge into the launch tables -> bench -> memcheck -> differential
# suite. Run from a tree holding inferensics/ (kernels, schema), benchmarks/ and tests/ (gpu/rows2/ in /work/main),
# with $OUT set; every step under its own time limit, each log written as it goes.
set -o pipefail
export PYTHONUNBUFFERED=1
END=$((SECONDS + ${BUDGET_S:-340}))
left() { echo $((END - SECONDS)); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; uptime;
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u; } \
  >"$OUT/s13_env.log" 2>&1
echo "== sweep ($(date -u +%T))"
timeout 120 python3 benchmarks/results/kernels-h200/s13_rows_sweep.py 5 2>&1 | tee "$OUT/s13_sweep.log" | grep -E "^(##|TABLE |# silu_mul exh)"
python3 benchmarks/results/kernels-h200/s13_rows_merge_tables.py "$OUT/s13_sweep.log" \
  inferensics/kernels/_triton/h200_tables.json "$OUT/h200_tables.json"
echo "== bench ($(date -u +%T), $(left) s left)"
timeout 85 python3 benchmarks/bench_kernels.py --rounds 10 --only elementwise 2>&1 | tee "$OUT/s13_bench.log" \
  | grep -vE "^ +\(|autotuned"
echo "== memcheck ($(date -u +%T), $(left) s left)"
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
{ echo "# probe: $SAN --tool memcheck python3 -c 'torch.ones(1).sum()'";
  timeout 40 "$SAN" --tool memcheck python3 -c "import torch; torch.ones(1, device='cuda').sum().item()" 2>&1 | tail -5;
  echo "# probe exit ${PIPESTATUS[0]}";
  echo "# run: INFERENSICS_KERNELS_FIXED_CONFIG=1 $SAN --tool memcheck --leak-check no python3 -m tests.kernels.memcheck_driver";
  INFERENSICS_KERNELS_FIXED_CONFIG=1 timeout 90 "$SAN" --tool memcheck --leak-check no python3 -m tests.kernels.memcheck_driver 2>&1;
  echo "# memcheck exit $?"; } 2>&1 | tee "$OUT/s13_memcheck.log" | tail -14
echo "== differential suite ($(date -u +%T), $(left) s left)"
timeout $(($(left) - 3)) python3 -m pytest -q -p no:cacheprovider -rfEs --durations=10 tests/kernels \
  --ignore=tests/kernels/test_cli.py --ignore=tests/kernels/test_compile_events.py \
  --ignore=tests/kernels/test_public_api.py --ignore=tests/kernels/test_memcheck.py 2>&1 | tee "$OUT/s13_differential.log" | tail -30
echo "== done ($(date -u +%T))"
