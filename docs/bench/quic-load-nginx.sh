#!/usr/bin/env bash
# HTTP/3 vs HTTPS/1.1 against the trixie root's nginx 1.26 (docs/quic-load.md): one nginx serving a
# 1 KiB file on TCP (ssl) and UDP (quic) at the same port, loaded by pqtls (rustls) over each in
# turn, rounds alternating the order. Usage (root): docs/bench/quic-load-nginx.sh PQTLS OUT_DIR [ROUNDS]
set -euo pipefail
pqtls=$(realpath "$1") out=$(realpath -m "$2") rounds=${3:-3}
root=${PQTLS_TRIXIE_ROOT:-/var/cache/pqtls/trixie}
mkdir -p "$out"
inside=/tmp/pqtls-quic-load-nginx-$$ port=${PORT:-48443}
host=$root$inside
trap 'kill "${nginx:-}" 2>/dev/null || true; wait "${nginx:-}" 2>/dev/null || true; rm -rf "$host"' EXIT
mkdir -p "$host/www"; head -c 1024 /dev/zero | tr '\0' x >"$host/www/1KiB"
for cfg in "x25519 p256:p256" "X25519MLKEM768 mldsa65:mldsa65"; do
  read -r group chain <<<"$cfg"
  "$pqtls" pki --chain "$chain" --out "$host/pki" >/dev/null
  d=$(dirname "$(find "$host/pki" -path "*server-${chain/:/_}*" -name chain.pem | head -1)")
  d=${d#"$root"}
  cat >"$host/nginx.conf" <<CONF
daemon off; master_process off; worker_processes 1; error_log $inside/error.log; pid $inside/nginx.pid; events {}
http { access_log off; client_body_temp_path $inside/b; proxy_temp_path $inside/p; fastcgi_temp_path $inside/f; uwsgi_temp_path $inside/u; scgi_temp_path $inside/s;
  server { listen 127.0.0.1:$port ssl; listen 127.0.0.1:$port quic; ssl_certificate $d/chain.pem; ssl_certificate_key $d/leaf.key.pem;
           ssl_protocols TLSv1.3; ssl_ecdh_curve $group; keepalive_requests 1000000; location / { root $inside/www; } } }
CONF
  chroot "$root" nginx -c "$inside/nginx.conf" & nginx=$!
  sleep 1
  for r in $(seq 1 "$rounds"); do
    flags=("" "--quic"); [ $((r % 2)) -eq 0 ] && flags=("--quic" "")
    for q in "${flags[@]}"; do
      "$pqtls" load $q "https://localhost:$port/1KiB" --stack rustls --group "$group" --chain "$chain" --pki "$host/pki" \
        --connections 4 --warmup-time 1s --duration 5s --quiet --json "$out/nginx-round$r-$group${q:+-h3}.json"
    done
  done
  kill "$nginx"; wait "$nginx" 2>/dev/null || true
done
python3 "$(dirname "$0")/quic_load_table.py" "$out"/nginx-round*.json
