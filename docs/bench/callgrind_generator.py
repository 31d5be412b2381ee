#!/usr/bin/env python3
"""Instructions per connection of two pqtls builds, counted by valgrind's callgrind (deterministic,
unlike the CPU clocks of load.py on a shared machine; docs/benchmarks-load.md §6):

  generator  `pqtls load` (HTTPS/1.1, verifying) against the trixie root's nginx (one worker,
             load.py's configuration): only the generator process runs under callgrind;
  http3      `pqtls load --http 3 --stack rustls` against its own in-process `pqtls serve --quic`:
             client and server, one process;
  https      the same over TCP (`--http 1.1`, HTTPS/1.1 through the in-process `pqtls serve`).

One connection at a time (--connections 1, one request per connection), closed loop of exactly N
requests; each build runs at two N and the instructions per connection are the difference over
the difference of N (start-up, PKI loading and the record cancel). Run as root from the
repository root:

    python3 docs/bench/callgrind_generator.py before=PATH,after=PATH [--n 100,300]
"""
import argparse, os, re, subprocess, sys, tempfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load  # noqa: E402  (its nginx, PKI and configurations)


def instructions(cmd):
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed under callgrind ({p.returncode}): {p.stderr[-2000:]}")
    m = re.search(r"Collected\s*:\s*(\d+)", p.stderr)
    if not m:
        sys.exit(f"no 'Collected' line from callgrind: {p.stderr[-2000:]}")
    return int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", metavar="NAME=PATH,NAME=PATH")
    ap.add_argument("--n", default="100,300", help="the two request counts, e.g. 100,300")
    a = ap.parse_args()
    builds = load.parse_compare(a.builds, "generator")
    n1, n2 = (int(x) for x in a.n.split(","))
    load.PQTLS = builds[0][1]
    pki = tempfile.mkdtemp(prefix="pqtls-cg-pki-")
    stage = tempfile.mkdtemp(prefix="pqtls-cg-", dir=os.path.join(load.ROOT, "tmp"))
    common = ["--connections", "1", "--warmup-time", "0s",
              "--duration", "600s", "--pki", pki, "--quiet"]
    try:
        for group, chain in load.CONFIGS:
            ng = load.Nginx(pki, group, chain, stage)
            try:
                for name, binary in builds:
                    ir = [instructions([binary, "load", f"https://127.0.0.1:{ng.port}/1KiB", "--group", group,
                                        "--chain", chain, "--cipher", "TLS_AES_256_GCM_SHA384", "--requests", str(n), *common])
                          for n in (n1, n2)]
                    print(f"generator {group} {name}: {ir[0]:,} / {ir[1]:,} Ir at {n1} / {n2} connections → "
                          f"{(ir[1] - ir[0]) / (n2 - n1):,.0f} Ir per connection", flush=True)
            finally:
                ng.stop()
            for http, what in (("3", "http3"), ("1.1", "https")):
                for name, binary in builds:
                    ir = [instructions([binary, "load", "--stack", "rustls", "--http", http, "--group", group,
                                        "--chain", chain, "--response-size", "1KiB", "--requests", str(n), *common])
                          for n in (n1, n2)]
                    print(f"{what} {group} {name}: {ir[0]:,} / {ir[1]:,} Ir at {n1} / {n2} connections → "
                          f"{(ir[1] - ir[0]) / (n2 - n1):,.0f} Ir per connection (client + server)", flush=True)
    finally:
        import shutil
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(pki, ignore_errors=True)


if __name__ == "__main__":
    main()
