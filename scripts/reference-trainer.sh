#!/usr/bin/env bash
# Runs the reference trainer (the Python/Cython Deep CFR trainer that lcx
# ports: github.com/sebastianrcnt/coolrl-lost-cities) and prints each of its
# iterations as one lcx metric line, so that a `command` arm of an
# experiment can time it side by side with lcx on the same machine
# (experiments/reference.toml). The issue targets are ratios to the
# reference, and this machine's speed drifts from day to day: only a
# side-by-side run says where lcx stands.
#
#   scripts/reference-trainer.sh [--set KEY=VALUE ...]
#       one training run: the reference's configs/deep_cfr/default.yaml with
#       these overrides (the reference's key names, values read as YAML) and
#       run.max_iterations=$LCX_ITERATIONS when the runner sets it.
#   scripts/reference-trainer.sh --convert METRICS.jsonl
#       print a reference metrics file as lcx metric lines, and nothing else.
#   scripts/reference-trainer.sh --follow CMD [ARG...]
#       run CMD (a trainer writing the reference's runs/<...>/metrics.jsonl
#       under its working directory) in a fresh directory and print each of
#       its lines as an lcx metric line as soon as it is written; a training
#       run above does this, so the runner stores each iteration as it ends.
#
# Lines printed (per reference iteration), under lcx's names:
#   iteration, time/iteration_seconds (evaluation included, as in lcx),
#   time/traversal_seconds, time/training_seconds (its advantage plus
#   strategy training: they run one after the other), traversal/nodes and
#   traversal/nodes_per_second (nodes over traversal seconds, lcx's
#   definition; the reference's own time/nodes_per_second divides by the
#   whole iteration);
#   loss/advantage (the mean over both players' updates) and
#   loss/strategy_last (the strategy network's last update's: the reference
#   has no mean over the updates, which is lcx's loss/strategy),
#   samples/advantage and samples/strategy (the memories' sizes), the same
#   quantities lcx prints under these names;
#   on iterations that evaluate, time/evaluation_seconds and, per opponent
#   (the two trainers name the bots alike), eval/<opponent>/<key> for the
#   keys lcx prints: games, wins0, wins1, draws, win_rate0, win_rate1,
#   avg_score0, avg_score1, avg_score_diff0, avg_game_length,
#   max_step_timeouts, and throughput (the reference's games_per_second).
#   The reference's other evaluation diagnostics have no lcx counterpart
#   and are left out, so that both arms of an experiment carry one set of
#   names.
#
# Set-up, on first use, under $LCX_REFERENCE_DIR (default .reference/ in the
# repository, git-ignored): src/, a checkout of the reference at
# $LCX_REFERENCE_COMMIT (cloned from $LCX_REFERENCE_URL when missing), and
# venv/, with its Python dependencies and its Cython extensions built. The
# venv borrows PyTorch from the project's .venv (scripts/provision-libtorch.sh
# installs it there) rather than downloading it a second time.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

fail() {
    echo "reference-trainer: $*" >&2
    exit 1
}

# The conversion of the reference's metrics.jsonl into lcx metric lines:
#   reference PYTHON convert FILE       a whole file
#   reference PYTHON follow DIR CMD...  the file CMD writes under DIR, live
lcx_lines() {
    local python=$1
    shift
    "$python" - "$@" <<'EOF'
import json
import sys

# Reference key -> lcx key, for keys that are there on every iteration.
ALWAYS = {
    "loss/advantage": "loss/advantage",
    # The reference's strategy loss is its last step's; lcx's loss/strategy
    # is the mean over the steps, and loss/strategy_last the last step's.
    "loss/strategy": "loss/strategy_last",
    "samples/advantage": "samples/advantage",
    "samples/strategy": "samples/strategy",
}
# Per-opponent evaluation keys (eval/<opponent>/<key>), reference -> lcx.
EVAL = {k: k for k in (
    "games", "wins0", "wins1", "draws", "win_rate0", "win_rate1", "avg_score0",
    "avg_score1", "avg_score_diff0", "avg_game_length", "max_step_timeouts",
)}
EVAL["games_per_second"] = "throughput"



def convert(line, where):
    """One reference metrics line -> one lcx metric line (None for a blank)."""
    if not line.strip():
        return None
    try:
        m = json.loads(line)
        nodes = int(m["traversal/nodes"])
        traversal = float(m["time/traversal_seconds"])
        out = {
            "iteration": int(m["iteration"]),
            "time/iteration_seconds": float(m["time/iteration_seconds"]),
            "time/traversal_seconds": traversal,
            "time/training_seconds": float(m["time/advantage_train_seconds"])
            + float(m["time/strategy_train_seconds"]),
            "traversal/nodes": nodes,
            "traversal/nodes_per_second": nodes / traversal if traversal > 0 else 0.0,
        }
        for theirs, ours in ALWAYS.items():
            out[ours] = float(m[theirs])
        evaluated = False
        for key, value in m.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "eval" and parts[2] in EVAL:
                out[f"eval/{parts[1]}/{EVAL[parts[2]]}"] = float(value)
                evaluated = True
        if evaluated and "time/evaluation_seconds" in m:
            out["time/evaluation_seconds"] = float(m["time/evaluation_seconds"])
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        sys.exit(f"reference-trainer: {where}: expected a reference metrics object ({type(e).__name__}: {e})")
    return json.dumps(out)


def emit(line, where):
    out = convert(line, where)
    if out is not None:
        print(out, flush=True)


if sys.argv[1] == "convert":
    path = sys.argv[2]
    with open(path) as f:
        for number, line in enumerate(f, 1):
            emit(line, f"{path} line {number}")
    sys.exit(0)

# follow WORKDIR CMD...: runs the trainer in WORKDIR (its output to our
# stderr) and prints each line of the metrics.jsonl it writes there as soon
# as the line is whole, so that the runner stores every iteration as it
# ends rather than all of them when the run is over.
import glob
import subprocess
import time

work, cmd = sys.argv[2], sys.argv[3:]
proc = subprocess.Popen(cmd, cwd=work, stdout=sys.stderr)
path, f, pending, number = None, None, "", 0
while True:
    done = proc.poll() is not None
    if f is None:
        found = glob.glob(f"{work}/runs/**/metrics.jsonl", recursive=True)
        if found:
            path = found[0]
            f = open(path)
    if f is not None:
        pending += f.read()
        *whole, pending = pending.split("\n")
        for line in whole:
            number += 1
            emit(line, f"{path} line {number}")
    if done:
        break
    time.sleep(0.5)
if proc.returncode != 0:
    sys.exit(f"reference-trainer: the reference trainer failed with exit code {proc.returncode} (its output is above)")
if f is None:
    sys.exit(f"reference-trainer: the reference wrote no metrics.jsonl under {work}/runs")
if pending.strip():
    number += 1
    emit(pending, f"{path} line {number}")
EOF
}

if [[ "${1:-}" == "--convert" ]]; then
    [[ $# -eq 2 ]] || fail "usage: $0 --convert METRICS.jsonl"
    [[ -r "$2" ]] || fail "cannot read $2"
    lcx_lines "${PYTHON:-python3}" convert "$2"
    exit 0
fi

# Runs CMD in a fresh directory and prints the metrics.jsonl it writes under
# runs/ there as lcx metric lines, each as soon as it is whole.
follow() {
    local work
    work=$(mktemp -d "${TMPDIR:-/tmp}/lcx-reference.XXXXXX")
    # shellcheck disable=SC2064 # expand now: $work is local
    trap "rm -rf '$work'" EXIT
    lcx_lines "${PYTHON:-python3}" follow "$work" "$@"
}

if [[ "${1:-}" == "--follow" ]]; then
    [[ $# -ge 2 ]] || fail "usage: $0 --follow CMD [ARG...]"
    shift
    follow "$@"
    exit 0
fi

overrides=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --set)
        [[ $# -ge 2 && "$2" == *=* ]] || fail "--set takes KEY=VALUE (a reference config key), got '${2:-nothing}'"
        overrides+=(--set "$2")
        shift 2
        ;;
    *) fail "unknown argument '$1' (expected --set KEY=VALUE or --convert FILE)" ;;
    esac
done
if [[ -n "${LCX_ITERATIONS:-}" ]]; then
    overrides+=(--set "run.max_iterations=$LCX_ITERATIONS")
fi

dir=${LCX_REFERENCE_DIR:-$root/.reference}
src="$dir/src"
venv="$dir/venv"
url=${LCX_REFERENCE_URL:-https://github.com/sebastianrcnt/coolrl-lost-cities}
commit=${LCX_REFERENCE_COMMIT:-8f38092}

if [[ ! -e "$src/pyproject.toml" ]]; then
    echo "reference-trainer: cloning $url at $commit into $src" >&2
    git clone --quiet "$url" "$src" ||
        fail "could not clone $url into $src; clone it there yourself (or set LCX_REFERENCE_DIR to a folder whose src/ holds a checkout)"
    git -C "$src" checkout --quiet "$commit" || fail "$src has no commit $commit (LCX_REFERENCE_COMMIT)"
fi

if [[ ! -e "$venv/.lcx-ready" ]]; then
    torch_python="$root/.venv/bin/python"
    [[ -x "$torch_python" ]] && "$torch_python" -c 'import torch' 2>/dev/null ||
        fail "the reference needs PyTorch from the project's .venv; run scripts/provision-libtorch.sh first"
    echo "reference-trainer: setting up $venv (one-off: dependencies and the Cython build)" >&2
    "$torch_python" -m venv "$venv" || fail "'python -m venv $venv' failed"
    torch_site=$("$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    venv_site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    # Last in the path, after the venv's own packages.
    echo "$torch_site" >"$venv_site/zz-lcx-torch.pth"
    # setuptools below 82: PyTorch 2.11 requires that.
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
        "numpy>=1.26" "pydantic>=2.7" "PyYAML>=6.0" "Cython>=3.0" "setuptools>=69,<82" wheel "matplotlib>=3.8" ||
        fail "installing the reference's dependencies into $venv failed (network?)"
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet \
        --no-build-isolation --no-deps -e "$src" ||
        fail "building the reference ($src) failed; is a C compiler installed?"
    touch "$venv/.lcx-ready"
fi

# The reference writes runs/tmp/<time>_<name>/ under its working directory.
PYTHON="$venv/bin/python" follow "$venv/bin/python" -m coolrl_lost_cities.games.classic.deep_cfr.cli train \
    --config "$src/configs/deep_cfr/default.yaml" "${overrides[@]}"
