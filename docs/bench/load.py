#!/usr/bin/env python3
"""The load benchmarks of docs/benchmarks-load.md, interleaved in rounds on loopback.

1. generator:  pqtls load (verifying the chain, and with --no-verify: the work h2load does) vs
               h2load (HTTP/1.1, one request per connection) against the same nginx (Debian
               trixie, OpenSSL 3.5, one worker process), same group and chain: connections/s,
               each generator's own CPU per connection, and pqtls' verification CPU per
               connection (from its record).
2. server:     pqtls serve (1 worker) vs that nginx, both driven by pqtls load: connections/s
               and the server's CPU per connection.
3. open loop:  pqtls load --rate 100/s and 1000/s against pqtls serve: achieved vs target.

CPU is measured by the kernel's accounting of each process (getrusage of the finished child
for the generators, /proc/PID/stat before/after for the servers), so both tools are measured
the same way. Run from the repository root after `cargo build --release`:

    python3 docs/bench/load.py [--rounds 3] [--seconds 8] [--only generator] [--threads 1,2]

--threads 1,2 runs the generator comparison at each thread count (h2load -t T, pqtls load
--threads T, the --clients connections divided among the threads), interleaved in the rounds.

--compare NAME=PATH,NAME=PATH (with --only generator) compares two pqtls builds instead, e.g.
before and after a change: each round runs h2load and each build's `pqtls load` (verifying, the
default) against the same nginx, in the order h2load, first, second in the 1st, 3rd, … round and
reversed in the 2nd, 4th, … (so each build runs first as often as second); rows carry the build's name in
"tool" ("pqtls@NAME"). The PKI is made by the first build and used by both.
"""
import argparse, json, os, resource, shutil, signal, socket, subprocess, sys, tempfile, time

ROOT = "/var/cache/pqtls/trixie"
_built = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release", "pqtls")
PQTLS = os.path.abspath(os.environ.get("PQTLS", _built))
PQTLS = PQTLS if os.path.exists(PQTLS) else None
CONFIGS = [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")]
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_cpu_s(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def wait_listening(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"{what} exited: {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not listen on {port}")


def child_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Nginx:
    def __init__(self, pki, group, chain, stage):
        files = pki_files(pki, chain)
        d = os.path.join(stage, f"nginx-{group}")
        os.makedirs(d, exist_ok=True)
        shutil.copy(files["chain"], f"{d}/chain.pem")
        shutil.copy(files["key"], f"{d}/key.pem")
        inside = d[len(ROOT):]
        self.port = free_port()
        body = "x" * 1024
        conf = f"""daemon off; master_process off; worker_processes 1;
error_log {inside}/error.log; pid {inside}/nginx.pid;
events {{ worker_connections 4096; }}
http {{ access_log off;
  client_body_temp_path {inside}/cb; proxy_temp_path {inside}/p; fastcgi_temp_path {inside}/f; uwsgi_temp_path {inside}/u; scgi_temp_path {inside}/s;
  server {{ listen 127.0.0.1:{self.port} ssl; ssl_certificate {inside}/chain.pem; ssl_certificate_key {inside}/key.pem;
    ssl_protocols TLSv1.3; ssl_ecdh_curve {group}; ssl_session_tickets off; ssl_session_cache off;
    ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384;
    location / {{ default_type application/octet-stream; return 200 "{body}"; }} }} }}
"""
        open(f"{d}/nginx.conf", "w").write(conf)
        self.proc = subprocess.Popen(["chroot", ROOT, "nginx", "-c", f"{inside}/nginx.conf"], stderr=subprocess.DEVNULL)
        wait_listening(self.port, self.proc, "nginx")

    def cpu_s(self):
        return proc_cpu_s(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


class PqtlsServe:
    def __init__(self, pki, group, chain):
        self.proc = subprocess.Popen(
            [PQTLS, "serve", "--listen", "127.0.0.1:0", "--workers", "1", "--group", group, "--chain", chain,
             "--cipher", "TLS_AES_256_GCM_SHA384", "--pki", pki],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port = int(self.proc.stdout.readline().strip().rsplit(":", 1)[1])

    def cpu_s(self):
        return proc_cpu_s(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()


def pki_files(pki, chain):
    out = subprocess.run([PQTLS, "pki", "--chain", chain, "--out", pki], capture_output=True, text=True, check=True).stdout
    f = {}
    for line in out.splitlines():
        parts = line.split()
        if line.strip().startswith("leaf key"):
            f["key"] = parts[-1]
        elif line.strip().startswith("chain"):
            f["chain"] = parts[-1]
        elif line.strip().startswith("root"):
            f["root"] = parts[-1]
    return f


def run_h2load(port, group, seconds, clients, threads=1):
    c0 = child_cpu_s()
    out = subprocess.run(
        ["chroot", ROOT, "h2load", "--h1", "-D", str(seconds), "--warm-up-time", "1", "-c", str(clients), "-t", str(threads),
         "-H", "Connection: close", "--groups", group, "--tls13-ciphers", "TLS_AES_256_GCM_SHA384",
         f"https://127.0.0.1:{port}/1KiB"], capture_output=True, text=True).stdout
    cpu = child_cpu_s() - c0
    done = 0
    for line in out.splitlines():
        if line.startswith("requests:"):
            done = int(line.split()[7])  # "requests: N total, N started, N done, N succeeded, ..."
    return {"requests": done, "per_s": done / seconds, "cpu_s": cpu, "raw": out}


def run_pqtls_load(port, pki, group, chain, seconds, clients, extra=(), threads=1, binary=None):
    c0 = child_cpu_s()
    with tempfile.NamedTemporaryFile(suffix=".json") as j:
        # --connections is per thread: the same total as h2load's -c over -t threads.
        p = subprocess.run(
            [binary or PQTLS, "load", f"https://127.0.0.1:{port}/1KiB", "--group", group, "--chain", chain, "--cipher",
             "TLS_AES_256_GCM_SHA384", "--threads", str(threads), "--connections", str(clients // threads),
             "--duration", f"{seconds}s",
             "--warmup-time", "1s", "--pki", pki, "--json", j.name, "--quiet", *extra], capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"pqtls load failed: {p.stderr}")
        rec = json.load(open(j.name))[0]["result"]
    cpu = child_cpu_s() - c0
    return {"requests": rec["requests"], "per_s": rec["achieved_rate_per_s"], "cpu_s": cpu, "record": rec}


def parse_compare(spec, only):
    """`before=PATH,after=PATH` → [(name, absolute path)], or exit naming what is wrong."""
    if only != "generator":
        sys.exit("--compare compares the generators only: add --only generator")
    builds = []
    for part in spec.split(","):
        name, sep, path = part.partition("=")
        if not sep or not name or not path:
            sys.exit(f"--compare {spec}: expected NAME=PATH,NAME=PATH (e.g. before=/tmp/pqtls-a,after=/tmp/pqtls-b)")
        if not os.access(path, os.X_OK):
            sys.exit(f"--compare: {name}'s pqtls {path} is not an executable file")
        builds.append((name, os.path.abspath(path)))
    if len(builds) != 2 or builds[0][0] == builds[1][0]:
        sys.exit(f"--compare {spec}: give exactly two builds with different names")
    return builds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--only", choices=["generator"], help="only the generator comparison (1.)")
    ap.add_argument("--threads", default="1", help="generator threads, e.g. 1,2 (each divides --clients)")
    ap.add_argument("--compare", metavar="NAME=PATH,NAME=PATH",
                    help="two pqtls builds' generators side by side (needs --only generator)")
    a = ap.parse_args()
    builds = parse_compare(a.compare, a.only) if a.compare else None
    thread_counts = [int(t) for t in a.threads.split(",")]
    if any(t < 1 or a.clients % t for t in thread_counts):
        sys.exit(f"--threads {a.threads}: each must be ≥ 1 and divide --clients {a.clients}")
    global PQTLS
    if builds:
        PQTLS = builds[0][1]
    if not PQTLS:
        sys.exit("build first: cargo build --release -p pqtls-cli")
    pki = tempfile.mkdtemp(prefix="pqtls-bench-pki-")
    stage = tempfile.mkdtemp(prefix="pqtls-bench-", dir=os.path.join(ROOT, "tmp"))
    rows = []
    try:
        for rnd in range(a.rounds):
            for group, chain in CONFIGS:
                ng = Nginx(pki, group, chain, stage)
                try:
                    # 1. generators against nginx, the order rotating from round to round.
                    if builds:
                        # h2load, first, second; then second, first, h2load: each build as often
                        # first as second, h2load's neighbour alternating.
                        tools = [(g, t) for t in thread_counts for g in ["h2load"] + [f"pqtls@{n}" for n, _ in builds]]
                        order = tools if rnd % 2 == 0 else tools[::-1]
                    else:
                        tools = [(g, t) for t in thread_counts for g in ["h2load", "pqtls", "pqtls --no-verify"]]
                        k = rnd % len(tools)
                        order = tools[k:] + tools[:k]
                    for gen, threads in order:
                        n0 = ng.cpu_s()
                        extra = ("--no-verify",) if gen == "pqtls --no-verify" else ()
                        binary = dict(builds)[gen[len("pqtls@"):]] if gen.startswith("pqtls@") else None
                        r = run_h2load(ng.port, group, a.seconds, a.clients, threads) if gen == "h2load" else \
                            run_pqtls_load(ng.port, pki, group, chain, a.seconds, a.clients, extra, threads, binary)
                        srv = ng.cpu_s() - n0
                        # Generator CPU over all its requests (warm-up included) ≈ per connection.
                        total = r["requests"] * (a.seconds + 1) / a.seconds
                        row = {"round": rnd, "bench": "generator", "tool": gen, "threads": threads, "group": group,
                               "chain": chain,
                               "conns_per_s": r["per_s"], "gen_cpu_us_per_conn": 1e6 * r["cpu_s"] / max(total, 1),
                               "server": "nginx", "server_cpu_us_per_conn": 1e6 * srv / max(total, 1)}
                        if "record" in r:
                            row["handshake_cpu_us"] = r["record"]["client_handshake_cpu_ns_mean"] / 1e3
                            row["verify_cpu_us"] = r["record"].get("client_verify_cpu_ns_mean", 0) / 1e3
                        rows.append(row)
                    if a.only == "generator":
                        continue
                    # 2. servers, same generator (pqtls load).
                    n0 = ng.cpu_s()
                    r = run_pqtls_load(ng.port, pki, group, chain, a.seconds, a.clients)
                    total = r["requests"] * (a.seconds + 1) / a.seconds
                    rows.append({"round": rnd, "bench": "server", "tool": "pqtls load", "group": group, "chain": chain,
                                 "conns_per_s": r["per_s"], "server": "nginx",
                                 "server_cpu_us_per_conn": 1e6 * (ng.cpu_s() - n0) / max(total, 1)})
                finally:
                    ng.stop()
                ps = PqtlsServe(pki, group, chain)
                try:
                    n0 = ps.cpu_s()
                    r = run_pqtls_load(ps.port, pki, group, chain, a.seconds, a.clients)
                    total = r["requests"] * (a.seconds + 1) / a.seconds
                    rows.append({"round": rnd, "bench": "server", "tool": "pqtls load", "group": group, "chain": chain,
                                 "conns_per_s": r["per_s"], "server": "pqtls serve",
                                 "server_cpu_us_per_conn": 1e6 * (ps.cpu_s() - n0) / max(total, 1),
                                 "server_handshake_cpu_us": r["record"].get("server", {}).get("handshake_cpu_ns_mean", 0) / 1e3})
                    if group == "x25519":
                        for rate in (100, 1000):
                            r = run_pqtls_load(ps.port, pki, group, chain, a.seconds, a.clients, ("--rate", f"{rate}/s"))
                            rows.append({"round": rnd, "bench": "open loop", "group": group, "target_per_s": rate,
                                         "achieved_per_s": r["record"]["achieved_rate_per_s"],
                                         "p50_ms": r["record"]["latency"]["p50_ns"] / 1e6,
                                         "p99_ms": r["record"]["latency"]["p99_ns"] / 1e6})
                finally:
                    ps.stop()
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(pki, ignore_errors=True)
    for r in rows:
        print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()}))


if __name__ == "__main__":
    main()
