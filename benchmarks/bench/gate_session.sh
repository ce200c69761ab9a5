#!/usr/bin/env bash
# bench_calls_gpu.py as a background job under a private MPS daemon, so it outlives one device call:
#
#   bash benchmarks/bench/gate_session.sh start PARTS RUNS   # e.g. outside,evaluator,attacks 2
#   bash benchmarks/bench/gate_session.sh poll SECONDS       # wait until done or SECONDS pass
set -u
KB=${KB:-/tmp/kbv3-gate}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
export CUDA_MPS_PIPE_DIRECTORY=$KB/mps/pipe CUDA_MPS_LOG_DIRECTORY=$KB/mps/log
case "${1:-}" in
  start)
    mkdir -p "$KB/out" "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    rm -f "$KB/done"
    cd "$REPO" || exit 1
    nvidia-cuda-mps-control -d || exit 1
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    setsid nohup bash -c "python3 benchmarks/bench/bench_calls_gpu.py --parts ${2:-outside,evaluator} --runs ${3:-2} --out $KB/out >> $KB/log 2>&1; \
        python3 benchmarks/bench/bench_calls_gpu.py --report $KB/out/calls_gpu.jsonl > $KB/out/calls_gpu.md 2>&1; \
        echo quit | nvidia-cuda-mps-control; touch $KB/done" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cp "$KB"/out/* "$KB/log" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    tail -c 2500 "$KB/log";;
  *) echo "usage: $0 start PARTS RUNS | poll SECONDS" >&2; exit 2;;
esac
