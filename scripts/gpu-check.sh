#!/usr/bin/env bash
# Runs lcx's GPU checks on a machine with an NVIDIA GPU and a system PyTorch 2.11.
# Usage (from the project root, with target/release/lcx and lcx-torch built on
# the CPU machine and carried along):
#   bash scripts/gpu-check.sh
# Writes everything it measures under ${OUT:-./gpu-out}.
set -uo pipefail
out=${OUT:-./gpu-out}; mkdir -p "$out"
bin=${LCX_BIN:-target/release/lcx}
[ -x "$bin" ] && [ -x "$(dirname "$bin")/lcx-torch" ] || { echo "no $bin or lcx-torch beside it: build them first (cargo build --release) and bring both along"; exit 2; }
py=${PYTHON:-python3}
torch_lib=$("$py" -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))' 2>/dev/null)
[ -n "$torch_lib" ] && export LD_LIBRARY_PATH="$torch_lib:${LD_LIBRARY_PATH:-}"
export LCX_DB="$out/lcx-gpu.db"
step() { echo; echo "=== $*"; "$@" 2>&1 | tee -a "$out/gpu-check.log"; echo "exit: ${PIPESTATUS[0]}"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
"$py" -c 'import torch;print("torch",torch.__version__,"cuda",torch.version.cuda)' | tee -a "$out/gpu.txt"
step "$bin" --version
step "$bin" bench forward --device cuda --batch-sizes 1,4,16,64,256,1024
step "$bin" bench trainer --config configs/default.toml --device cuda
step "$bin" bench trainer --config configs/default.toml --device cuda --both
for exp in ${LCX_GPU_EXPERIMENTS:-experiments/amp.toml experiments/option-b.toml}; do
  [ -f "$exp" ] && step "$bin" run "$exp" --set run.device=cuda ${LCX_GPU_RUN_ARGS:-}
done
step "$bin" report --all
cp -f "$LCX_DB" "$out/" 2>/dev/null
echo "done: results under $out"
