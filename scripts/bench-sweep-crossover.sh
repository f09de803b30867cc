#!/usr/bin/env bash
# How often a sweep's crossover is right, with real command arms: SEEDS
# experiments whose `fast` arm is 1.0× the baseline below point 4 and 1.3×
# from it on (the crossover is 4), and SEEDS flat A/A sweeps (there is none).
# Every cell is a real `lcx run` child (sh + awk, 1 % noise per iteration,
# seeded by its run id, so every experiment of the one database differs);
# the crossover is what `lcx report --format json` says (`sweep.crossover`).
# Prints one markdown table. Takes about a second per experiment.
#
#   scripts/bench-sweep-crossover.sh [SEEDS=200] [LCX=target/release/lcx]
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

# One experiment file per kind: the fast arm's factor from point 4.
for kind in planted flat; do
    factor=1.3; [[ $kind == flat ]] && factor=1.0
    cat > "$kind.toml" <<TOML
name = "$kind"
workload = "command"
iterations = 6
warmup = 1
repeats = 3
baseline = "base"
host_lock = false
[[arms]]
name = "base"
command = ["sh", "arm.sh"]
[[arms]]
name = "fast"
command = ["sh", "arm.sh"]
env = { FROM = "4", FACTOR = "$factor" }
[sweep]
"env.N" = [1, 2, 4, 8]
TOML
done

# The crossover each experiment's report names for `fast` (null: none).
crossover() {
    "$lcx" report "$1" --format json | python3 -c \
        'import json, sys; print(json.load(sys.stdin)["sweep"]["crossover"]["fast"])'
}

right_planted=0; right_flat=0
for ((s = 1; s <= seeds; s++)); do
    "$lcx" run --plain planted.toml >/dev/null 2>&1
    [[ $(crossover latest) == 4 ]] && right_planted=$((right_planted + 1))
    "$lcx" run --plain flat.toml >/dev/null 2>&1
    [[ $(crossover latest) == None ]] && right_flat=$((right_flat + 1))
done

echo "| sweep (4 points × 2 arms × 3 repeats, command arms) | seeds | right | rate |"
echo "|---|---|---|---|"
printf '| planted: 1.0× below n = 4, 1.3× from it; crossover at 4 | %d | %d | %s %% |\n' \
    "$seeds" "$right_planted" "$(python3 -c "print(round(100 * $right_planted / $seeds, 1))")"
printf '| flat A/A: no crossover | %d | %d | %s %% |\n' \
    "$seeds" "$right_flat" "$(python3 -c "print(round(100 * $right_flat / $seeds, 1))")"
echo
echo "$(date -u +%Y-%m-%d), $(uname -n), load $(cut -d' ' -f1-3 /proc/loadavg)"
