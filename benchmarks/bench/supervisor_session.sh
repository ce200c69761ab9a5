#!/usr/bin/env bash
# The supervisor benchmark (bench_supervisor_gpu.py) as a background job on the GPU host, so it
# outlives the device tool's 10-minute calls:
#
#   bash benchmarks/bench/supervisor_session.sh start           # fidelity (needs ./old_kbv3), then attacks
#   bash benchmarks/bench/supervisor_session.sh poll SECONDS    # wait until done or SECONDS pass; copy out
set -u
KB=${KB:-/tmp/kbv3-supervisor}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  start)
    mkdir -p "$KB/out"
    cd "$REPO" || exit 1
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    setsid nohup bash -c "python3 benchmarks/bench/bench_supervisor_gpu.py --part fidelity --runs ${RUNS:-3} --old old_kbv3 \
        --out $KB/out > $KB/log 2>&1; python3 benchmarks/bench/bench_supervisor_gpu.py --part attacks --out $KB/out \
        >> $KB/log 2>&1; touch $KB/done" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cp "$KB"/out/* "$KB/log" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    tail -c 3000 "$KB/log";;
  *) echo "usage: $0 start | poll SECONDS" >&2; exit 2;;
esac
