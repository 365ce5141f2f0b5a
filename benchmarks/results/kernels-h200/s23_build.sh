#!/bin/bash
# Build session 23's H200 tree (gpu/lead23, git-ignored): the importable package (schema, kernels), bench_kernels.py,
# the probes, tests/kernels, this session's scripts and the pydantic wheels (schema needs pydantic; the H200 image
# has none). Calls: bash gpu/lead23/tree/s23_run.sh (read floor), s23_run2.sh (parts), s23_run3.sh (counters).
set -e
cd /work/main; D=gpu/lead23; T=$D/tree; R=benchmarks/results/kernels-h200; rm -rf $T; mkdir -p $T/inferensics $T/benchmarks $T/tests
touch $T/inferensics/__init__.py
cp -r schema kernels $T/inferensics/
cp benchmarks/bench_kernels.py benchmarks/probe_paged_read_floor.py benchmarks/probe_paged_parts.py \
   benchmarks/probe_paged_scatter.py $T/benchmarks/
cp tests/__init__.py $T/tests/; cp -r tests/kernels $T/tests/
cp $R/s23_run.sh $R/s23_run2.sh $R/s23_run3.sh $R/s23_run4.sh $R/s23_merge_tables.py $T/
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
