#!/usr/bin/env bash
# How long `lcx publish` takes over a database of N experiments that lcx
# itself recorded: N/10 runs of each of 10 two-arm command experiments (a
# gate, and a level that steps up half-way, so every history page has points
# and a change point). Three timings: a first publish into an empty folder,
# a second one with nothing changed, and one after one more experiment.
# Check `uptime` first; the generation takes about half a second per
# experiment and is not timed.
#
#   scripts/bench-publish.sh [N=1000] [LCX=target/release/lcx]
set -euo pipefail

n=${1:-1000}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${2:-$root/target/release/lcx}
[[ -x $lcx ]] || { echo "bench-publish: build lcx first (cargo build --release --no-default-features --bin lcx)" >&2; exit 2; }
(( n >= 10 )) || { echo "bench-publish: N must be at least 10, got $n" >&2; exit 2; }
work=$(mktemp -d)
[[ -n ${LCX_BENCH_KEEP:-} ]] && echo "keeping $work" || trap 'rm -rf "$work"' EXIT
export LCX_DB=$work/lcx.db LCX_HOST_LOCK=$work/host.lock

per=$((n / 10))
for k in $(seq 0 9); do
    cat >"$work/e$k.toml" <<TOML
name = "bench-$k"
workload = "command"
iterations = 5
baseline = "a"

[[arms]]
name = "a"
command = 'v=\$(cat $work/level); for i in 1 2 3 4 5; do echo "{\\"time_s\\": \$v.\${i}$k}"; done'

[[arms]]
name = "b"
command = 'v=\$(cat $work/level); for i in 1 2 3 4 5; do echo "{\\"time_s\\": \$((v / 2)).\${i}$k}"; done'

[gate]
metric = "time_s"
arm = "b"
min_speedup = 1.2
TOML
done

start=$(date +%s)
for r in $(seq 1 "$per"); do
    if (( r <= per / 2 )); then echo 40 >"$work/level"; else echo 60 >"$work/level"; fi
    for k in $(seq 0 9); do
        "$lcx" run "$work/e$k.toml" >/dev/null 2>"$work/err" ||
            { echo "bench-publish: lcx run e$k.toml failed:" >&2; cat "$work/err" >&2; exit 1; }
    done
done
echo "generated $((per * 10)) experiments in $(( $(date +%s) - start )) s"

timed() {
    local t0 t1 out
    t0=$(date +%s.%N)
    out=$("$lcx" publish "$work/site")
    t1=$(date +%s.%N)
    printf '| %s | %.2f | %s |\n' "$1" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
        "$(sed -n 's/.*: \(.*\); open.*/\1/p' <<<"$out")"
}

echo
echo "$(date -u +%Y-%m-%d), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') ×$(nproc), load $(cut -d' ' -f1-3 /proc/loadavg), lcx at $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo "an unknown commit")"
echo
echo "| publish of $((per * 10)) experiments | seconds | what it wrote |"
echo "|---|---|---|"
timed "first, into an empty folder"
timed "again, nothing changed"
"$lcx" run "$work/e0.toml" >/dev/null 2>&1
timed "after one more experiment"
