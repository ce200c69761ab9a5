#!/usr/bin/env bash
# bench_windows_gpu.py as a background job on the GPU host, so it outlives one device call:
#
#   bash benchmarks/bench/windows_session.sh start [PARTS]   # default honest,attacks,hangs,old
#   bash benchmarks/bench/windows_session.sh poll SECONDS    # wait until done or SECONDS pass; copy out
set -u
KB=${KB:-/tmp/kbv3-windows}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  start)
    mkdir -p "$KB/out"
    cd "$REPO" || exit 1
    [ -d old_kbv3 ] || { mkdir -p old_kbv3 && tar -xf old_kbv3.tar -C old_kbv3 2>/dev/null; }
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    # One process per part: the hangs run in threads of their own, with zygotes of their own.
    setsid nohup bash -c "for part in \$(echo ${2:-honest,attacks,hangs,old} | tr , ' '); do \
        python3 benchmarks/bench/bench_windows_gpu.py --parts \$part --out $KB/out >> $KB/log 2>&1; done; \
        touch $KB/done" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    cp "$KB"/out/* "$KB/log" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    tail -c 2500 "$KB/log";;
  *) echo "usage: $0 start [PARTS] | poll SECONDS" >&2; exit 2;;
esac
