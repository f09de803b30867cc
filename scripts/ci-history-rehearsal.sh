#!/bin/sh
# Rehearses docs/ci.md on this machine: three CI jobs, each in a fresh
# folder with a database of its own (as a CI machine starts empty), each
# running the benchmark, gating it with `lcx report --check`, writing the
# job summary, then merging its database into the history carried from the
# job before (the CI cache or artifact, here a folder), and publishing the
# history as a site. The third job's code is planted 30 % slower; the
# history must show the three jobs and that change at the third.
#
#   scripts/ci-history-rehearsal.sh [WORK_DIR]    (LCX=path/to/lcx)
#
# Exit 0 when the history came out as it must; what it shows is printed.
set -eu

lcx=${LCX:-lcx}
work=${1:-$(mktemp -d)}
mkdir -p "$work/cache"
# CI machines have a new name each job: naming the runner's kind keeps
# the jobs one series (docs/ci.md).
export LCX_HOSTNAME=rehearsal-runner
unset LCX_DB

# The experiment file, the same in every job (it lives in the repository).
experiment() {
    cat <<'EOF'
name = "ci-bench"
workload = "command"
iterations = 8
warmup = 1
repeats = 3
baseline = "main"
host_lock = false

# The code at main: its speed does not change between the jobs.
[[arms]]
name = "main"
command = ["sh", "bench-main.sh"]

# The job's own code.
[[arms]]
name = "candidate"
command = ["sh", "bench.sh"]

[gate]
metric = "bench/seconds"
arm = "candidate"
max_slowdown = 0.1
EOF
}

# A benchmark whose level is FACTOR (1 % spread between iterations):
# what the code in a job measures.
bench() {
    cat <<EOF
for i in 1 2 3 4 5 6 7 8; do
  awk -v i=\$i -v r=\$LCX_REPEAT 'BEGIN { printf "{\"bench/seconds\": %.5f}\n", $1 * (1 + 0.01 * sin(i * 7 + r * 3)) }'
done
EOF
}

for job in 1 2 3; do
    dir="$work/job-$job"
    mkdir "$dir"
    experiment > "$dir/ci.toml"
    bench 1.0 > "$dir/bench-main.sh"
    if [ "$job" = 3 ]; then factor=1.3; else factor=1.0; fi
    bench "$factor" > "$dir/bench.sh"
    (
        cd "$dir"
        "$lcx" run ci.toml --db lcx.db --plain > run.log 2>&1
        # The gate: 0 PASS, 1 FAIL, 3 undecided. CI fails the job on a
        # FAIL, and still keeps the numbers (the steps below run always).
        set +e
        "$lcx" report --db lcx.db --check --allow-contended > summary.md
        echo $? > gate
        set -e
        # Restore the history, merge this job in, save it for the next.
        if [ -f "$work/cache/history.db" ]; then
            cp "$work/cache/history.db" history.db
        fi
        "$lcx" import lcx.db --db history.db
        cp history.db "$work/cache/history.db"
    )
    echo "job $job: gate exit $(cat "$dir/gate")"
done

history="$work/cache/history.db"
"$lcx" history ci-bench --arm candidate --db "$history"
"$lcx" history ci-bench --arm candidate --format json --db "$history" > "$work/history.json"
"$lcx" publish --db "$history" "$work/site" > /dev/null

fail() {
    echo "rehearsal: $*" >&2
    exit 1
}
[ "$(cat "$work/job-1/gate")" = 0 ] || fail "job 1's gate did not PASS"
[ "$(cat "$work/job-2/gate")" = 0 ] || fail "job 2's gate did not PASS"
[ "$(cat "$work/job-3/gate")" = 1 ] || fail "job 3's gate did not FAIL"
# Three points, one per job; one change judged a regression: the third's
# (the suite's test reads history.json for which row holds it).
[ "$(grep -c '"experiment_id"' "$work/history.json")" = 3 ] || fail "the history has not 3 rows"
[ "$(grep -c '"verdict": "regressed"' "$work/history.json")" = 1 ] || fail "not one regression"
[ -f "$work/site/index.html" ] || fail "no site"
echo "rehearsal: 3 jobs merged in order, the planted 30 % at job 3, site in $work/site"
