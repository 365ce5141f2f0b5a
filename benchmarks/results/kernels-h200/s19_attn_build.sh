#!/bin/bash
# Build session 19's H200 tree (gpu/attn19, git-ignored): the importable package (schema, kernels), bench_kernels.py,
# tests/kernels, this session's scripts, and the pydantic wheels (schema needs pydantic; the H200 image has none).
set -e
cd /work/main; D=gpu/attn19; T=$D/tree; rm -rf $T; mkdir -p $T/inferensics $T/benchmarks $T/tests
touch $T/inferensics/__init__.py
cp -r schema kernels $T/inferensics/
cp benchmarks/bench_kernels.py $T/benchmarks/
cp tests/__init__.py $T/tests/; cp -r tests/kernels $T/tests/
R=benchmarks/results/kernels-h200
cp $R/s19_attn_sweep.py $R/s19_attn_control.py $R/s19_attn_merge_tables.py $R/s19_attn_memcheck.py $R/s19_attn_run1.sh \
   $R/s19_attn_run2.sh $T/
cat > $T/pytest.ini <<'INI'
[pytest]
addopts = -ra --strict-markers --import-mode=importlib -p no:cacheprovider
markers =
    slow: slow
    browser: browser
    gpu: gpu
    cluster: cluster
INI
rm -rf $D/whl; cp -r gpu/gpu5/whl $D/whl
find $T -name __pycache__ -prune -exec rm -rf {} +
du -sh $D
