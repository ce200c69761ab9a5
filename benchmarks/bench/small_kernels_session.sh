#!/usr/bin/env bash
# bench_small_kernels_gpu.py as one background job on the GPU host, so it outlives one device call
# and a lost machine costs only the step in flight (the journal is written after each measurement):
#
#   bash benchmarks/bench/small_kernels_session.sh start [RUNS]   # all steps, in order
#   ATTACKS=0 bash ... start 2                                  # without the attacks on the gate
#   STEPS="outside gate-modes ladder-mps" bash ... start 2      # some steps only, in this order
#   bash benchmarks/bench/small_kernels_session.sh poll SECONDS   # wait until done or SECONDS pass
#
# Within one lease a second `start` resumes the journal in $KB.
# Steps: where a held call's blocks land as HOLD lets go, by release delay (spread,
# hold_spread_gpu.py); the occupancy gate (occupancy_gate_gpu.py: the timer holds a call by owning every SM);
# outside timing (no MPS); the gate's modes (benchmarks/diagnostics/gate_modes_gpu.py); a
# gate on interprocess events the solution cannot read (event-gate, event_gate_gpu.py; by default
# its DONE-only variants, evdone_*, against today's path; GATE_VARIANTS picks others);
# the evaluator under MPS (the default; EVAL_ARGS adds bench options, e.g. --only-small); the
# ladder alone (ladder-mps), and with the other ways to hold a call and to build the echo
# (ladder-wait-graph: TIMING_VERSION 9's default; ladder-spin-graph; ladder-wait-fused; ladder-node:
# the spin as the first node of the call's graph, and evaluator-node, the small kernels so;
# graph-gate: each graph gate built and run in one process (graph_gate_gpu.py); ladder-flat and ladder-pdl: the call's own nodes between a spin node and a DONE node, by plain or
# programmatic edges (protocol/gate_graph.py), evaluator-pdl and cli-pdl: every solution so;
# ladder-pdl-go: the call's own nodes behind the Hopper spin by programmatic edges, DONE by the
# stream; evaluator-best and cli-best: every solution under the gate whose ladder came closest in
# this journal (--best-gate); outside-mps: the outside timings again in a process under MPS;
# ladder-hold and evaluator-hold: the occupancy gate, every honest solution with its baseline
# and the attacks; small-hold-blocks and ladder-hold-blocks: the small kernels and the ladder
# under HOLD in the block size `spread` found best, if smaller blocks did better); `kbv3 eval` as a user
# runs it, a SIGKILL mid-evaluation and a faulting solution (cli; cli-hold: under the occupancy gate); the small kernels with --no-mps (plain; plain-all: every honest solution and the attacks, once); the
# report. The event gate's DONE-only variants failed under MPS (thirteenth session): no longer a default step.
set -u
KB=${KB:-/tmp/kbv3-small}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
case "${1:-}" in
  start)
    mkdir -p "$KB/out"
    rm -f "$KB/done"
    # A fresh machine starts with no journal: the outside figures are measured in the same lease
    # as the evaluator's (about 30 s), never carried over from another machine.
    export PYTHONPATH=$REPO KBV3_CACHE_DIR=$KB/cache PYTHONUNBUFFERED=1
    B="python3 benchmarks/bench/bench_small_kernels_gpu.py --out $KB/out --runs ${2:-2}"
    J=$KB/out/small_kernels_gpu.jsonl
    NO_ATTACKS=$([ "${ATTACKS:-1}" = 0 ] && echo --no-attacks)
    # STEPS picks and orders the steps (default: all, in this order).
    STEPS=${STEPS:-outside ladder-mps evaluator-mps outside-mps plain-all cli}
    # The event gate's default variants: DONE in the timer's own memory, against today's path.
    EVDONE=shared_fused,evdone_none,evdone_ladder10,shared_spin_ladder10,evdone_ladder2,shared_spin_ladder2,evdone_ladder50,shared_spin_ladder50
    declare -A CMD=(
      [outside]="$B --parts probe,outside --no-mps"
      [outside-ladder]="$B --parts outside --no-mps --only-ladder"
      [outside-mps]="$B --parts outside-mps"
      [event-gate]="timeout -k 5 200 python3 benchmarks/diagnostics/event_gate_gpu.py $KB/out/event_gate.jsonl --calls ${GATE_CALLS:-500} --variants ${GATE_VARIANTS:-$EVDONE}"
      [spread]="timeout -k 5 180 python3 benchmarks/diagnostics/hold_spread_gpu.py $KB/out/hold_spread.jsonl --trials ${SPREAD_TRIALS:-20}"
      [occupancy]="timeout -k 5 300 python3 benchmarks/diagnostics/occupancy_gate_gpu.py $KB/out/occupancy_gate.jsonl --calls ${GATE_CALLS:-300}"
      [gate-modes]="python3 benchmarks/diagnostics/gate_modes_gpu.py $KB/out/gate_modes.jsonl --calls ${GATE_CALLS:-1000}"
      [evaluator-mps]="$B --parts evaluator $NO_ATTACKS ${EVAL_ARGS:-}"
      [ladder-mps]="$B --parts evaluator --only-ladder"
      [ladder-spin]="$B --parts evaluator --only-ladder --gate spin"
      [ladder-wait-graph]="$B --parts evaluator --only-ladder --gate wait --echo graph"
      [ladder-spin-graph]="$B --parts evaluator --only-ladder --echo graph"
      [ladder-wait-fused]="$B --parts evaluator --only-ladder --gate wait"
      [ladder-node]="$B --parts evaluator --only-ladder --gate node"
      [ladder-hold]="timeout -k 5 240 $B --parts evaluator --only-ladder --gate hold"
      [evaluator-hold]="timeout -k 5 780 $B --parts evaluator --gate hold"
      [small-hold-blocks]="T=\$(python3 benchmarks/diagnostics/hold_spread_gpu.py $KB/out/hold_spread.jsonl --best); [ \$T != 0 ] && timeout -k 5 300 $B --parts evaluator --gate hold --hold-threads \$T --only-small --no-attacks --no-baseline --runs 1"
      [ladder-hold-blocks]="T=\$(python3 benchmarks/diagnostics/hold_spread_gpu.py $KB/out/hold_spread.jsonl --best); [ \$T != 0 ] && timeout -k 5 240 $B --parts evaluator --only-ladder --gate hold --hold-threads \$T --runs 1"
      [graph-gate]="timeout -k 5 120 python3 benchmarks/diagnostics/graph_gate_gpu.py $KB/out/graph_gate.jsonl"
      [ladder-flat]="$B --parts evaluator --only-ladder --gate flat"
      [ladder-pdl]="$B --parts evaluator --only-ladder --gate pdl"
      [evaluator-pdl]="timeout -k 5 720 $B --parts evaluator --gate pdl $NO_ATTACKS ${EVAL_ARGS:-}"
      [cli-pdl]="$B --parts cli --gate pdl"
      [ladder-pdl-go]="$B --parts evaluator --only-ladder --gate pdl-go"
      [evaluator-best]="G=\$($B --best-gate $J 2>> $KB/log) && timeout -k 5 720 $B --parts evaluator --gate \$G $NO_ATTACKS ${EVAL_ARGS:-}"
      [cli-best]="G=\$($B --best-gate $J 2>> $KB/log) && $B --parts cli --gate \$G"
      [evaluator-node]="$B --parts evaluator --no-attacks --only-small --no-baseline --gate node"
      [cli]="$B --parts cli"
      [cli-hold]="$B --parts cli --gate hold"
      [plain]="$B --parts evaluator --no-mps --only-small --no-baseline --runs 1"
      [plain-all]="$B --parts evaluator --no-mps --no-baseline --runs 1"
    )
    SCRIPT="cd $REPO"
    for step in $STEPS; do
      [ -n "${CMD[$step]:-}" ] || { echo "unknown step $step" >&2; exit 2; }
      SCRIPT="$SCRIPT; ${CMD[$step]} >> $KB/log 2>&1; echo $step \$? >> $KB/steps"
    done
    SCRIPT="$SCRIPT; python3 benchmarks/bench/bench_small_kernels_gpu.py --report $J > $KB/out/small_kernels_gpu.md 2>&1; touch $KB/done"
    setsid nohup bash -c "$SCRIPT" > /dev/null 2>&1 &
    echo "started in $KB";;
  poll)
    end=$((SECONDS + ${2:-60}))
    while [ ! -e "$KB/done" ] && [ $SECONDS -lt $end ]; do sleep 5; done
    python3 benchmarks/bench/bench_small_kernels_gpu.py --report "$KB/out/small_kernels_gpu.jsonl" > "$KB/out/small_kernels_gpu.md" 2>&1
    cp "$KB"/out/*.jsonl "$KB"/out/*.md "$KB/log" "$KB/steps" "${OUT:-/tmp}/" 2>/dev/null
    [ -e "$KB/done" ] && echo DONE || echo RUNNING
    cat "$KB/steps" 2>/dev/null
    tail -c 3000 "$KB/log";;
  *) echo "usage: $0 start [RUNS] | poll SECONDS" >&2; exit 2;;
esac
