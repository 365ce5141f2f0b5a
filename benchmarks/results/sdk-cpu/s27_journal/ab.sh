cd /tmp
unset JV
for i in 1 2 3 4; do
  for mode in on off; do
    if [ $mode = off ]; then export INFERENSICS_JOURNAL_DIR=off; else export INFERENSICS_JOURNAL_DIR=/tmp/jab/j; fi
    echo "=== sitting $i journal $mode $(date -u +%T)"
    HF_HUB_OFFLINE=1 /work/main/.venv/bin/python /work/main/benchmarks/bench_sdk_overhead.py --served demo --rounds 9 --pairs 400 2>&1 | grep "interleaved pairs, wall\|honest"
  done
done
