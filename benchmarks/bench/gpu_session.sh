#!/usr/bin/env bash
# One device session for the evaluator and batch benchmarks on a 2-GPU host, as a background job
# that outlives the 10-minute calls of the device tool, with calls that only watch it.
#
#   bash benchmarks/bench/gpu_session.sh start [STEPS] # launch the job (setsid) and return; STEPS is
#                                               # all (default), evaluator, batch or fidelity
#   bash benchmarks/bench/gpu_session.sh poll SECONDS # wait until it is done or SECONDS pass, then copy
#                                               # the tables, journals and logs to $OUT
#
# The job, in order (state under $KB, default /tmp/kbv3-session; every step is resumable, so a
# `start` after a lost machine continues where the journals stop):
#   1. bench_evaluator_gpu.py: GPU 1 times every h100 baseline (3 s per timed function, four
#      problems compiling at once) while GPU 0 runs the timing-fidelity runs and then the
#      honest/cheat solutions (evaluator defaults). The fidelity runs share the host with the
#      baseline compiles, so their spread is, if anything, an overestimate. On a one-GPU host
#      the baselines run first and the solutions after them, never at once.
#   2. (two GPUs or more) bench_batch_gpu.py --runs multi: the whole split on GPUs 0 and 1
#      (wall budget MULTI_BUDGET seconds, default 900).
#   3. (two GPUs or more) bench_batch_gpu.py --runs single: the whole split on GPU 0 alone
#      (SINGLE_BUDGET, default 1300). Both with --timing-seconds TIMING_SECONDS (default 1).
# `start fidelity` runs only the timing-fidelity part of step 1, on GPU 0 (fidelity.md).
set -u
KB=${KB:-/tmp/kbv3-session}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$KB/cache"

job() {
  local steps=${1:-all}
  cd "$REPO"
  export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
  local gpus
  gpus=$(python3 -c "import torch; print(torch.cuda.device_count())")
  echo "$gpus GPU(s), steps: $steps $(date -u +%T)"
  case "$steps" in
    fidelity) fidelity_step;;
    evaluator) evaluator_step "$gpus";;
    batch) batch_step "$gpus";;
    *) evaluator_step "$gpus"; batch_step "$gpus";;
  esac
  touch "$KB/done"
}

evaluator_step() {
  local gpus=$1 bench=benchmarks/bench/bench_evaluator_gpu.py
  local second=1
  [ "$gpus" -ge 2 ] || second=0  # one GPU: the baselines first, then the solutions (no overlap)
  CUDA_VISIBLE_DEVICES=$second python3 $bench --part baselines --out "$KB/baselines.md" --cache "$KB/cache" \
    --budget 1500 --timing-seconds 3 --workers 4 --cap 200 >>"$KB/baselines.log" 2>&1 &
  [ "$gpus" -ge 2 ] || wait
  echo "baselines started/done $(date -u +%T)"
  # Fidelity first: it is the figure the session must bring back; the solutions table after it.
  ( CUDA_VISIBLE_DEVICES=0 python3 $bench --part fidelity --out "$KB/solutions.md" --cache "$KB/cache" \
      --budget 1500 --cap 200 >>"$KB/solutions.log" 2>&1
    echo "fidelity done $(date -u +%T)"
    CUDA_VISIBLE_DEVICES=0 python3 $bench --part solutions --out "$KB/solutions.md" --cache "$KB/cache" \
      --budget 1500 --cap 200 >>"$KB/solutions.log" 2>&1 ) &
  wait
  echo "evaluator benchmark done $(date -u +%T)"
}

fidelity_step() {
  # Only the timing-fidelity runs (one GPU is enough): FIDELITY_RUNS runs of each solution,
  # run-major, within FIDELITY_BUDGET seconds; the journal resumes a cut session.
  CUDA_VISIBLE_DEVICES=0 python3 benchmarks/bench/bench_evaluator_gpu.py --part fidelity --out "$KB/fidelity.md" \
    --cache "$KB/cache" --runs "${FIDELITY_RUNS:-5}" --budget "${FIDELITY_BUDGET:-1200}" --cap 200 \
    >>"$KB/fidelity.log" 2>&1
  echo "fidelity done $(date -u +%T)"
}

batch_step() {
  if [ "$1" -lt 2 ]; then
    echo "one GPU: the batch benchmark (1 vs 2 GPUs) needs two; skipped"
    return
  fi
  # The two-GPU run first: it is the one that must cover the whole split; the one-GPU run then
  # gets what the session's device time leaves (SINGLE_BUDGET), and the table compares equal work
  # if it is stopped. Each run is cold either way (own caches), so the order favours neither.
  local timing=${TIMING_SECONDS:-1}
  python3 benchmarks/bench/bench_batch_gpu.py --runs multi --work "$KB/batch" --budget "${MULTI_BUDGET:-900}" \
    --timing-seconds "$timing" --out "$KB/bench_batch_gpu.md" >>"$KB/batch.log" 2>&1
  echo "two-GPU batch done $(date -u +%T)"
  python3 benchmarks/bench/bench_batch_gpu.py --runs single --work "$KB/batch" --budget "${SINGLE_BUDGET:-1300}" \
    --timing-seconds "$timing" --out "$KB/bench_batch_gpu.md" >>"$KB/batch.log" 2>&1
  echo "single-GPU batch done $(date -u +%T)"
}

collect() {
  cd "$REPO"
  if ls "$KB"/baselines.md.jsonl "$KB"/solutions.md.jsonl >/dev/null 2>&1; then
    cat "$KB"/baselines.md.jsonl "$KB"/solutions.md.jsonl > "$KB/evaluator_gpu.md.jsonl" 2>/dev/null
    PYTHONPATH=$REPO python3 benchmarks/bench/bench_evaluator_gpu.py --part report --out "$KB/evaluator_gpu.md" >/dev/null 2>&1
  fi
  tar -czf "$KB/logs.tar.gz" -C "$KB" $(cd "$KB" && ls *.log 2>/dev/null) 2>/dev/null
  for f in evaluator_gpu.md evaluator_gpu.md.jsonl fidelity.md fidelity.md.jsonl bench_batch_gpu.md logs.tar.gz session.log; do
    [ -f "$KB/$f" ] && cp "$KB/$f" "${OUT:-.}/"
  done
  [ -d "$KB/batch" ] && tar -czf "${OUT:-.}/batch_summaries.tar.gz" -C "$KB" $(cd "$KB" && ls -d batch/gpus_*/summary.json batch/gpus_*/results.parquet.journal.jsonl 2>/dev/null)
  wc -l "$KB"/*.jsonl "$KB"/batch/gpus_*/results.parquet.journal.jsonl 2>/dev/null
  for j in "$KB"/batch/gpus_*/results.parquet.journal.jsonl; do
    [ -f "$j" ] && echo "$j:" $(grep -o '"status": *"[a-z_]*"' "$j" | sort | uniq -c | tr '\n' ' ')
  done
  tail -n 5 "$KB/session.log" 2>/dev/null
  tail -n 4 "$KB/batch.log" 2>/dev/null
}

case "${1:-}" in
  start)
    [ -f "$KB/done" ] && { echo "already done"; exit 0; }
    echo "started $(date -u +%T)" >>"$KB/session.log"
    setsid bash "$0" job "${2:-all}" >>"$KB/session.log" 2>&1 < /dev/null &
    echo "job started";;
  job) job "${2:-all}";;
  poll)
    end=$(( $(date +%s) + ${2:-560} ))
    while [ ! -f "$KB/done" ] && [ "$(date +%s)" -lt "$end" ]; do sleep 5; done
    collect;;
  *) echo "usage: $0 start [all|evaluator|batch|fidelity] | poll SECONDS" >&2; exit 2;;
esac
