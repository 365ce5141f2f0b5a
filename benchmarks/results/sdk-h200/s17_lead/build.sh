#!/bin/bash
# Build the lead H200 tree from /work/main (session 17): inferensics/{schema,kernels,collector}, benchmarks, tests/kernels.
set -e
cd /work/main; L=gpu/lead17/tree; rm -rf $L; mkdir -p $L/inferensics $L/benchmarks $L/tests
touch $L/inferensics/__init__.py
cp -r schema kernels $L/inferensics/
mkdir -p $L/inferensics/collector; cp -r collector/host collector/trace collector/__init__.py collector/errors.py collector/service_url.py $L/inferensics/collector/
cp benchmarks/bench_kernels.py benchmarks/bench_sdk_study.py benchmarks/bench_sdk_overhead.py $L/benchmarks/; cp gpu/lead17/diag_s16.py $L/benchmarks/
cp tests/__init__.py $L/tests/; cp -r tests/kernels $L/tests/
cat > $L/pytest.ini <<'INI'
[pytest]
addopts = -ra --strict-markers --import-mode=importlib -p no:cacheprovider
markers =
    slow: slow
    browser: browser
    gpu: gpu
    cluster: cluster
INI
rm -rf gpu/lead17/whl; cp -r gpu/gpu5/whl gpu/lead17/whl
find $L -name __pycache__ -prune -exec rm -rf {} +
du -sh gpu/lead17
