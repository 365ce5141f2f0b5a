#!/bin/bash
# Session 29, call 2: the default-mode study, then a second reduce-overhead study (another seed) on the same loan.
D=$(cd "$(dirname "$0")" && pwd)
STEPS="default ro" PROCS_DEF=16 BUDGET_DEF=${BUDGET_DEF:-300} SEED_DEF=292 BLOCKS_DEF=16 PROCS_RO=16 BUDGET_RO=${BUDGET_RO:-150} SEED_RO=293 bash "$D/run.sh"
