#!/usr/bin/env bash
# What `lcx run` adds around the cells of an experiment of timed commands:
# RUNS runs of a two-cell experiment (two arms of `true`, timed by lcx, one
# repeat), each in a fresh database, timed whole; beside each, the cells'
# own wall time as the runner recorded it (spawn to exit of each cell).
# Prints the medians and the overhead (whole − cells), and whether any run
# probed the FP32 ceiling (none should: timed commands report no roofline).
# Exits 1 when the median overhead is above LIMIT_MS (50). Check `uptime`
# first: on a busy host the figures are the host's.
#
#   scripts/bench-command-overhead.sh [RUNS=20] [LCX=target/release/lcx] [LIMIT_MS=50]
set -euo pipefail

runs=${1:-20}
limit=${3:-50}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${2:-$root/target/release/lcx}
[[ -x $lcx ]] || lcx=$root/target/debug/lcx
[[ -x $lcx ]] || { echo "bench-command-overhead: build lcx first (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A cache of its own: a probe, if one ran, would show as a written file.
export LCX_PEAK_CACHE=$work/peak.json

cat >"$work/two.toml" <<'TOML'
name = "two-cells"
workload = "command"
timing = "process"
iterations = 2
repeats = 1

[[arms]]
name = "a"
command = ["true"]

[[arms]]
name = "b"
command = ["true"]
TOML

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
wholes=()
cells=()
probed=0
for ((i = 1; i <= runs; i++)); do
    db=$work/run$i.db
    start=$(date +%s%N)
    "$lcx" run "$work/two.toml" --db "$db" --plain --no-host-lock >/dev/null 2>&1
    end=$(date +%s%N)
    wholes+=("$(( (end - start) / 1000 ))")
    cells+=("$("$lcx" query --db "$db" --format csv \
        "SELECT CAST(ROUND(SUM(wall_seconds) * 1e6) AS INTEGER) FROM runs" | tail -n 1)")
    probes=$("$lcx" query --db "$db" --format csv \
        "SELECT COUNT(*) FROM experiments WHERE peak_source IS NOT NULL" | tail -n 1)
    probed=$(( probed + probes ))
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -e $LCX_PEAK_CACHE ]] && probed=$(( probed + 1 ))

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
overheads=()
for ((i = 0; i < runs; i++)); do
    overheads+=("$(( wholes[i] - cells[i] ))")
done
w=$(median "${wholes[@]}")
c=$(median "${cells[@]}")
o=$(median "${overheads[@]}")
printf '| measure | median of %d |\n|---|---|\n' "$runs"
printf '| `lcx run` of two cells of `true`, whole | %.1f ms |\n' "$(awk -v x="$w" 'BEGIN { print x / 1000 }')"
printf '| the two cells, as the runner timed them | %.1f ms |\n' "$(awk -v x="$c" 'BEGIN { print x / 1000 }')"
printf '| overhead (whole − cells) | %.1f ms |\n' "$(awk -v x="$o" 'BEGIN { print x / 1000 }')"
printf '| runs that probed the ceiling | %d |\n' "$probed"
"$lcx" --version 2>/dev/null | head -1
(( probed == 0 )) || exit 1
awk -v o="$o" -v l="$limit" 'BEGIN { exit !(o / 1000 > l) }' && exit 1
exit 0
