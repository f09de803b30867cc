#!/usr/bin/env bash
# How long `lcx import` takes: a database of 2 arms x 5 repeats x LINES
# lines (command arms printing with awk) imported into a new database, then
# again (nothing new), exported as JSON and that export imported; the best
# of 3 for each, and whether the imported copy reports as the original.
#
#   scripts/bench-import.sh [LINES] [LCX]     (defaults: 100000, ./target/release/lcx)
#
# Prints a markdown table. Check `uptime` first: this machine is shared.
set -euo pipefail

lines=${1:-100000}
lcx=${2:-./target/release/lcx}
lcx=$(cd "$(dirname "$lcx")" && pwd)/$(basename "$lcx")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset LCX_DB

cat > big.toml <<EOF
name = "big"
workload = "command"
iterations = $lines
warmup = 1
repeats = 5
baseline = "a"
host_lock = false
[[arms]]
name = "a"
command = "awk 'BEGIN { for (i = 1; i <= $lines; i++) printf \"{\\\\\"t\\\\\": %.4f}\\\\n\", 1 + (i % 7) / 1000 }'"
[[arms]]
name = "b"
command = "awk 'BEGIN { for (i = 1; i <= $lines; i++) printf \"{\\\\\"t\\\\\": %.4f}\\\\n\", 2 + (i % 7) / 1000 }'"
EOF
"$lcx" run --plain big.toml --db big.db > run.log 2>&1

# Best of 3 wall seconds of "$@", each after `setup`.
best() {
    local setup=$1
    shift
    local best=""
    for _ in 1 2 3; do
        eval "$setup"
        local start end t
        start=$(date +%s.%N)
        "$@" > /dev/null
        end=$(date +%s.%N)
        t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
        if [ -z "$best" ] || awk -v t="$t" -v b="$best" 'BEGIN { exit !(t < b) }'; then
            best=$t
        fi
    done
    echo "$best"
}

import_db=$(best 'rm -f t.db t.db-wal t.db-shm' "$lcx" import big.db --db t.db)
again=$(best ':' "$lcx" import big.db --db t.db)
export_json=$(best 'rm -f big.jsonl' "$lcx" export --format json --db big.db -o big.jsonl)
import_json=$(best 'rm -f u.db u.db-wal u.db-shm' "$lcx" import big.jsonl --db u.db)
"$lcx" report 1 --db big.db | sed 's#big\.db#DB#' > original.md
"$lcx" report 1 --db u.db | sed 's#u\.db#DB#' > copy.md
same=no
cmp -s original.md copy.md && same=yes
total=$((lines * 10))

echo "| step ($total lines, $(du -h big.db | cut -f1) database, $(du -h big.jsonl | cut -f1) JSON) | seconds (best of 3) |"
echo "|---|---|"
echo "| \`lcx import\` of the database into a new one | $import_db |"
echo "| the same again (everything here already) | $again |"
echo "| \`lcx export --format json\` | $export_json |"
echo "| \`lcx import\` of that export into a new database | $import_json |"
echo "| the copy's report is the original's (apart from the database path) | $same |"
