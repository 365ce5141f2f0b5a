#!/bin/bash
# Session 22, call 4: the frame-count test after 84f8f90 (caches off) on the H200's torch 2.11, where it had failed.
set -u
D=$(cd "$(dirname "$0")" && pwd); H=$D/tree
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$H
cd "$H" && timeout 200 python3 -m pytest -q -ra -p no:cacheprovider tests/collector/host/test_graph_counts.py 2>&1 | grep -v DEBUG | tail -8
