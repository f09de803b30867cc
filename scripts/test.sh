#!/usr/bin/env bash
# The whole test suite: provisions libtorch on first use, then runs every unit
# and integration test of the workspace's three crates. Extra arguments go to
# `cargo test`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/provision-libtorch.sh"
cd "$root"
cargo test --locked --workspace --all-targets "$@"
