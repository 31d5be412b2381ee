#!/usr/bin/env bash
# The main job: build pqtls and run the default assessment (`pqtls assess`, docs/assess.md):
# what moving from x25519 + P-256 to X25519MLKEM768 + ML-DSA-65 costs on every stack the build
# has — CPU per handshake step, bytes, round trips, connections/s, latency by layer, and
# TTFB/TTLB over a 50 ms / 100 Mbit/s link (the network lab as root; predicted otherwise) —
# and write its page. About 5 minutes on 2 cores after the first build of OpenSSL 3.5.
# Arguments go to `pqtls assess` (e.g. --to X25519MLKEM768:mldsa44:mldsa44 --rtt 30ms).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --release --locked -p pqtls-cli
bin=target/release/pqtls
[ -n "${CARGO_TARGET_DIR:-}" ] && bin="$CARGO_TARGET_DIR/release/pqtls"
"$bin" --version
"$bin" assess --html report.html --markdown report.md "$@"
echo "report: $(pwd)/report.html (and report.md)"
