#!/bin/bash
# Build a lead's H200 tree from /work/main into gpu/$NAME (default lead: session 16; session 17: NAME=lead17):
# inferensics/{schema,kernels,collector}, benchmarks (with gpu5's diag_s16.py), tests/kernels, the pydantic wheels.
set -e
N=${NAME:-lead}
cd /work/main; L=gpu/$N/tree; rm -rf $L; mkdir -p $L/inferensics $L/benchmarks $L/tests
touch $L/inferensics/__init__.py
cp -r schema kernels $L/inferensics/
mkdir -p $L/inferensics/collector; cp -r collector/host collector/trace collector/__init__.py collector/errors.py collector/service_url.py $L/inferensics/collector/
cp benchmarks/bench_kernels.py benchmarks/bench_sdk_study.py benchmarks/bench_sdk_overhead.py $L/benchmarks/
cp benchmarks/results/sdk-h200/s16_gpu5/diag_s16.py $L/benchmarks/
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
rm -rf gpu/$N/whl; cp -r gpu/gpu5/whl gpu/$N/whl
find $L -name __pycache__ -prune -exec rm -rf {} +
du -sh gpu/$N
