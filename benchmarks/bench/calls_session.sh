#!/usr/bin/env bash
# bench_calls_gpu.py as a background job on the GPU host, so it outlives one device call:
#
#   bash benchmarks/bench/calls_session.sh start PARTS [RUNS]   # e.g. outside,evaluator,attacks 2
#   bash benchmarks/bench/calls_session.sh poll SECONDS         # wait until done or SECONDS pass
#
# MPS=1 runs it under a private MPS daemon (its own pipe and log folders), stopped when it ends.
set -u
KB=${KB:-/tmp/kbv3-calls}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${MPS:-0}" = 1 ]; then
  export CUDA_MPS_PIPE_DIRECTORY=$KB/mps/pipe CUDA_MPS_LOG_DIRECTORY=$KB/mps/log
fi
case "${1:-}" in
  start)
    mkdir -p "$KB/out"
    rm -f "$KB/done"
    cd "$REPO" || exit 1
    quit=true
    if [ "${MPS:-0}" = 1 ]; then
      mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
      nvidia-cuda-mps-control -d || exit 1
      quit="echo quit | nvidia-cuda-mps-control"
    fi
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    setsid nohup bash -c "python3 benchmarks/bench/bench_calls_gpu.py --parts ${2:-outside,evaluator} --runs ${3:-5} --out $KB/out >> $KB/log 2>&1; \
        python3 benchmarks/bench/bench_calls_gpu.py --report $KB/out/calls_gpu.jsonl > $KB/out/calls_gpu.md 2>&1; \
        $quit; touch $KB/done" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cp "$KB"/out/* "$KB/log" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    tail -c 2500 "$KB/log";;
  *) echo "usage: [MPS=1] $0 start PARTS [RUNS] | poll SECONDS" >&2; exit 2;;
esac
