#!/bin/bash
# Build the lead's H200 tree from /work/main: inferensics/{schema,kernels,collector}, benchmarks, tests.
set -e
cd /work/main; L=gpu/lead/tree; rm -rf $L; mkdir -p $L/inferensics $L/benchmarks/results/kernels-h200 $L/tests
touch $L/inferensics/__init__.py
for p in schema kernels; do cp -r $p $L/inferensics/; done
mkdir -p $L/inferensics/collector; cp -r collector/host collector/trace collector/__init__.py collector/errors.py collector/service_url.py $L/inferensics/collector/
cp benchmarks/bench_kernels.py benchmarks/bench_sdk_study.py benchmarks/bench_sdk_overhead.py $L/benchmarks/
cp tests/__init__.py $L/tests/; cp -r tests/kernels $L/tests/
cp gpu/rows3/pytest.ini $L/
find $L -name __pycache__ -prune -exec rm -rf {} +
du -sh $L
