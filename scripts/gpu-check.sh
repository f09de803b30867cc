#!/usr/bin/env bash
# lcx's GPU check: the CUDA and AMP paths run for real, inside a fixed time
# budget, from one command, with small results that explain themselves.
#
#   scripts/gpu-check.sh [--budget SECONDS] [--out DIR] [--bin DIR] [--dry-run-cpu]
#
# On the GPU host (an NVIDIA GPU, python3 with PyTorch 2.11): bring the two
# binaries of `cargo build --profile gpu --bins` (target/gpu/lcx and
# target/gpu/lcx-torch, stripped: under 64 MiB together) and the project's
# files, and run this from the project root. lcx-torch loads the libtorch of
# that PyTorch (its lib/ is put on LD_LIBRARY_PATH).
#
# Results, all under --out (default $OUT, else ./gpu-out):
#   summary.md        one page: device, versions, ceilings, rates, AMP, memory
#   NN-STEP.md        each step's own output (markdown tables, lcx report)
#   lcx-gpu.db        the database every experiment step recorded into
#   gpu-check.log     everything, with each step's time
#
# --budget (default 480 s) sizes every step and bounds it: a step gets its
# share of the budget (at least 10 s) as a hard limit (SIGINT, then SIGKILL
# 10 s later), and what is left of the budget after the last step is the
# slack. The whole check used 87 s of 300 on an H200 (2026-12-04).
#
# --dry-run-cpu runs every step on the CPU at the smallest sizes (the same
# commands, the same files): the test suite runs it, so the script cannot rot
# before the next GPU is at hand. The CUDA arms are then skipped by lcx
# (`requires = "cuda"`) and said so.
set -uo pipefail

budget=480
out=${OUT:-./gpu-out}
bin=""
dry=0
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --budget) budget=${2:-}; shift 2 ;;
        --out) out=${2:-}; shift 2 ;;
        --bin) bin=${2:-}; shift 2 ;;
        --dry-run-cpu) dry=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "gpu-check: unknown argument '$1' (expected --budget S, --out DIR, --bin DIR, --dry-run-cpu)" >&2; exit 2 ;;
    esac
done
case "$budget" in
    ''|*[!0-9]*) echo "gpu-check: --budget must be a whole number of seconds, got '$budget'" >&2; exit 2 ;;
esac
if [ "$budget" -lt 30 ]; then
    echo "gpu-check: --budget $budget is too short: the preflight alone may take 30 s" >&2
    exit 2
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
if [ -z "$bin" ]; then
    for d in target/gpu target/release target/debug; do
        [ -x "$d/lcx" ] && [ -x "$d/lcx-torch" ] && { bin=$d; break; }
    done
fi
lcx="$bin/lcx"
mkdir -p "$out" || { echo "gpu-check: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
log="$out/gpu-check.log"
: >"$log"
export LCX_DB="$out/lcx-gpu.db"
export LCX_RUNS_DIR="$out/runs"
# A private host lock and peak cache: the check measures, it does not wait
# for (or write into) the user's own.
export LCX_HOST_LOCK="$out/host.lock"
export LCX_PEAK_CACHE=${LCX_PEAK_CACHE:-$out/peak.json}
rm -f "$LCX_DB" "$LCX_DB-wal" "$LCX_DB-shm"
start=$(date +%s)

say() { echo "$*" | tee -a "$log"; }
fail() { say "gpu-check: FAILED at preflight: $*"; exit 1; }
elapsed() { echo $(( $(date +%s) - start )); }

# ---- preflight: each failure ends the script at once, with one line --------
say "# gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${budget} s$([ $dry = 1 ] && echo ', DRY RUN ON THE CPU')"
[ -n "$bin" ] && [ -x "$lcx" ] && [ -x "$bin/lcx-torch" ] ||
    fail "no lcx and lcx-torch in ${bin:-target/gpu, target/release or target/debug}: build them (cargo build --profile gpu --bins) and bring both, or pass --bin DIR"
size=$(( $(stat -c %s "$lcx") + $(stat -c %s "$bin/lcx-torch") ))
size_mib=$(( (size + 1048575) / 1048576 ))
if [ "$size" -gt $((64 * 1048576)) ]; then
    if [ $dry = 1 ]; then
        say "binaries: $size_mib MiB together (over 64 MiB; not enforced in a dry run, build with --profile gpu to carry them)"
    else
        fail "lcx and lcx-torch in $bin are $size_mib MiB together, over the 64 MiB a GPU call carries: build them with cargo build --profile gpu --bins"
    fi
else
    say "binaries: $size_mib MiB together ($bin)"
fi
py=${PYTHON:-python3}
if [ $dry = 1 ]; then
    device=cpu
    gpu_name="CPU (dry run: $(nproc) CPUs)"
    torch_py="not asked (dry run)"
else
    device=cuda
    command -v nvidia-smi >/dev/null || fail "nvidia-smi is not installed: no NVIDIA driver on this host"
    gpu_name=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1) ||
        fail "nvidia-smi sees no GPU: $gpu_name"
    torch_py=$(timeout 60 "$py" -c 'import torch; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"; print(torch.__version__, "CUDA", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 | tail -1) ||
        fail "PyTorch with CUDA does not import in $py: $torch_py"
    torch_lib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
    export LD_LIBRARY_PATH="$torch_lib:${LD_LIBRARY_PATH:-}"
fi
facts=$(timeout 60 "$lcx" version --json 2>&1) || fail "lcx-torch does not start: $facts"
if [ $dry = 0 ]; then
    case "$facts" in
        *'"cuda_available":true'*) ;;
        *) fail "lcx-torch loaded libtorch but sees no CUDA device (did it load libtorch_cuda from $torch_lib?): $facts" ;;
    esac
fi
# Says whether this lcx-torch has CUDA graphs built in.
verbose=$(timeout 60 "$lcx" version --verbose 2>&1 | tail -1)
say "device: $gpu_name"
say "python torch: $torch_py"
say "lcx: $facts"
say "preflight: $(elapsed) s"

# ---- sizes: the budget's shares, and iterations that fit them ---------------
scale() { local v=$(( $1 * budget / 420 )); [ "$v" -lt "$2" ] && v=$2; echo "$v"; }
if [ $dry = 1 ]; then
    # The smallest sizes that still run every code path of every step.
    bench_sets=(--config configs/smoke.toml --set network.hidden_size=32)
    forward_batches=1,16
    trainer_runs=2
    trainer_updates=2
    yardstick=(--device cpu --hidden 16 --batch 64 --rows 512 --steps 3)
    amp_iters=3
    optb_iters=2
    optb_sets=(--set traversal.traversals_per_player=2 --set optimization.advantage_updates_per_iteration=2
               --set optimization.strategy_updates_per_iteration=2 --set network.hidden_size=16
               --set traversal.max_nodes_per_traversal=200)
    train_iters=2
    train_sets=(--set optimization.advantage_updates_per_iteration=4)
    # The CPU reference arm too: here it is the one arm that runs.
    amp_arms=fp32-cuda,amp-cuda,fp32-cpu
    amp_sets=(--set network.hidden_size=32 --set optimization.advantage_updates_per_iteration=2
              --set optimization.strategy_updates_per_iteration=2 --set optimization.advantage_batch_size=8
              --set optimization.strategy_batch_size=8)
    matmul=256
    graph_steps=4
    graphs_iters=2
    crossover_sets=()
    versus_iters=2
    versus_sets=("${optb_sets[@]}" --set optimization.advantage_batch_size=8 --set optimization.strategy_batch_size=8)
else
    bench_sets=(--config configs/default.toml)
    forward_batches=1,16,256,1024,4096
    trainer_runs=$(scale 10 3)
    # A quarter of the default's 512 updates per network: the same steps,
    # four times as many timed calls in the share (ms per step is the figure).
    trainer_updates=128
    yardstick=()
    amp_iters=$(scale 12 4)
    optb_iters=$(scale 3 2)
    # Half the file's traversals: its two CPU arms (the baseline and the
    # gate's) must leave the CUDA arm, which runs last, time in its share.
    optb_sets=(--set traversal.traversals_per_player=20)
    train_iters=$(scale 3 2)
    train_sets=(--set traversal.traversals_per_player=40)
    # The CPU reference arm would train the default network on the host's
    # cores for minutes: the two CUDA arms only.
    amp_arms=fp32-cuda,amp-cuda
    amp_sets=(--set optimization.advantage_updates_per_iteration=$trainer_updates
              --set optimization.strategy_updates_per_iteration=$trainer_updates)
    matmul=4096
    graph_steps=64
    graphs_iters=$(scale 4 2)
    # 32 cells, each a process that starts CUDA: 64 updates a network a
    # call and 3 timed calls keep the grid to a few minutes.
    crossover_sets=(--set optimization.advantage_updates_per_iteration=64
                    --set optimization.strategy_updates_per_iteration=64)
    versus_iters=$(scale 3 2)
    versus_sets=()
fi

n=0
status_lines=()
# step NAME SHARE(percent of the budget) COMMAND...: runs COMMAND with the
# smaller of its share and what is left (minus 15 s for the summary), output
# to NN-NAME.md and the log; a step that cannot get 5 s is skipped.
step() {
    local name=$1 share=$2; shift 2
    n=$((n + 1))
    local file
    file=$(printf '%s/%02d-%s.md' "$out" "$n" "$name")
    local left=$(( budget - $(elapsed) - 15 ))
    local limit=$(( budget * share / 100 ))
    # A short step (a report, the CPU weights) needs seconds, not a share.
    [ "$limit" -lt 10 ] && limit=10
    [ "$limit" -gt "$left" ] && limit=$left
    if [ "$limit" -lt 5 ]; then
        say "== $name: SKIPPED, the budget is spent ($(elapsed) s of $budget)"
        status_lines+=("| $name | skipped: budget spent | - |")
        return
    fi
    say "== $name (limit ${limit} s): $*"
    local t0 rc
    t0=$(date +%s)
    { echo "# $name"; echo; echo "\`$*\`"; echo; } >"$file"
    timeout --signal=INT --kill-after=10 "$limit" "$@" >>"$file" 2>&1
    rc=$?
    local took=$(( $(date +%s) - t0 ))
    cat "$file" >>"$log"
    local what="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && what="stopped at its limit (${limit} s)"
    say "== $name: $what, ${took} s (total $(elapsed) s)"
    status_lines+=("| $name | $what | ${took} s |")
}

step peak 5 "$lcx" bench peak --device "$device" --matmul-size "$matmul" --metrics-out "$out/peak.jsonl"
step forward 10 "$lcx" bench forward "${bench_sets[@]}" --device "$device" --batch-sizes "$forward_batches" --reps 5 --metrics-out "$out/forward.jsonl"
trainer_sets=(--set optimization.advantage_updates_per_iteration=$trainer_updates
              --set optimization.strategy_updates_per_iteration=$trainer_updates)
step trainer 12 "$lcx" bench trainer "${bench_sets[@]}" "${trainer_sets[@]}" --device "$device" --both \
    --runs "$trainer_runs" --warmup 2 --metrics-out "$out/trainer.jsonl"
# fp32 again with the networks one after the other: what training them on
# three threads at once (optimization.concurrent_networks) gains.
step trainer-sequential 6 "$lcx" bench trainer "${bench_sets[@]}" "${trainer_sets[@]}" --device "$device" \
    --set optimization.concurrent_networks=false --runs "$trainer_runs" --warmup 2 --metrics-out "$out/trainer-seq.jsonl"
# The same seed's weights drawn for a CPU trainer: its digest must be the
# one the step above printed for the device's.
step weights-cpu 3 "$lcx" bench trainer "${bench_sets[@]}" --set optimization.advantage_updates_per_iteration=1 \
    --set optimization.strategy_updates_per_iteration=1 --device cpu --runs 1 --warmup 0
# CUDA graphs (optimization.cuda_graphs): each network trained twice from
# the same weights and batches, eager and replayed from a graph, and how far
# the weights end apart (exit 1 beyond 1e-5); then the graphed step timed.
step graphs 4 "$lcx" bench graphs "${bench_sets[@]}" --device "$device" --steps "$graph_steps"
step trainer-graphed 10 "$lcx" bench trainer "${bench_sets[@]}" "${trainer_sets[@]}" --device "$device" --both \
    --set optimization.cuda_graphs=true --runs "$trainer_runs" --warmup 2 --metrics-out "$out/trainer-graphed.jsonl"
step trainer-graphed-sequential 5 "$lcx" bench trainer "${bench_sets[@]}" "${trainer_sets[@]}" --device "$device" \
    --set optimization.cuda_graphs=true --set optimization.concurrent_networks=false \
    --runs "$trainer_runs" --warmup 2 --metrics-out "$out/trainer-graphed-seq.jsonl"
# PyTorch's own eager step on the same network and batch, side by side
# with lcx's, and its CUDA-graphed step (a dry run has no torch in python3:
# the provisioned .venv's).
yardstick_py=$py
[ $dry = 1 ] && yardstick_py="$root/.venv/bin/python"
if [ -x "$(command -v "$yardstick_py")" ]; then
    step torch-yardstick 6 "$yardstick_py" "$root/scripts/torch-step-yardstick.py" "${yardstick[@]}"
else
    say "== torch-yardstick: SKIPPED, no python with torch at $yardstick_py"
    status_lines+=("| torch-yardstick | skipped: no python with torch | - |")
fi
# The whole CUDA trainer eager, with graphed steps, and with graphed
# forwards too (every arm needs CUDA: a dry run skips them and says so).
step cuda-graphs 12 "$lcx" run experiments/cuda-graphs.toml --iterations "$graphs_iters" --warmup 1 --repeats 1 --plain
step cuda-graphs-report 2 "$lcx" report cuda-graphs
# Where AMP starts to pay, eager and graphed (every arm needs CUDA: a dry
# run skips them all and says so).
step amp-crossover-cuda 35 "$lcx" run experiments/amp-crossover-cuda.toml \
    --iterations 3 --warmup 1 --repeats 1 --plain "${crossover_sets[@]}"
step amp-crossover-cuda-report 2 "$lcx" report amp-crossover-cuda
# The seed's comparison: one CUDA process against a worker per core.
step cuda-vs-workers 15 "$lcx" run experiments/cuda-vs-workers.toml \
    --iterations "$versus_iters" --warmup 1 --repeats 1 --plain "${versus_sets[@]}"
step cuda-vs-workers-report 2 "$lcx" report cuda-vs-workers
# The experiment files as they are: their CUDA arms set the device
# themselves; --arms picks those (and, in a dry run, the CPU reference arm),
# the flags size them.
step amp 22 "$lcx" run experiments/amp.toml --arms "$amp_arms" \
    --iterations "$amp_iters" --warmup 1 --repeats 1 --plain "${amp_sets[@]}"
step amp-report 2 "$lcx" report amp
step option-b 24 "$lcx" run experiments/option-b.toml --arms recursive,interleaved-workers,interleaved-cuda \
    --iterations "$optb_iters" --warmup 1 --repeats 1 --plain "${optb_sets[@]}"
step option-b-report 2 "$lcx" report option-b
# The whole trainer on the device: TorchScript-traced networks, AMP,
# evaluation on the CPU beside CUDA training, a checkpoint written and
# resumed from.
train_dir="$out/train"
step train 10 "$lcx" train --config configs/smoke.toml --runs-dir "$train_dir" --keep \
    --set run.device="$device" --set run.use_amp=true --set network.jit=trace \
    --set evaluation.device=cpu --set evaluation.eval_every=1 --set evaluation.games=4 \
    --set checkpoint.save_latest=true --set run.max_iterations="$train_iters" \
    "${train_sets[@]}" --metrics-out "$out/train.jsonl"
latest=$(ls -d "$train_dir"/*/ 2>/dev/null | tail -1)
ckpt="${latest}latest.json"
if [ -n "$latest" ] && [ -f "$ckpt" ]; then
    step resume 5 "$lcx" train --config configs/smoke.toml --runs-dir "$train_dir" \
        --set run.device="$device" --set run.use_amp=true --set network.jit=trace \
        --set evaluation.device=cpu --set run.max_iterations=$((train_iters + 1)) \
        --resume "$ckpt" --metrics-out "$out/resume.jsonl"
else
    say "== resume: SKIPPED, the train step left no checkpoint"
    status_lines+=("| resume | skipped: no checkpoint | - |")
fi

# ---- summary.md --------------------------------------------------------------
q() { "$lcx" query --format csv "$1" 2>/dev/null | tail -n +2; }
jl() { # jl KEY [FILE]: the KEY values of JSON lines (FILE, else stdin), one per line
    grep -o "\"$1\":[^,}]*" "${2:--}" 2>/dev/null | cut -d: -f2 | tr -d '"'
}
mode() { grep "\"precision_requested\":\"$1\"" "${2:-$out/trainer.jsonl}" 2>/dev/null; } # bench trainer's lines of MODE [FILE]
mean() { awk '{ s += $1; n++ } END { if (n) printf "%.4g", s / n; else printf "-" }'; }
per_step() { awk -v k=$((3 * trainer_updates)) '{ printf "%.4g\n", $1 / k }'; } # ms per call -> ms per step
digest() { grep -ho 'initial weights digest [0-9a-f]*' "$out"/*-"$1".md 2>/dev/null | awk '{ print $4 }' | tail -1; }
yard() { grep -ho "$1: [0-9.]* ms/step" "$out"/*-torch-yardstick.md 2>/dev/null | awk '{ print $(NF-1) }' | tail -1; }
dev_digest=$(digest trainer)
cpu_digest=$(digest weights-cpu)
if [ -z "$dev_digest" ] || [ -z "$cpu_digest" ]; then
    weights="not compared: a step did not print its digest"
elif [ "$dev_digest" = "$cpu_digest" ]; then
    weights="the same ($dev_digest)"
else
    weights="DIFFER: $device $dev_digest, cpu $cpu_digest"
fi
# The report, one echo a line: its table rows look alike because they
# are a template, each naming its own measure, not a loop written out.
{
    echo "# lcx GPU check, $(date -u +%Y-%m-%d)"
    echo
    [ $dry = 1 ] && { echo "**Dry run on the CPU**: the CUDA arms were skipped; this shows the shape, not GPU figures."; echo; }
    echo "| | |"
    echo "|---|---|"
    echo "| device | $gpu_name |"
    echo "| PyTorch (python) | $torch_py |"
    echo "| lcx and its libtorch | $facts |"
    echo "| lcx version --verbose | $verbose |"
    echo "| binaries | $size_mib MiB |"
    echo "| budget | ${budget} s, used $(elapsed) s |"
    echo
    echo "## Ceilings"
    echo
    echo "| measure | GFLOP/s |"
    echo "|---|---|"
    echo "| host FP32 FMA peak, all cores | $(jl 'peak/fp32_gflops' "$out/peak.jsonl" | mean) |"
    echo "| $device FP32 matmul ${matmul}² | $(jl 'peak/matmul_gflops' "$out/peak.jsonl" | mean) |"
    echo "| $device half-precision matmul ${matmul}² | $(jl 'peak/matmul_half_gflops' "$out/peak.jsonl" | mean) |"
    echo
    echo "## Training"
    echo
    echo "| measure | value |"
    echo "|---|---|"
    echo "| bench trainer ms/step, fp32, networks at once ($((3 * trainer_updates)) steps a call) | $(mode fp32 | jl bench/ms_per_call | per_step | mean) |"
    echo "| bench trainer ms/step, fp32, networks one after the other | $(mode fp32 "$out/trainer-seq.jsonl" | jl bench/ms_per_call | per_step | mean) |"
    echo "| bench trainer ms/step, AMP requested (one after the other: one grad scaler) | $(mode amp | jl bench/ms_per_call | per_step | mean) |"
    echo "| initial weights, CPU and $device trainers of one seed | $weights |"
    echo "| PyTorch eager ms/step, same network and batch, fp32, fused AdamW | $(yard 'fp32, fused AdamW') |"
    echo "| PyTorch eager ms/step, fp32, foreach AdamW | $(yard 'fp32, foreach AdamW') |"
    echo "| PyTorch eager ms/step, AMP fp16, fused AdamW | $(yard 'AMP fp16, fused AdamW') |"
    echo "| PyTorch CUDA-graphed ms/step, fp32, capturable fused AdamW | $(yard 'fp32, CUDA graph, fused AdamW') |"
    echo "| precision the AMP steps ran in | $(mode amp | jl precision | sort -u | tr '\n' ' ') |"
    echo
    echo "## CUDA graphs"
    echo
    echo "| measure | value |"
    echo "|---|---|"
    echo "| bench trainer ms/step, fp32 graphed, networks at once | $(mode fp32 "$out/trainer-graphed.jsonl" | jl bench/ms_per_call | per_step | mean) |"
    echo "| bench trainer ms/step, fp32 graphed, networks one after the other | $(mode fp32 "$out/trainer-graphed-seq.jsonl" | jl bench/ms_per_call | per_step | mean) |"
    echo "| bench trainer ms/step, AMP requested, graphed | $(mode amp "$out/trainer-graphed.jsonl" | jl bench/ms_per_call | per_step | mean) |"
    echo "| steps replayed from a graph, graphed bench calls (of $((3 * trainer_updates)) a call) | $(jl bench/graphed_steps "$out/trainer-graphed.jsonl" | sort -u | tr '\n' ' ') |"
    echo "| $(grep -h 'speedup' "$out"/*-trainer-graphed.md 2>/dev/null | tail -1 || echo 'speedup: -') | |"
    echo
    echo "Graph against eager, $graph_steps steps a network from the same weights and batches (\`lcx bench graphs\`):"
    echo
    grep -h '^|' "$out"/*-graphs.md 2>/dev/null || echo "(the graphs step printed no table)"
    echo "| $(grep -h 'speedup' "$out"/*-trainer.md 2>/dev/null | tail -1 || echo 'speedup: -') | |"
    echo "| AMP overflow (skipped) steps, train | $(jl 'amp/overflow_steps' "$out/train.jsonl" | awk '{s+=$1} END {print s+0}') |"
    echo "| final loss scale, train | $(jl 'amp/grad_scale' "$out/train.jsonl" | tail -1) |"
    echo "| training GFLOP/s, train (mean) | $(jl 'perf/training_gflops' "$out/train.jsonl" | mean) |"
    echo "| GPU memory, train (max MiB) | $(jl 'gpu/memory_used_mib' "$out/train.jsonl" | sort -g | tail -1) |"
    echo
    echo "## Experiments (means over measured iterations; the reports are in the step files)"
    echo
    echo "| experiment | arm | status | iterations | metric | mean |"
    echo "|---|---|---|---|---|---|"
    q "SELECT e.name, r.arm, r.status, (SELECT COUNT(DISTINCT iteration) FROM metrics m WHERE m.run_id = r.id AND m.superseded = 0), s.name, CASE WHEN s.mean IS NULL THEN '-' ELSE printf('%.4g', s.mean) END
       FROM runs r JOIN experiments e ON e.id = r.experiment_id
       LEFT JOIN run_metric_stats s ON s.run_id = r.id AND s.name IN
         ('bench/ms_per_call', 'traversal/nodes_per_second', 'time/iteration_seconds', 'perf/training_gflops', 'amp/overflow_steps', 'gpu/memory_used_mib')
       ORDER BY e.id, r.arm_index, s.name" | sed 's/,/ | /g; s/^/| /; s/$/ |/'
    echo
    echo "## Steps"
    echo
    echo "| step | result | time |"
    echo "|---|---|---|"
    printf '%s\n' "${status_lines[@]}"
} >"$out/summary.md"
say "summary: $out/summary.md ($(elapsed) s of $budget)"
cat "$out/summary.md"
