#!/bin/bash
# Session 31, H200: release bundles, kernel evidence and replay on CUDA, as a user would run them (CLI and SDK),
# then replay's planted-fault suite on CUDA. Run from the repository root with the `run` tool, carrying .whl:
#   bash benchmarks/results/bundle-h200/s31_walk.sh
# DEV=cpu runs the same walk on a CPU machine (to check the script).
set -u -o pipefail
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4} INFERENSICS_JOURNAL_DIR=off
DEV=${DEV:-cuda}; ROOT=$PWD; HERE=$ROOT/benchmarks/results/bundle-h200
OUT=${OUT:-/tmp/walk31}; mkdir -p "$OUT"; W=$(mktemp -d); cd "$W"
if [ -d "$ROOT/.whl" ] && [ "$DEV" = cuda ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT"/.whl/*.whl || exit 1
fi
mkdir -p "$W/ns"; ln -s "$ROOT" "$W/ns/inferensics"
export PYTHONPATH=/tmp/site:$W/ns:$HERE:${EXTRA_PATH:-}
PY=${PY:-python3}; CLI="$PY -m inferensics.cli"
log() { echo "== $* ($(date -u +%T))"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv 2>/dev/null
  $PY -c "import torch, pydantic, cryptography; print('torch', torch.__version__, 'pydantic', pydantic.__version__, 'cryptography', cryptography.__version__, 'cuda', torch.cuda.is_available())"; } 2>&1 | tee "$OUT/env.txt"

log keygen; $CLI bundle keygen --out "$W/builder" || exit 1
log "qualify on $DEV"
echo '{"rms_norm": [{"tokens": 8, "hidden": 1024}], "silu_mul": [{"tokens": 8, "hidden": 2048}]}' > shapes_k.json
$CLI kernels qualify --shapes shapes_k.json --dtype bfloat16 --out "$W/evidence.json" --trials 5 --iters 5 2>&1 | tail -25
$CLI kernels list --evidence "$W/evidence.json" 2>&1 | tail -30

log "bundle build (registry MLP, bf16, $DEV, kernel evidence)"
echo '{"shapes": [{"shape": [8], "weight": 3}, {"shape": [32], "weight": 1}]}' > shapes_m.json
$CLI bundle build --model walk_models:registry_mlp --inputs walk_models:mlp_inputs --device "$DEV" --shapes shapes_m.json \
  --key "$W/builder" --out "$W/mlp" --name registry-mlp --kernel-evidence "$W/evidence.json" 2>&1 | tail -30
echo "build rc=$?"
$CLI bundle verify "$W/mlp" --keyring "$W/builder.pub" 2>&1 | tail -12
$CLI bundle show "$W/mlp" 2>&1 | grep -iE -A3 "accura|evidence|priorit|kernel" | head -60

log "fresh host serves the bundle"
$PY "$HERE/walk_host.py" "$W/mlp" "$W/builder.pub" 2>&1 | tail -5 | tee "$OUT/host.json"
[ "${STOP_AFTER_HOST:-0}" = 1 ] && { log "done (STOP_AFTER_HOST)"; exit 0; }

log "planted wrong GELU decomposition: the build must refuse it in one line"
echo '{"shapes": [{"shape": [16]}]}' > shapes_g.json
$CLI bundle build --model walk_models:gelu_mlp --inputs walk_models:gelu_inputs --device "$DEV" --shapes shapes_g.json \
  --key "$W/builder" --out "$W/gelu_bad" --decomposition aten.gelu.default=walk_models:fast_gelu 2>&1 | tail -5
echo "bad build rc=$? (want 2); folder left: $(ls -d "$W/gelu_bad" 2>/dev/null || echo none)"
$CLI bundle build --model walk_models:gelu_mlp --inputs walk_models:gelu_inputs --device "$DEV" --shapes shapes_g.json \
  --key "$W/builder" --out "$W/gelu_ok" 2>&1 | tail -3
echo "good build rc=$?"

log "demo release bundles on $DEV (baseline must qualify, candidate is the planted fault signed on purpose)"
$PY -m inferensics.demo.bundles --out "$W/demo" --key "$W/builder" --device "$DEV" 2>&1 | tail -12
echo "demo bundles rc=$?"
for n in baseline candidate; do $CLI bundle show "$W/demo/$n" 2>&1 | grep -iE "accuracy|worst|refus|outside" | head -6; done

if [ "${SUITE:-1}" = 1 ]; then
  log "replay planted-fault suite on $DEV"
  cd "$ROOT"
  INFERENSICS_REPLAY_DEVICE=$DEV timeout ${SUITE_S:-300} $PY -m pytest -q -p no:cacheprovider -n ${NPROC:-8} \
    -W "ignore::DeprecationWarning" -W "ignore::FutureWarning" -W "ignore::UserWarning" \
    tests/replay/test_fault_suite.py tests/bundle/test_accuracy.py 2>&1 | tail -40 | tee "$OUT/suite.txt"
fi
log done
