#!/usr/bin/env bash
# How often a gate decides on a busy host, and whether it decides right
# (decision 0030). A planted load (a busy loop on one core, switched on and
# off every 2 s) runs throughout; CPU-bound `awk` arms are measured:
#
#   process, interleaved   timing = "process", A B A B (lcx's judgement before
#                          randomized rounds): each cell a sample
#   process, randomized    timing = "process", order = "randomized": rounds
#                          judged as pairs, unevenly loaded rounds left out,
#                          each cell folded to its median or its fastest run
#   instructions           timing = "instructions" (cachegrind's counts)
#
# each as A/A and with a planted change (15 % more loop iterations for
# time, 1 % for counts), N experiments of each. For each it counts the
# verdicts on the gated metric and `lcx report --check`'s exits (0 PASS,
# 1 FAIL, 3 INCONCLUSIVE). Prints one markdown table to stdout and OUT.
#
#   scripts/bench-busy-host.sh [--experiments N=40] [--quick] [--out DIR] [--bin DIR]
#
# --quick: 1 experiment of each, 3 repeats of 3 runs (what the suite runs).
# ONLY="process-min instructions" runs those kinds alone (process-interleaved,
# process-median, process-min, instructions).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=$root/target/release
out=
experiments=40
repeats=12
iterations=6
quick=0
while (($#)); do
    case $1 in
        --experiments) experiments=$2; shift 2 ;;
        --quick) quick=1; experiments=1; repeats=3; iterations=3; shift ;;
        --out) out=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        *) echo "bench-busy-host: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[[ $experiments =~ ^[1-9][0-9]*$ ]] || { echo "bench-busy-host: --experiments: expected a count, found $experiments" >&2; exit 2; }
lcx=$bin/lcx
[[ -x $lcx ]] || { echo "bench-busy-host: $lcx is missing (cargo build --release --bins)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "bench-busy-host: valgrind is missing (sudo apt-get install valgrind)" >&2; exit 2; }
lcx=$(cd "$(dirname "$lcx")" && pwd)/$(basename "$lcx")
work=$(mktemp -d)
load_pid=
cleanup() {
    # The load runs in a process group of its own: the loop, its sleep
    # and its busy child go together.
    [[ -n $load_pid ]] && kill -TERM -- -"$load_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
export LCX_HOST_LOCK=$work/host.lock LCX_RUNS_DIR=$work/runs LCX_DB=$work/lcx.db
cd "$work"

# The planted load: one core busy for 2 s, idle for 2 s, until the end, in
# a session (and process group) of its own.
setsid bash -c '
    while :; do
        sh -c "while :; do :; done" & b=$!
        sleep 2
        kill $b 2>/dev/null; wait $b 2>/dev/null
        sleep 2
    done' &
load_pid=$!

# experiment NAME TIMING ORDER A_LOOPS B_LOOPS GATE_MARGIN MIN_EFFECT FOLD:
# the file (FOLD: what a cell's runs fold to, for the wall time).
experiment() {
    local metric=process/wall_seconds columns=
    [[ $2 == instructions ]] && metric=process/instructions
    [[ -n ${8:-} ]] && columns="[[columns]]
metric = \"$metric\"
show = \"speedup\"
fold = \"$8\"
"
    cat > "$1.toml" <<TOML
name = "$1"
workload = "command"
timing = "$2"
iterations = $iterations
warmup = 1
repeats = $repeats
order = "$3"
host_lock = false
[[arms]]
name = "a"
command = ["awk", "BEGIN{for(i=0;i<$4;i++)s+=i}"]
[[arms]]
name = "b"
command = ["awk", "BEGIN{for(i=0;i<$5;i++)s+=i}"]
[gate]
metric = "$metric"
max_slowdown = $6
min_effect = $7
$columns
TOML
}

# The verdict of arm b on the gate's metric, from the JSON report.
verdict() {
    "$lcx" report latest --format json | python3 -c '
import json, sys
r = json.load(sys.stdin)
metric = r["gate"]["metric"]
for arm in r["arms"]:
    if arm["name"] == "b":
        for m in arm["metrics"]:
            if m["metric"] == metric:
                print((m.get("comparison") or {}).get("verdict", "none"))'
}

table="| arms | planted | experiments | verdicts (improved / regressed / equivalent / inconclusive) | right | \`--check\` exits (0 / 1 / 3) | decided |"$'\n'"|---|---|---|---|---|---|---|"
row() { # LABEL TIMING ORDER A_LOOPS B_LOOPS MARGIN MIN_EFFECT PLANTED RIGHT_VERDICT RIGHT_EXIT [FOLD]
    experiment "$1" "$2" "$3" "$4" "$5" "$6" "$7" "${11:-}"
    local imp=0 reg=0 eq=0 inc=0 e0=0 e1=0 e3=0 right=0
    for ((i = 1; i <= experiments; i++)); do
        "$lcx" run --plain "$1.toml" >/dev/null 2>&1 || true
        local v; v=$(verdict)
        case $v in
            improved) imp=$((imp + 1)) ;; regressed) reg=$((reg + 1)) ;;
            equivalent) eq=$((eq + 1)) ;; *) inc=$((inc + 1)) ;;
        esac
        local code=0; "$lcx" report latest --check >/dev/null 2>&1 || code=$?
        case $code in 0) e0=$((e0 + 1)) ;; 1) e1=$((e1 + 1)) ;; *) e3=$((e3 + 1)) ;; esac
        [[ $v == "$9" && $code == "${10}" ]] && right=$((right + 1))
    done
    table+=$'\n'"| $1 | $8 | $experiments | $imp / $reg / $eq / $inc | $right | $e0 / $e1 / $e3 | $((e0 + e1)) of $experiments |"
}

echo "# bench-busy-host $(date -u +%FT%TZ): $experiments experiments each, $repeats repeats × $iterations iterations, load $(cut -d' ' -f1-3 /proc/loadavg) before" >&2
# CPU-bound arms of about 50 ms a run; a tenth of that under cachegrind
# (which runs it tens of times slower).
only=${ONLY:-process-interleaved process-median process-min instructions}
for kind in $only; do
    case $kind in
        process-interleaved)
            row "process, interleaved, mean" process interleaved 3000000 3000000 0.05 0.05 "A/A" equivalent 0 mean
            row "process, interleaved, mean" process interleaved 3000000 3450000 0.05 0.05 "15 % slower" regressed 1 mean ;;
        process-median)
            row "process, randomized, median" process randomized 3000000 3000000 0.05 0.05 "A/A" equivalent 0 median
            row "process, randomized, median" process randomized 3000000 3450000 0.05 0.05 "15 % slower" regressed 1 median ;;
        process-min)
            row "process, randomized, min" process randomized 3000000 3000000 0.05 0.05 "A/A" equivalent 0 min
            row "process, randomized, min" process randomized 3000000 3450000 0.05 0.05 "15 % slower" regressed 1 min ;;
        instructions)
            # Counts repeat exactly: 3 repeats of 3 runs are plenty.
            repeats=3 iterations=3 row "instructions" instructions randomized 300000 300000 0.005 0.001 "A/A" equivalent 0
            repeats=3 iterations=3 row "instructions" instructions randomized 300000 303000 0.005 0.001 "1 % more" regressed 1 ;;
        *) echo "bench-busy-host: ONLY: unknown kind $kind" >&2; exit 2 ;;
    esac
done
echo "$table"
if [[ -n $out ]]; then
    mkdir -p "$out"
    printf '%s\n' "$table" > "$out/busy-host.md"
fi
