#!/usr/bin/env bash
# lcx's `timing = "process"` beside hyperfine on the same commands, same
# machine, the two tools taking turns (ROUNDS rounds of hyperfine then lcx,
# so drift on a shared machine falls on both): the mean wall time of each
# command as each tool measures it over all rounds, and their ratio (which
# should be within 2 %). The commands: a 50 ms sleep and a shell loop, run
# without a shell of the tool's own (hyperfine -N, lcx arrays), and the
# sleep as a shell string (`sleep 0.05 && true`), which both tools run
# through `sh -c` and correct for the shell's start-up; lcx's corrected
# string is also read against its own array.
# Installs hyperfine (Debian package) when it is missing. Check `uptime`
# first: a busy machine moves both tools' figures.
#
#   scripts/hyperfine-compare.sh [RUNS=30] [LCX=target/release/lcx] [ROUNDS=3]
set -euo pipefail

runs=${1:-30}
rounds=${3:-3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${2:-$root/target/release/lcx}
[[ -x $lcx ]] || lcx=$root/target/debug/lcx
[[ -x $lcx ]] || { echo "hyperfine-compare: build lcx first (cargo build --release)" >&2; exit 2; }
if ! command -v hyperfine >/dev/null; then
    sudo_=$( [ "$(id -u)" = 0 ] || echo sudo )
    $sudo_ apt-get install -y -qq hyperfine >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

loop='i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done'
warmup=3
# Both tools run the commands without a shell of their own in between:
# hyperfine with -N, lcx with argv arrays.
cat >"$work/cmds.toml" <<TOML
name = "hyperfine-compare"
workload = "command"
timing = "process"
iterations = $((runs + warmup))
warmup = $warmup
host_lock = true

[[arms]]
name = "sleep"
command = ["sleep", "0.05"]

[[arms]]
name = "loop"
command = ["sh", "-c", '$loop']

[[arms]]
name = "shell"
command = "sleep 0.05 && true"
TOML

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= rounds; r++)); do
    hyperfine -N --style none --warmup "$warmup" --runs "$runs" \
        --export-json "$work/h$r.json" 'sleep 0.05' "sh -c '$loop'" >/dev/null 2>&1
    # hyperfine's default: through a shell, its start-up subtracted.
    hyperfine --style none --warmup "$warmup" --runs "$runs" \
        --export-json "$work/s$r.json" 'sleep 0.05 && true' >/dev/null 2>&1
    "$lcx" run "$work/cmds.toml" --db "$work/lcx.db" --plain --no-host-lock >/dev/null 2>&1
done
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"

h_mean() { # hyperfine's mean for its N-th command (0-based; 2: the shell string), over the rounds
    local index=$1 files=("$work"/h*.json)
    (( index == 2 )) && { index=0; files=("$work"/s*.json); }
    python3 -c "
import json, sys
means = [json.load(open(f))['results'][int(sys.argv[1])]['mean'] for f in sys.argv[2:]]
print(sum(means) / len(means))" "$index" "${files[@]}"
}
l_mean() { # lcx's warm-up-excluded mean for an arm, over the rounds' experiments
    "$lcx" query --db "$work/lcx.db" --format csv \
        "SELECT AVG(mean) FROM arm_metric_stats WHERE arm = '$1' AND name = 'process/wall_seconds'" |
        tail -n 1
}
h_spread() { # how far apart hyperfine's own round means lie: max/min - 1, in %
    local index=$1 files=("$work"/h*.json)
    (( index == 2 )) && { index=0; files=("$work"/s*.json); }
    python3 -c "
import json, sys
means = [json.load(open(f))['results'][int(sys.argv[1])]['mean'] for f in sys.argv[2:]]
print('%.1f' % (100 * (max(means) / min(means) - 1)))" "$index" "${files[@]}"
}
l_spread() { # the same for lcx's rounds (one experiment each)
    "$lcx" query --db "$work/lcx.db" --format csv \
        "SELECT ROUND(100 * (MAX(mean) / MIN(mean) - 1), 1) FROM arm_metric_stats
         WHERE arm = '$1' AND name = 'process/wall_seconds'" |
        tail -n 1
}
bad=0
printf '%-14s %14s %14s %9s   %s\n' command "hyperfine (s)" "lcx (s)" "lcx/hf" \
    "rounds' spread: hyperfine, lcx"
for pair in "0 sleep sleep 0.05" "1 loop sh -c loop" "2 shell sleep 0.05 && true"; do
    read -r index arm shown <<<"$pair"
    h=$(h_mean "$index")
    l=$(l_mean "$arm")
    ratio=$(awk -v l="$l" -v h="$h" 'BEGIN { printf "%.4f", l / h }')
    printf '%-14s %14.5f %14.5f %9s   %s %%, %s %%\n' "$shown" "$h" "$l" "$ratio" \
        "$(h_spread "$index")" "$(l_spread "$arm")"
    awk -v r="$ratio" 'BEGIN { exit !(r < 0.98 || r > 1.02) }' && bad=1
done
# lcx's shell string, corrected, against its own array of the same sleep.
ratio=$(awk -v s="$(l_mean shell)" -v a="$(l_mean sleep)" 'BEGIN { printf "%.4f", s / a }')
echo "lcx: 'sleep 0.05 && true' (shell start-up taken off) / [\"sleep\", \"0.05\"]: $ratio"
awk -v r="$ratio" 'BEGIN { exit !(r < 0.98 || r > 1.02) }' && bad=1
# A round's mean moving by more than 2 % under the same tool is the host's
# noise, not either tool's: the ratio cannot be read closer than that.
echo "(a rounds' spread above 2 % is this host's own noise: the ratio is no closer than it)" 
echo "$rounds rounds, runs per command and round: $runs after $warmup warm-up; $("$lcx" --version 2>/dev/null | head -1), $(hyperfine --version)"
exit $bad
