#!/usr/bin/env bash
# bench_calls_gpu.py as a background job on the GPU host, so it outlives one device call:
#
#   bash benchmarks/bench/calls_session.sh start PARTS [EXTRA ARGS]   # e.g. outside,evaluator
#   bash benchmarks/bench/calls_session.sh poll SECONDS               # wait until done or SECONDS pass
set -u
KB=${KB:-/tmp/kbv3-calls}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  start)
    mkdir -p "$KB/out"
    rm -f "$KB/done"
    cd "$REPO" || exit 1
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    parts=${2:-outside,evaluator}
    shift 2 2>/dev/null
    setsid nohup bash -c "python3 benchmarks/bench/bench_calls_gpu.py --parts $parts --out $KB/out $* >> $KB/log 2>&1; \
        python3 benchmarks/bench/bench_calls_gpu.py --report $KB/out/calls_gpu.jsonl > $KB/out/calls_gpu.md 2>&1; \
        touch $KB/done" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cp "$KB"/out/* "$KB/log" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    tail -c 3000 "$KB/log";;
  *) echo "usage: $0 start PARTS [ARGS] | poll SECONDS" >&2; exit 2;;
esac
