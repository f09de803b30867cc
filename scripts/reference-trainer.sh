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
#
# Lines printed (per reference iteration), under lcx's names:
#   iteration, time/iteration_seconds (evaluation included, as in lcx),
#   time/traversal_seconds, time/training_seconds (its advantage plus
#   strategy training: they run one after the other), traversal/nodes and
#   traversal/nodes_per_second (nodes over traversal seconds, lcx's
#   definition; the reference's own time/nodes_per_second divides by the
#   whole iteration);
#   loss/advantage (the mean over both players' updates) and loss/strategy
#   (the last update's), samples/advantage and samples/strategy (the
#   memories' sizes), the same quantities lcx prints under these names;
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

# Reads the reference's metrics.jsonl ($1) and writes lcx metric lines.
convert() {
    "${PYTHON:-python3}" - "$1" <<'EOF'
import json
import sys

# Reference key -> lcx key, for keys that are there on every iteration.
ALWAYS = {
    "loss/advantage": "loss/advantage",
    "loss/strategy": "loss/strategy",
    "samples/advantage": "samples/advantage",
    "samples/strategy": "samples/strategy",
}
# Per-opponent evaluation keys (eval/<opponent>/<key>), reference -> lcx.
EVAL = {k: k for k in (
    "games", "wins0", "wins1", "draws", "win_rate0", "win_rate1", "avg_score0",
    "avg_score1", "avg_score_diff0", "avg_game_length", "max_step_timeouts",
)}
EVAL["games_per_second"] = "throughput"

path = sys.argv[1]
with open(path) as f:
    for number, line in enumerate(f, 1):
        if not line.strip():
            continue
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
            sys.exit(f"reference-trainer: {path} line {number}: expected a reference metrics object ({type(e).__name__}: {e})")
        print(json.dumps(out), flush=True)
EOF
}

if [[ "${1:-}" == "--convert" ]]; then
    [[ $# -eq 2 ]] || fail "usage: $0 --convert METRICS.jsonl"
    [[ -r "$2" ]] || fail "cannot read $2"
    convert "$2"
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
work=$(mktemp -d "${TMPDIR:-/tmp}/lcx-reference.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && "$venv/bin/python" -m coolrl_lost_cities.games.classic.deep_cfr.cli train \
    --config "$src/configs/deep_cfr/default.yaml" "${overrides[@]}" >&2) ||
    fail "the reference trainer failed (its output is above)"
metrics=$(find "$work/runs" -name metrics.jsonl -print -quit)
[[ -n "$metrics" ]] || fail "the reference wrote no metrics.jsonl under $work/runs"
PYTHON="$venv/bin/python" convert "$metrics"
