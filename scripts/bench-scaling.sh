#!/usr/bin/env bash
# How lcx's cost grows with the work, as the README's scaling table shows it:
# start-up, a cell, a line ingested, a report against the rows it reads, and
# the trainer's traversal rate against workers and training rate against
# batch size. Every figure is a median of repeated runs of the release
# binaries (wall clock, bash's $EPOCHREALTIME around each run); the trainer's
# come from an experiment that lcx runs and reports on itself. Prints one
# markdown table with the date and the host. Check `uptime` first, and do
# not compile beside it.
#
#   scripts/bench-scaling.sh [--quick] [LCX=target/release/lcx]
#
# --quick: small sizes and few repeats, the trainer rows at toy scale; what
# the test suite runs so that the script cannot rot (its figures mean
# nothing). Without lcx-torch beside LCX the trainer rows say so.
set -euo pipefail

quick=0
if [[ ${1:-} == --quick ]]; then quick=1; shift; fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${1:-$root/target/release/lcx}
[[ -x $lcx ]] || { echo "bench-scaling: $lcx is missing (cargo build --release --bins)" >&2; exit 2; }
lcx=$(cd "$(dirname "$lcx")" && pwd)/$(basename "$lcx")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LCX_HOST_LOCK=$work/host.lock LCX_RUNS_DIR=$work/runs
cd "$work"

if (( quick )); then
    reps=3; row_sizes=(10000 100000); ingest_lines=20000; cells=5
else
    reps=20; row_sizes=(10000 100000 1000000 10000000); ingest_lines=1000000; cells=20
fi

# The median of the numbers on stdin.
median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) exit 1; print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Median wall milliseconds of N runs of a command (its output dropped; a
# failing run stops the script with its error).
ms() {
    local n=$1; shift
    local i t0 t1
    : >"$work/times"
    for ((i = 0; i < n; i++)); do
        t0=$EPOCHREALTIME
        "$@" >/dev/null 2>"$work/err" || { echo "bench-scaling: $* failed:" >&2; cat "$work/err" >&2; return 1; }
        t1=$EPOCHREALTIME
        awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) * 1000 }' >>"$work/times"
    done
    median <"$work/times" | awk '{ printf "%.1f\n", $1 }'
}

# A command experiment of one arm whose cell prints LINES lines of two
# metrics (2 × LINES rows), REPEATS cells.
command_file() {
    local name=$1 lines=$2 repeats=$3
    cat >"$work/$name.toml" <<TOML
name = "$name"
workload = "command"
iterations = $lines
repeats = $repeats

[[arms]]
name = "gen"
command = '''awk 'BEGIN { for (i = 1; i <= $lines; i++) printf "{\"iteration\":%d,\"time_s\":%d.5,\"nodes\":%d}\n", i, i % 7, i }' '''
TOML
}

rows=()
row() { rows+=("| $1 | $2 | $3 |"); }

# Start-up: the version and the help.
t=$(ms "$reps" "$lcx" --version)
row "start-up" "\`lcx --version\`" "$t ms"
t=$(ms "$reps" "$lcx" --help)
row "start-up" "\`lcx --help\`" "$t ms"

# A cell: a one-cell experiment of one line, and the extra time of each
# further cell.
command_file one 1 1
one=$(ms "$reps" "$lcx" run one.toml --db "$work/cells.db")
row "per cell" "\`lcx run\` of one cell printing one line" "$one ms"
command_file many 1 "$cells"
many=$(ms "$(( reps / 4 + 1 ))" "$lcx" run many.toml --db "$work/cells.db")
row "per cell" "each further cell ($cells cells: $many ms)" \
    "$(awk -v a="$one" -v b="$many" -v n="$cells" 'BEGIN { printf "%.1f", (b - a) / (n - 1) }') ms"
t=$(ms "$reps" "$lcx" list --db "$work/cells.db")
row "per cell" "\`lcx list\` of the experiments above" "$t ms"

# Ingestion: one cell of many lines, each line two metric rows.
command_file ingest "$ingest_lines" 1
t=$(ms 3 "$lcx" run ingest.toml --db "$work/ingest.db")
row "per line" "ingesting $ingest_lines lines of two metrics" \
    "$(awk -v t="$t" -v n="$ingest_lines" 'BEGIN { printf "%.0f k lines/s (%.2f µs a line)", n / t, t * 1000 / n }')"

# Reports against the rows they read; the peak memory of one more run.
for r in "${row_sizes[@]}"; do
    command_file "rows$r" $(( r / 2 )) 1
    "$lcx" run "rows$r.toml" --db "$work/rows$r.db" >/dev/null 2>&1
    n=$reps; (( r >= 1000000 )) && n=5
    t=$(ms "$n" "$lcx" report --db "$work/rows$r.db")
    mem=$(/usr/bin/time -f %M "$lcx" report --db "$work/rows$r.db" 2>&1 >/dev/null | tail -1)
    row "report" "\`lcx report\` over $r rows" "$t ms, $(( mem / 1024 )) MiB peak"
    rm -f "$work/rows$r.db"*
done

# The trainer: traversal nodes/s against workers, training GFLOP/s against
# the batch size, with the host's ceiling beside them.
if [[ -x $(dirname "$lcx")/lcx-torch ]]; then
    if (( quick )); then
        base='"network.hidden_size=16", "traversal.traversals_per_player=2", "traversal.max_depth=4"'
        iters=2; batches=(16 64); rows_per_net=256; travs=2
    else
        base='"traversal.traversals_per_player=40", "traversal.opponent_policy=network"'
        iters=4; batches=(64 256 1024 4096); rows_per_net=32768; travs=40
    fi
    {
        cat <<TOML
name = "scaling-trainer"
workload = "train"
config = "$root/configs/default.toml"
iterations = $iters
warmup = 1
set = [$base, "evaluation.eval_every=0", "checkpoint.save_every=0", "checkpoint.save_latest=false", "run.device=cpu"]
TOML
        for w in 1 2; do
            cat <<TOML
[[arms]]
name = "workers-$w"
set = ["traversal.num_workers=$w", "traversal.scheduler=interleaved", "optimization.advantage_updates_per_iteration=2", "optimization.strategy_updates_per_iteration=2"]
TOML
        done
        for b in "${batches[@]}"; do
            u=$(( rows_per_net / b )); (( u >= 1 )) || u=1
            cat <<TOML
[[arms]]
name = "batch-$b"
set = ["traversal.num_workers=2", "traversal.scheduler=interleaved", "optimization.advantage_batch_size=$b", "optimization.strategy_batch_size=$b", "optimization.advantage_updates_per_iteration=$u", "optimization.strategy_updates_per_iteration=$u"]
TOML
        done
    } >trainer.toml
    "$lcx" run trainer.toml --db "$work/trainer.db" >/dev/null 2>"$work/err" ||
        { echo "bench-scaling: the trainer experiment failed:" >&2; cat "$work/err" >&2; exit 1; }
    peak=$("$lcx" query --db "$work/trainer.db" --format csv \
        "SELECT printf('%.0f', peak_fp32_gflops) FROM experiments ORDER BY id DESC LIMIT 1" | tail -1)
    while IFS=, read -r arm metric mean; do
        case $arm in
            workers-*) row "trainer" "traversal with ${arm#workers-} worker(s), $travs traversals per player" \
                "$(printf "%.0f" "$mean") nodes/s" ;;
            batch-*) row "trainer" "training at batch ${arm#batch-} ($rows_per_net rows per network)" \
                "$(awk -v g="$mean" -v p="$peak" 'BEGIN { printf "%.1f GFLOP/s, %.0f %% of the %.0f GFLOP/s peak", g, (p > 0 ? 100 * g / p : 0), p }')" ;;
        esac
    done < <("$lcx" query --db "$work/trainer.db" --format csv \
        "SELECT arm, name, mean FROM arm_metric_stats WHERE
           (arm LIKE 'workers-%' AND name = 'traversal/nodes_per_second') OR
           (arm LIKE 'batch-%' AND name = 'perf/training_gflops')
         ORDER BY CASE WHEN arm LIKE 'workers-%' THEN 0 ELSE 1 END, CAST(substr(arm, instr(arm, '-') + 1) AS INTEGER)" | tail -n +2)
else
    row "trainer" "traversal and training rates" "not measured: no lcx-torch beside $lcx (cargo build --release --bins)"
fi

echo "$(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ×$(nproc), $(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg) at the end, lcx at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "an unknown commit"), medians of $reps runs ($(( reps / 4 + 1 )) of the $cells-cell run, 3 of the ingestion, 5 of reports of ≥ 1 M rows)"
echo
echo "| what | measured | cost |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
