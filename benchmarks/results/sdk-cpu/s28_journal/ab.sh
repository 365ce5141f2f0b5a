# Sittings alternating the crash journal on and off: bash ab.sh demo|gpt2 SITTINGS (session 28: the slot written by one pack_into).
cd /tmp || exit 1
for i in $(seq "${2:-3}"); do
  for mode in on off; do
    if [ $mode = off ]; then export INFERENSICS_JOURNAL_DIR=off; else export INFERENSICS_JOURNAL_DIR=/tmp/jab/j; fi
    echo "=== sitting $i journal $mode $(date -u +%T)"
    HF_HUB_OFFLINE=1 /work/main/.venv/bin/python /work/main/benchmarks/bench_sdk_overhead.py --served "$1" --rounds 9 \
      --pairs 400 2>&1 | grep "interleaved pairs, wall\|honest"
  done
done
