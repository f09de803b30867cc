#!/usr/bin/env bash
# Makes sure a libtorch for tch 0.24 (PyTorch 2.11.0) is available.
#
# - If LIBTORCH is set, it must point at a libtorch (a folder with lib/ and
#   include/); nothing is installed.
# - Otherwise PyTorch 2.11.0 is installed from the Python package registry into
#   .venv/ inside the repository, and .venv/libtorch is linked to its torch/
#   folder, which is what .cargo/config.toml points LIBTORCH at.
#
# Idempotent and quiet when everything is already in place.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
torch_version=2.11.0

fail() {
    echo "provision-libtorch: $*" >&2
    exit 1
}

if [[ -n "${LIBTORCH:-}" ]]; then
    [[ -e "$LIBTORCH/lib/libtorch_cpu.so" || -e "$LIBTORCH/lib/libtorch_cpu.dylib" ]] ||
        fail "LIBTORCH=$LIBTORCH has no lib/libtorch_cpu.so; point LIBTORCH at a libtorch $torch_version folder (one with lib/ and include/), or unset it to install PyTorch $torch_version into .venv"
    exit 0
fi

venv="$root/.venv"
link="$venv/libtorch"

# The CUDA graph shim (crates/lcx-trainer/csrc) compiles against libtorch's
# CUDA headers, which include the CUDA runtime's; pip's CUDA 13 runtime
# package leaves out their crt/ folder, which nvidia-cuda-crt of the same
# release holds (134 kB). Without it the shim builds without CUDA and says
# so (`lcx version --json`: "cuda_graphs"), so a failure here only warns.
cuda_headers() {
    local runtime
    runtime=$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("nvidia-cuda-runtime"))' 2>/dev/null) || return 0
    local include
    include=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu" + "'"${runtime%%.*}"'", "include"))' 2>/dev/null) || return 0
    [[ -e "$include/cuda_runtime_api.h" && ! -e "$include/crt/host_config.h" ]] || return 0
    local release=${runtime%.*}
    echo "provision-libtorch: adding the CUDA runtime's crt headers (nvidia-cuda-crt==$release.*) for the CUDA graph shim" >&2
    "$venv/bin/python" -m pip install --disable-pip-version-check --quiet --no-deps "nvidia-cuda-crt==$release.*" ||
        echo "provision-libtorch: warning: nvidia-cuda-crt==$release.* did not install; lcx builds without CUDA graphs" >&2
}

if [[ -e "$link/lib/libtorch_cpu.so" ]]; then
    cuda_headers
    exit 0
fi

python=${PYTHON:-python3}
command -v "$python" >/dev/null 2>&1 ||
    fail "no $python found; install Python 3.10+ (or set PYTHON=/path/to/python3), or set LIBTORCH=/path/to/libtorch"

# The install takes about 5 GB under .venv and pip unpacks the wheels
# beside it first; a full disk fails halfway, with a long pip traceback.
need_kb=$((8 * 1024 * 1024))
free_kb=$(df -Pk "$root" 2>/dev/null | awk 'NR == 2 { print $4 }')
if [[ "$free_kb" =~ ^[0-9]+$ ]] && ((free_kb < need_kb)); then
    fail "installing PyTorch $torch_version needs about 8 GB free on the disk holding $root; it has $((free_kb / 1024)) MB. Free some space and rerun, or set LIBTORCH=/path/to/libtorch"
fi

echo "provision-libtorch: installing PyTorch $torch_version into $venv (one-off, a few GB)..." >&2
if [[ ! -x "$venv/bin/python" ]]; then
    "$python" -m venv "$venv" ||
        fail "'$python -m venv $venv' failed; install the venv module (Debian: apt-get install python3-venv) or set LIBTORCH=/path/to/libtorch"
fi
"$venv/bin/python" -m pip install --disable-pip-version-check --quiet "torch==$torch_version" ||
    fail "'pip install torch==$torch_version' failed (network? disk space?); fix that and rerun, or set LIBTORCH=/path/to/libtorch"

# stderr dropped: importing torch without numpy prints a harmless warning.
torch_dir=$("$venv/bin/python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) ||
    fail "PyTorch was installed but does not import; remove $venv and rerun, or set LIBTORCH=/path/to/libtorch"
[[ -e "$torch_dir/lib/libtorch_cpu.so" ]] ||
    fail "$torch_dir has no lib/libtorch_cpu.so; remove $venv and rerun, or set LIBTORCH=/path/to/libtorch"
ln -sfn "$torch_dir" "$link"
cuda_headers
echo "provision-libtorch: libtorch ready at $link" >&2
