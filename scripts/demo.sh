#!/usr/bin/env bash
# The main job: build pqtls, run the built-in default experiment (classical vs hybrid vs
# pure ML-KEM groups × P-256 vs ML-DSA chains, on every stack the build has) and write its
# report. A few minutes on 2 cores, most of it the first build of OpenSSL 3.5.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked -p pqtls-cli
bin=target/release/pqtls
[ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/release/pqtls"
"$bin" --version
"$bin" run experiments/default.toml "$@"
"$bin" report results/default --html report.html --markdown report.md
echo "report: $(pwd)/report.html (and report.md)"
