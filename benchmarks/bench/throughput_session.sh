#!/usr/bin/env bash
# bench_throughput_gpu.py (issue 17) as a background job on the GPU host, so it outlives the
# device tool's 10-minute calls; later calls only watch it and copy its files to $OUT.
#
#   bash benchmarks/bench/throughput_session.sh start [GPUS] [ARGS...]  # launch (setsid) and return;
#        GPUS e.g. 0,1 (default: all visible); ARGS go to the script (e.g. --evals 24)
#   bash benchmarks/bench/throughput_session.sh poll SECONDS            # wait until done or SECONDS
#        pass, then copy throughput.md, throughput.jsonl, log.txt, batch_journals.tar.gz and (under
#        16 MB) kbv3_cache.tar.gz to $OUT: unpacked into a carried folder, a later session's
#        `start auto --seed-cache FOLDER/kbv3-cache` starts with those baselines
#
# State under $KB (default /tmp/kbv3-throughput); BUDGET (default 1150 s) is the script's --budget.
# A `start` after a lost machine starts over on the fresh one (its /tmp is empty); on the same
# machine it resumes from the journal. The machine stays warm only ~30 s after a call, so issue
# the next `poll` at once.
set -u
KB=${KB:-/tmp/kbv3-throughput}
REPO=$(cd "$(dirname "$0")/../.." && pwd)

collect() {
  for f in throughput.md throughput.jsonl; do
    [ -f "$KB/results/$f" ] && cp "$KB/results/$f" "${OUT:-.}/"
  done
  [ -f "$KB/log.txt" ] && cp "$KB/log.txt" "${OUT:-.}/"
  (cd "$KB/results/work" 2>/dev/null && ls batch/*/results.parquet.journal.jsonl >/dev/null 2>&1 &&
    tar -czf "${OUT:-.}/batch_journals.tar.gz" batch/*/results.parquet.journal.jsonl batch/*/log.txt)
  # The kbv3 cache (baselines, reference facts) for a later run's --seed-cache, when it is small
  # enough to come back (16 MiB a file).
  (cd "$KB/results/work" 2>/dev/null && [ -d kbv3-cache ] && tar -czf "$KB/kbv3_cache.tar.gz" kbv3-cache &&
    [ "$(stat -c %s "$KB/kbv3_cache.tar.gz")" -lt 16000000 ] && cp "$KB/kbv3_cache.tar.gz" "${OUT:-.}/")
  if [ -e "$KB/done" ]; then
    echo DONE; cat "$KB/results/throughput.md" 2>/dev/null
  else
    echo RUNNING; tail -n 15 "$KB/log.txt" 2>/dev/null
  fi
}

case "${1:-}" in
  start)
    [ -e "$KB/done" ] && { echo "already done: poll to collect"; exit 0; }
    mkdir -p "$KB/results"
    cd "$REPO" || exit 1
    gpus=${2:-auto}
    shift $(( $# >= 2 ? 2 : 1 ))
    export PYTHONPATH=$REPO PYTHONUNBUFFERED=1
    setsid nohup bash -c 'python3 benchmarks/bench/bench_throughput_gpu.py --out "$0/results" --gpus "$1" \
        --budget "$2" "${@:3}" >> "$0/log.txt" 2>&1; touch "$0/done"' "$KB" "$gpus" "${BUDGET:-1150}" "$@" \
        > /dev/null 2>&1 < /dev/null &
    echo "started in $KB (GPUs $gpus, budget ${BUDGET:-1150} s)";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    collect;;
  *) echo "usage: $0 start [GPUS] [ARGS...] | poll SECONDS" >&2; exit 2;;
esac
