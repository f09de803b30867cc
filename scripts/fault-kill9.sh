#!/usr/bin/env bash
# Fault injection for the runner: SIGKILL `lcx run` at a random moment of a
# multi-cell experiment, N times, and check after each kill that
#   - no process a cell started survives (every cell starts a background
#     `sleep` that only the group kill or the watchdog can end),
#   - readers see the experiment as abandoned (not running),
#   - `lcx run --resume latest` completes it,
#   - the database passes PRAGMA integrity_check,
#   - no (run, metric, iteration) has two live rows, and every cell has all
#     its iterations.
# Then three shorter rounds of N/5 kills each:
#   - during experiment creation (the first few hundred milliseconds): no
#     experiment may be left completed without cells, and a resume of what
#     was recorded completes it;
#   - inside the creation transaction, at the points lcx pauses at when
#     LCX_FAULT_PAUSE names them: all of the experiment or none of it;
#   - during a revision build (an arm at a git revision of a throwaway
#     repository, whose build hangs with a child of its own): no build
#     process survives, no half-built entry is used, and a new run builds
#     it again and completes.
# Prints one line per kill and a summary; exits 1 if any check failed.
#
#   scripts/fault-kill9.sh [N=50] [LCX=target/release/lcx]
set -uo pipefail

n=${1:-50}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
lcx=${2:-$root/target/release/lcx}
[[ -x $lcx ]] || { echo "fault-kill9: no $lcx (cargo build --release)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

iterations=8
# TOML literal strings ('...') keep the shell's backslashes as they are.
cell='sleep 300 >/dev/null 2>&1 & echo $! >> pids; i=1; while [ $i -le 8 ]; do echo "{\"iteration\":$i,\"t\":0.$i}"; sleep 0.05; i=$((i+1)); done'
{
    printf 'name = "kill9"\nworkload = "command"\niterations = %d\nrepeats = 2\n' "$iterations"
    for arm in a b c; do
        printf "\n[[arms]]\nname = \"%s\"\ncommand = '%s'\n" "$arm" "$cell"
    done
} >"$work/e.toml"

query() { "$lcx" query "$1" --db "$db" --format csv | tail -n +2; }
alive() { # a pid that exists and is not a zombie
    local state
    state=$(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $state && $state != Z ]]
}

bad=0 early=0 finished=0 kills=0 abandoned=0 resumed=0 survivors=0 dups=0 short=0 integrity=0
for ((k = 1; k <= n; k++)); do
    db="$work/$k.db"
    rm -f "$work/pids"
    "$lcx" run "$work/e.toml" --db "$db" --plain >/dev/null 2>&1 &
    pid=$!
    # 0.2 - 3.0 s: while lcx-torch starts, mid-cell, between cells, near the end.
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", 0.2 + (r % 280) / 100 }')"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    sleep 0.5
    left=0
    if [[ -f $work/pids ]]; then
        while read -r p; do alive "$p" && { left=$((left + 1)); kill -9 "$p" 2>/dev/null; }; done <"$work/pids"
    fi
    survivors=$((survivors + left))
    if [[ ! -e $db || -z $(query "SELECT id FROM experiments" 2>/dev/null) ]]; then
        # Killed before it recorded the experiment: nothing to resume (a new
        # `lcx run` starts afresh).
        early=$((early + 1))
        echo "kill $k: before the experiment was recorded; surviving grandchildren $left"
        [[ $left == 0 ]] || bad=$((bad + 1))
        continue
    fi
    status=$(query "SELECT 1" >/dev/null 2>&1 && "$lcx" list --db "$db" --format json 2>/dev/null |
        awk -F'"' '/"status"/ { print $4; exit }')
    [[ $status == abandoned ]] && abandoned=$((abandoned + 1))
    [[ $status == completed ]] && finished=$((finished + 1))
    "$lcx" run --resume latest --db "$db" --plain >/dev/null 2>&1
    after=$("$lcx" list --db "$db" --format json 2>/dev/null | awk -F'"' '/"status"/ { print $4; exit }')
    [[ $after == completed ]] && resumed=$((resumed + 1))
    ok=$(query "PRAGMA integrity_check")
    [[ $ok == ok ]] && integrity=$((integrity + 1))
    d=$(query "SELECT COUNT(*) FROM (SELECT run_id, name, iteration FROM metrics WHERE superseded = 0 GROUP BY 1, 2, 3 HAVING COUNT(*) > 1)")
    dups=$((dups + d))
    s=$(query "SELECT COUNT(*) FROM runs r WHERE (SELECT COUNT(*) FROM metrics m WHERE m.run_id = r.id AND m.superseded = 0 AND m.name = 't') <> $iterations")
    short=$((short + s))
    line="kill $k: after kill '$status', after resume '$after', integrity $ok, duplicates $d, short cells $s, surviving grandchildren $left"
    if [[ ! ($status == abandoned || $status == completed) || $after != completed || $ok != ok || $d != 0 || $s != 0 || $left != 0 ]]; then
        bad=$((bad + 1))
        line="$line  <-- FAILED"
    fi
    echo "$line"
    rm -f "$db" "$db-wal" "$db-shm"
done
echo "mid-run: $n runs, $kills killed ($early before the experiment was recorded); of the other $((n - early)): read as abandoned $abandoned, had completed before the kill $finished, resume completed $resumed, integrity ok $integrity; duplicate live rows $dups; cells missing iterations $short; surviving grandchildren $survivors"
corrupt=$((n - early - integrity))

# Kills during creation: the experiment, its plan and its cells are one
# transaction, so a kill leaves all of them or none.
rounds=$(( (n + 4) / 5 ))
zero=0
for ((k = 1; k <= rounds; k++)); do
    db="$work/c$k.db"
    rm -f "$work/pids"
    "$lcx" run "$work/e.toml" --db "$db" --plain >/dev/null 2>&1 &
    pid=$!
    # The file appears when lcx opens it; the schema, then the experiment
    # and its cells follow within about half a second: kill 0 - 700 ms later.
    for _ in $(seq 2000); do [[ -e $db ]] && break; sleep 0.005; done
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", (r % 700) / 1000 }')"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    sleep 0.3
    left=0
    if [[ -f $work/pids ]]; then
        while read -r p; do alive "$p" && { left=$((left + 1)); kill -9 "$p" 2>/dev/null; }; done <"$work/pids"
    fi
    survivors=$((survivors + left))
    recorded=$( [[ -e $db ]] && query "SELECT COUNT(*) FROM experiments" 2>/dev/null)
    z=0 ok=ok after=-
    if [[ ${recorded:-0} != 0 ]]; then
        "$lcx" run --resume latest --db "$db" --plain >/dev/null 2>&1
        after=$("$lcx" list --db "$db" --format json 2>/dev/null | awk -F'"' '/"status"/ { print $4; exit }')
        z=$(query "SELECT COUNT(*) FROM experiments e WHERE e.status = 'completed' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.experiment_id = e.id)")
        ok=$(query "PRAGMA integrity_check")
        [[ $ok == ok ]] || corrupt=$((corrupt + 1))
        s=$(query "SELECT COUNT(*) FROM runs r WHERE (SELECT COUNT(*) FROM metrics m WHERE m.run_id = r.id AND m.superseded = 0 AND m.name = 't') <> $iterations")
        short=$((short + s))
    fi
    zero=$((zero + z))
    line="creation kill $k: experiments recorded ${recorded:-0}, after resume '$after', zero-cell completed $z, integrity $ok, surviving grandchildren $left"
    if [[ $z != 0 || $ok != ok || $left != 0 || (${recorded:-0} != 0 && $after != completed) ]]; then
        bad=$((bad + 1))
        line="$line  <-- FAILED"
    fi
    echo "$line"
    rm -f "$db" "$db-wal" "$db-shm"
done

# Kills inside the creation transaction, at the three places lcx pauses at
# when LCX_FAULT_PAUSE names them (store/write.rs: after the experiment's
# row, after its cells before the commit, after the commit): the first two
# must leave nothing (no experiment, so a new run starts afresh), the last
# one the experiment with all its cells pending, which a resume completes.
points=(create-row create-cells create-committed)
inside=0
for ((k = 1; k <= rounds; k++)); do
    point=${points[$(( (k - 1) % 3 ))]}
    db="$work/t$k.db"
    ready="$work/ready$k"
    rm -f "$work/pids" "$ready"
    LCX_FAULT_PAUSE=$point LCX_FAULT_READY=$ready "$lcx" run "$work/e.toml" --db "$db" --plain >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 600); do [[ -s $ready ]] && break; sleep 0.05; done
    reached=no
    [[ -s $ready ]] && reached=yes
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1)) && inside=$((inside + 1))
    wait "$pid" 2>/dev/null
    recorded=$(query "SELECT COUNT(*) FROM experiments" 2>/dev/null)
    cells=$(query "SELECT COUNT(*) FROM runs" 2>/dev/null)
    ok=$(query "PRAGMA integrity_check")
    [[ $ok == ok ]] || corrupt=$((corrupt + 1))
    after=-
    if [[ $point == create-committed ]]; then
        expect="1 experiment, 6 cells"
        "$lcx" run --resume latest --db "$db" --plain >/dev/null 2>&1
        after=$("$lcx" list --db "$db" --format json 2>/dev/null | awk -F'"' '/"status"/ { print $4; exit }')
        good=$([[ ${recorded:-0} == 1 && ${cells:-0} == 6 && $after == completed ]] && echo yes)
    else
        expect="nothing"
        "$lcx" run "$work/e.toml" --db "$db" --plain >/dev/null 2>&1
        after=$("$lcx" list --db "$db" --format json 2>/dev/null | awk -F'"' '/"status"/ { print $4; exit }')
        good=$([[ ${recorded:-0} == 0 && ${cells:-0} == 0 && $after == completed ]] && echo yes)
    fi
    z=$(query "SELECT COUNT(*) FROM experiments e WHERE e.status = 'completed' AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.experiment_id = e.id)")
    zero=$((zero + ${z:-0}))
    line="transaction kill $k at $point (reached $reached): experiments ${recorded:-0}, cells ${cells:-0} (expected $expect), then '$after', integrity $ok"
    if [[ $reached != yes || $good != yes || $ok != ok || ${z:-0} != 0 ]]; then
        bad=$((bad + 1))
        line="$line  <-- FAILED"
    fi
    echo "$line"
    rm -f "$db" "$db-wal" "$db-shm"
done

# Kills during a revision build.
repo="$work/repo"
mkdir -p "$repo"
git -C "$repo" init -q -b main
printf '%s\n' 'i=1; while [ $i -le "$LCX_ITERATIONS" ]; do echo "{\"iteration\":$i,\"t\":0.$i}"; i=$((i+1)); done' >"$repo/trainer.sh"
# The build hangs (a long cargo, with a child of its own) until go exists.
cat >"$repo/build.sh" <<'BUILD'
if [ ! -e "$FAULT_GO" ]; then
  echo $$ >> "$FAULT_PIDS"
  sleep 300 &
  echo $! >> "$FAULT_PIDS"
  wait
fi
cp trainer.sh built.sh
BUILD
git -C "$repo" add -A
git -C "$repo" -c user.name=f -c user.email=f@example.com commit -q -m build
printf 'name = "build-kill"\nworkload = "command"\niterations = 3\nwarmup = 0\nrepository = "%s"\nbuild = "sh build.sh"\n\n[[arms]]\nname = "r"\nrevision = "main"\ncommand = "sh built.sh"\n' "$repo" >"$work/b.toml"
orphans=0
for ((k = 1; k <= rounds; k++)); do
    cache="$work/cache$k"
    db="$work/b$k.db"
    rm -f "$work/bpids" "$work/go"
    FAULT_PIDS="$work/bpids" FAULT_GO="$work/go" LCX_REVISION_CACHE="$cache" \
        "$lcx" run "$work/b.toml" --db "$db" --plain >/dev/null 2>&1 &
    pid=$!
    # Until the build has started (both its pids are written), then a little more.
    for _ in $(seq 200); do [[ $( { wc -l <"$work/bpids"; } 2>/dev/null || echo 0) -ge 2 ]] && break; sleep 0.05; done
    sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", (r % 100) / 100 }')"
    kill -9 "$pid" 2>/dev/null && kills=$((kills + 1))
    wait "$pid" 2>/dev/null
    left=0
    for _ in $(seq 50); do
        left=0
        while read -r p; do alive "$p" && left=$((left + 1)); done <"$work/bpids"
        [[ $left == 0 ]] && break
        sleep 0.1
    done
    if [[ $left != 0 ]]; then
        while read -r p; do kill -9 "$p" 2>/dev/null; done <"$work/bpids"
    fi
    orphans=$((orphans + left))
    half=$(find "$cache" -name build.json 2>/dev/null | wc -l)
    touch "$work/go"
    FAULT_PIDS="$work/bpids" FAULT_GO="$work/go" LCX_REVISION_CACHE="$cache" \
        "$lcx" run "$work/b.toml" --db "$db" --plain >/dev/null 2>&1
    rc=$?
    ok=$(query "PRAGMA integrity_check")
    [[ $ok == ok ]] || corrupt=$((corrupt + 1))
    line="build kill $k: build processes left $left, complete builds after the kill $half, rerun exit $rc, integrity $ok"
    if [[ $left != 0 || $half != 0 || $rc != 0 || $ok != ok ]]; then
        bad=$((bad + 1))
        line="$line  <-- FAILED"
    fi
    echo "$line"
done

echo "summary over $kills kills ($n mid-run, $rounds during creation, $inside inside the creation transaction, $rounds during a build): corrupt DBs $corrupt, zero-cell completed experiments $zero, orphan processes $((survivors + orphans)) (builds included: $orphans), lost lines $((dups + short)) (duplicates $dups, missing $short)"
[[ $bad == 0 ]]
