#!/bin/bash
# Session 23's H200 call: the environment, then the read-floor probe over the six cells (run from gpu/lead23).
cd "$(dirname "$0")/.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/tree PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv; uptime
  python3 -c 'import torch, triton; print(torch.__version__, triton.__version__)'; } 2>&1 | tee $OUT/s23_env.log
cd tree && timeout "${PROBE_S:-420}" python3 benchmarks/probe_paged_read_floor.py --rounds "${ROUNDS:-10}" \
  ${CELLS:+--cells $CELLS} 2>&1 | tee $OUT/s23_read_floor.log
