#!/bin/bash
# Session 23's second H200 call: where the kernel's time goes beyond its read floor (run from gpu/lead23).
cd "$(dirname "$0")/.." || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/tree PYTHONUNBUFFERED=1
cd tree && timeout "${PROBE_S:-420}" python3 benchmarks/probe_paged_parts.py --rounds "${ROUNDS:-10}" \
  ${CELLS:+--cells $CELLS} 2>&1 | tee $OUT/s23_parts.log
