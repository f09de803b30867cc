#!/usr/bin/env bash
# lcx's CPU check for AMP (issue 74): on a host with bf16 units (AVX512_BF16
# or AMX) run this first thing; it runs what only such a host can, and
# writes a summary to paste into the README and decision 0029.
#
#   scripts/cpu-check.sh [--out DIR] [--bin DIR] [--quick]
#
# Steps, each said as it runs:
#   1. the host: CPU, its bf16 units, the load;
#   2. the bf16 kernel tests (cargo test --release, lcx-trainer's kernel::
#      tests): a kernel this CPU lacks is skipped and named;
#   3. `lcx bench peak`: the FP32 ceiling the roofline reads against;
#   4. lcx fp32 vs lcx bf16 (`lcx bench trainer --both`) and PyTorch fp32
#      vs autocast bf16 (scripts/torch-step-yardstick.py) at batch 256 and
#      1,024, ms per step, side by side;
#   5. experiments/amp-cpu.toml and its report (the verdict and gate).
# On a host without bf16 units it says so and runs the same steps: bf16 then
# runs at fp32's speed on the AVX2 kernel, and PyTorch's autocast falls to
# its slow path.
#
# Results under --out (default ./cpu-out): summary.md (the tables),
# cpu-check.log (everything), cpu-check.db (the experiment's database).
# --bin is where lcx and lcx-torch are (default: ./lcx builds them in
# release). --quick runs every step at the smallest sizes and skips the
# cargo step and the experiment (the test suite runs it this way, so the
# script cannot rot between bf16 hosts).
set -uo pipefail

out=./cpu-out
bin=""
quick=0
usage() { sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=${2:-}; shift 2 ;;
        --bin) bin=${2:-}; shift 2 ;;
        --quick) quick=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "cpu-check: unknown argument '$1' (expected --out DIR, --bin DIR, --quick)" >&2; exit 2 ;;
    esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
mkdir -p "$out" || { echo "cpu-check: cannot create $out" >&2; exit 2; }
out=$(cd "$out" && pwd)
log="$out/cpu-check.log"
summary="$out/summary.md"
: >"$log"
say() { echo "$*" | tee -a "$log"; }
if [ -z "$bin" ]; then
    ./lcx version >/dev/null 2>>"$log" || { say "cpu-check: could not build lcx (./lcx version failed; see $log)"; exit 1; }
    bin=${CARGO_TARGET_DIR:-target}/release
fi
lcx="$bin/lcx"
[ -x "$lcx" ] && [ -x "$bin/lcx-torch" ] || { say "cpu-check: no lcx and lcx-torch in $bin"; exit 2; }
py=${PYTHON:-$root/.venv/bin/python}
export LCX_DB="$out/cpu-check.db"
export LCX_RUNS_DIR="$out/runs"
export LCX_HOST_LOCK="$out/host.lock"
export LCX_PEAK_CACHE=${LCX_PEAK_CACHE:-$out/peak.json}
rm -f "$LCX_DB" "$LCX_DB-wal" "$LCX_DB-shm"

# ---- 1. the host ------------------------------------------------------------
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n')
has() { grep -qx "$1" <<<"$flags"; }
model=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')
units=()
for f in avx2 fma avx512f avx512_bf16 amx_tile amx_bf16; do has "$f" && units+=("$f"); done
bf16_units=0
if has avx512_bf16 || has amx_bf16; then bf16_units=1; fi
say "# cpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ)$([ $quick = 1 ] && echo ', QUICK (smallest sizes)')"
say "cpu: ${model:-unknown}, $(nproc) CPUs; flags: ${units[*]:-none of avx2 fma avx512f avx512_bf16 amx}"
if [ $bf16_units = 1 ]; then
    say "bf16 units: yes ($(has amx_bf16 && echo 'AMX tiles, which lcx has no kernel for yet: bf16 runs on ')$(has avx512_bf16 && echo 'AVX512_BF16 VDPBF16PS'))"
else
    say "bf16 units: none. bf16 runs at fp32's speed here (the AVX2 kernel widens it); the figures below are the portable part"
fi
say "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
{
    echo "# cpu-check, $(date -u +%Y-%m-%d)"
    echo
    echo "- cpu: ${model:-unknown}, $(nproc) CPUs; flags: ${units[*]:-none}"
    echo "- bf16 units: $([ $bf16_units = 1 ] && echo yes || echo none)"
    echo "- load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$summary"

# ---- 2. the kernel tests ----------------------------------------------------
if [ $quick = 1 ]; then
    say "== kernel tests: skipped (--quick: the test suite runs them)"
    echo "- kernel tests: skipped (--quick)" >>"$summary"
else
    say "== kernel tests (cargo test --release -p lcx-trainer --lib kernel::)"
    tests=$(cargo test --locked --release -p lcx-trainer --lib kernel:: -- --test-threads=1 2>&1)
    echo "$tests" >>"$log"
    result=$(grep -m1 '^test result' <<<"$tests")
    skipped=$(grep -o '[a-z0-9-]* kernel SKIPPED, this CPU lacks .*' <<<"$tests" | sort -u | paste -sd ';' -)
    say "kernel tests: ${result:-did not run}${skipped:+; $skipped}"
    echo "- kernel tests: ${result:-did not run}${skipped:+; skipped: $skipped}" >>"$summary"
fi

# ---- 3. the ceiling ---------------------------------------------------------
say "== lcx bench peak"
peak=$("$lcx" bench peak --metrics-out - 2>>"$log" | tail -1)
echo "$peak" >>"$log"
field() { python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print("–" if v is None else (f"{v:.0f}" if isinstance(v,(int,float)) else v))' "$1" "$2" 2>/dev/null || echo "–"; }
say "peak: $(field "$peak" peak/fp32_gflops) GFLOP/s FP32 on all cores ($(field "$peak" peak/isa))"
echo "- FP32 ceiling: $(field "$peak" peak/fp32_gflops) GFLOP/s on all cores, $(field "$peak" peak/fp32_gflops_core) on one ($(field "$peak" peak/isa))" >>"$summary"

# ---- 4. steps side by side --------------------------------------------------
if [ $quick = 1 ]; then
    batches=(16 64); updates=2; runs=2; torch_steps=2; torch_lines=2
    shape=(--config configs/smoke.toml --set network.hidden_size=64)
    torch_shape=(--input 32 --hidden 64)
else
    batches=(256 1024); updates=64; runs=5; torch_steps=30; torch_lines=3
    shape=(--config configs/default.toml)
    torch_shape=()
fi
# The mean of one metric over JSON lines on stdin, per precision.
mean_of() {
    python3 -c '
import json, sys
want, metric = sys.argv[1], sys.argv[2]
vals = []
for line in sys.stdin:
    try:
        v = json.loads(line)
    except ValueError:
        continue
    if v.get("precision") == want and isinstance(v.get(metric), (int, float)):
        vals.append(v[metric])
print(f"{sum(vals) / len(vals):.2f}" if vals else "–")' "$1" "$2"
}
kernel_of() {
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        v = json.loads(line)
    except ValueError:
        continue
    if v.get("precision") == sys.argv[1]:
        print(v.get("training_kernel", "?")); break' "$1"
}
ratio() { python3 -c 'import sys
try: print(f"{float(sys.argv[1]) / float(sys.argv[2]):.2f}×")
except (ValueError, ZeroDivisionError): print("–")' "$1" "$2"; }
{
    echo
    echo "ms per training step, $(nproc) threads (lcx: bench/ms_per_step of \`lcx bench trainer --both\`, $updates updates per network; PyTorch: scripts/torch-step-yardstick.py, fused AdamW):"
    echo
    echo "| batch | lcx fp32 | lcx bf16 | lcx bf16 kernel | bf16 vs fp32 | PyTorch fp32 | PyTorch autocast bf16 | lcx bf16 vs PyTorch bf16 |"
    echo "|---|---|---|---|---|---|---|---|"
} >>"$summary"
have_torch=0
"$py" -c 'import torch' 2>/dev/null && have_torch=1
[ $have_torch = 1 ] || say "PyTorch: not importable from $py (set PYTHON, or run scripts/provision-libtorch.sh); its columns stay empty"
for b in "${batches[@]}"; do
    say "== batch $b: lcx bench trainer --both"
    lines=$("$lcx" bench trainer --both "${shape[@]}" --runs "$runs" --warmup 1 --metrics-out - \
        --set run.device=cpu --set optimization.advantage_batch_size="$b" --set optimization.strategy_batch_size="$b" \
        --set optimization.advantage_updates_per_iteration="$updates" \
        --set optimization.strategy_updates_per_iteration="$updates" 2>>"$log")
    echo "$lines" >>"$log"
    f32=$(mean_of fp32 bench/ms_per_step <<<"$lines")
    amp=$(mean_of bf16 bench/ms_per_step <<<"$lines")
    [ "$amp" = "–" ] && amp="$(mean_of fp32 bench/ms_per_step <<<"$(grep '"precision_requested":"amp"' <<<"$lines")") (ran fp32)"
    kern=$(kernel_of bf16 <<<"$lines")
    tf32="–"; tamp="–"
    if [ $have_torch = 1 ]; then
        say "== batch $b: PyTorch fp32 and autocast bf16"
        for mode in fp32 amp; do
            t=$("$py" scripts/torch-step-yardstick.py --device cpu --only "$mode" --batch "$b" \
                --steps "$torch_steps" --rows 16384 --lines "$torch_lines" "${torch_shape[@]}" 2>>"$log")
            echo "$t" >>"$log"
            if [ $mode = fp32 ]; then tf32=$(mean_of fp32 bench/ms_per_step <<<"$t"); else tamp=$(mean_of bf16 bench/ms_per_step <<<"$t"); fi
        done
    fi
    say "batch $b: lcx fp32 $f32, lcx bf16 $amp (${kern:-?}), PyTorch fp32 $tf32, autocast bf16 $tamp ms/step"
    echo "| $b | $f32 | $amp | ${kern:-–} | $(ratio "$f32" "$amp") | $tf32 | $tamp | $(ratio "$tamp" "$amp") |" >>"$summary"
done

# ---- 5. the experiment ------------------------------------------------------
if [ $quick = 1 ]; then
    say "== experiments/amp-cpu.toml: skipped (--quick)"
    echo >>"$summary"; echo "- experiments/amp-cpu.toml: skipped (--quick)" >>"$summary"
else
    say "== lcx run experiments/amp-cpu.toml"
    arms=fp32-cpu,amp-cpu
    [ $have_torch = 1 ] && arms=fp32-cpu,amp-cpu,torch-fp32,torch-amp
    "$lcx" run experiments/amp-cpu.toml --arms "$arms" --plain >>"$log" 2>&1
    report=$("$lcx" report amp-cpu 2>>"$log")
    echo "$report" >>"$log"
    {
        echo
        echo "experiments/amp-cpu.toml:"
        echo
        sed -n '/^| Mode/,/^$/p' <<<"$report"
        grep -m1 '^Verdict:' <<<"$report"
        echo
        grep -A3 '^Guards' <<<"$report" | grep '^- '
    } >>"$summary"
fi
say "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo >>"$summary"; echo "- load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$summary"
say "summary: $summary"
cat "$summary"
