#!/usr/bin/env bash
# The whole test suite (what CI runs): installs what is missing, then every crate's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PQTLS_SETUP_TESTS=1 scripts/setup.sh
if cargo fmt --version >/dev/null 2>&1; then cargo fmt --all -- --check; fi
cargo test --workspace --locked --no-fail-fast "$@"
