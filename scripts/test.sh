#!/usr/bin/env bash
# The whole test suite: provisions libtorch on first use, then runs every unit
# and integration test of the workspace's three crates, then, alone, the few
# integration tests that need a host nothing else is using (ignored in the
# parallel run: the tests beside them would be their contention). Extra
# arguments go to the first `cargo test`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/provision-libtorch.sh"
cd "$root"
cargo test --locked --workspace --all-targets "$@"
cargo test --locked --test integration -- --ignored --test-threads=1 quiet_host
