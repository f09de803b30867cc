#!/usr/bin/env bash
# How often a sweep's crossover is right, with real command arms: SEEDS
# experiments whose `fast` arm is 1.0× the baseline below point 4 and 1.3×
# from it on (the crossover is 4), and SEEDS flat A/A sweeps (there is none).
# Every cell is a real `lcx run` child (sh + awk, 1 % noise per iteration,
# seeded by its run id, so every experiment of the one database differs);
# the crossover is what `lcx report --format json` says (`sweep.crossover`).
# The same again with spikes (3 iterations in 20 four times slower), the
# cells folded to their mean and to their median. Prints one markdown
# table. Takes about a second per experiment.
#
#   scripts/bench-sweep-crossover.sh [SEEDS=200] [LCX=target/release/lcx]
#   KINDS="spiky-median-planted spiky-median-flat" scripts/bench-sweep-crossover.sh 100
set -euo pipefail

seeds=${1:-200}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${2:-$root/target/release/lcx}
[[ -x $lcx ]] || { echo "bench-sweep-crossover: $lcx is missing (cargo build --release --bins)" >&2; exit 2; }
lcx=$(cd "$(dirname "$lcx")" && pwd)/$(basename "$lcx")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LCX_HOST_LOCK=$work/host.lock LCX_RUNS_DIR=$work/runs LCX_DB=$work/lcx.db
cd "$work"

cp "$root/scripts/sweep-arm.sh" arm.sh

# One experiment file per kind: the fast arm's factor from point 4; with
# spikes, 3 iterations in 20 run 4 times slower, and the cells fold to
# their mean (what a spike moves) or their median (decision 0030).
kinds=${KINDS:-planted flat spiky-mean-planted spiky-mean-flat spiky-median-planted spiky-median-flat}
for kind in $kinds; do
    factor=1.3; [[ $kind == *flat ]] && factor=1.0
    spikes=0; iterations=6; fold=
    if [[ $kind == spiky-* ]]; then
        spikes=0.15; iterations=21
        fold=mean; [[ $kind == spiky-median-* ]] && fold=median
    fi
    cat > "$kind.toml" <<TOML
name = "$kind"
workload = "command"
iterations = $iterations
warmup = 1
repeats = 3
baseline = "base"
host_lock = false
[[arms]]
name = "base"
command = ["sh", "arm.sh"]
env = { SPIKES = "$spikes" }
[[arms]]
name = "fast"
command = ["sh", "arm.sh"]
env = { FROM = "4", FACTOR = "$factor", SPIKES = "$spikes" }
[sweep]
"env.N" = [1, 2, 4, 8]
TOML
    if [[ -n $fold ]]; then
        printf '[[columns]]\nmetric = "my/seconds"\nshow = "both"\nfold = "%s"\n' "$fold" >> "$kind.toml"
    fi
done

# The crossover each experiment's report names for `fast` (null: none).
crossover() {
    "$lcx" report "$1" --format json | python3 -c \
        'import json, sys; print(json.load(sys.stdin)["sweep"]["crossover"]["fast"])'
}

echo "| sweep (4 points × 2 arms × 3 repeats, command arms) | seeds | right | rate |"
echo "|---|---|---|---|"
for kind in $kinds; do
    right=0
    for ((s = 1; s <= seeds; s++)); do
        "$lcx" run --plain "$kind.toml" >/dev/null 2>&1
        want=4; [[ $kind == *flat ]] && want=None
        [[ $(crossover latest) == "$want" ]] && right=$((right + 1))
    done
    case $kind in
        planted) what="planted: 1.0× below n = 4, 1.3× from it; crossover at 4" ;;
        flat) what="flat A/A: no crossover" ;;
        spiky-mean-planted) what="spikes, cells' means: planted, crossover at 4" ;;
        spiky-mean-flat) what="spikes, cells' means: flat A/A, no crossover" ;;
        spiky-median-planted) what="spikes, cells' medians: planted, crossover at 4" ;;
        spiky-median-flat) what="spikes, cells' medians: flat A/A, no crossover" ;;
        *) echo "bench-sweep-crossover: KINDS: unknown kind $kind" >&2; exit 2 ;;
    esac
    printf '| %s | %d | %d | %s %% |\n' "$what" "$seeds" "$right" \
        "$(python3 -c "print(round(100 * $right / $seeds, 1))")"
done
echo
echo "$(date -u +%Y-%m-%d), $(uname -n), load $(cut -d' ' -f1-3 /proc/loadavg)"
