//! Configuration of a *forwarding* terminator: nginx or HAProxy terminating TLS 1.3 with
//! exactly one group, one cipher suite and one certificate chain, and forwarding HTTP/1.1 to a
//! plain backend (`pqtls serve --plain`). Pure text; [`crate::Terminator`] writes and runs it.

use pqtls_core::{Error, Result};
use std::fmt::Write as _;
use std::net::SocketAddr;

/// One forwarding site, with paths as the terminator sees them (e.g. inside the chroot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardConf {
    /// Where the terminator listens (TLS; over UDP with [`ForwardConf::quic`]).
    pub listen: SocketAddr,
    /// Listen for HTTP/3 over QUIC instead of HTTPS over TCP (nginx `listen … quic`, HAProxy
    /// `quic4@` with `limited-quic`: its OpenSSL compatibility layer).
    pub quic: bool,
    /// The one TLS 1.3 group offered (OpenSSL's name: `X25519MLKEM768`, `x25519_mlkem512`).
    pub group: String,
    /// The one TLS 1.3 cipher suite (`TLS_AES_256_GCM_SHA384`).
    pub cipher: String,
    /// Leaf certificate then intermediates (PEM).
    pub chain_pem: String,
    /// The leaf's private key (PEM). HAProxy reads it from `<chain_pem>.key`
    /// ([`crate::haproxy_key_path`]): the caller puts a copy there.
    pub key_pem: String,
    /// A directory the terminator may write its pid and temporary files to.
    pub work_dir: String,
    /// nginx worker processes / HAProxy threads.
    pub workers: usize,
    /// Where plain HTTP/1.1 goes.
    pub backend: SocketAddr,
    /// Reuse connections to the backend (true) or open one per request (false).
    pub backend_keep_alive: bool,
    /// OpenSSL providers HAProxy loads from its global section (e.g. `["oqsprovider",
    /// "default"]`; empty: OpenSSL's default). nginx takes them from `OPENSSL_CONF`.
    pub providers: Vec<String>,
    /// Hold this many idle client connections (the resident measurement): room for them
    /// (nginx `worker_connections` and `worker_rlimit_nofile`, HAProxy `maxconn`) and an idle
    /// timeout of [`HOLD_IDLE_S`]. `None`: the defaults (4096 connections, 30 s / nginx's 75 s).
    pub hold_connections: Option<usize>,
    /// The most file descriptors a process may have here (the hard RLIMIT_NOFILE), when known:
    /// HAProxy asks for two per connection of `maxconn` (client and server side), more than
    /// idle client connections need; its `ulimit-n` is kept within this.
    pub fd_limit: Option<u64>,
}

/// How long a terminator keeps an idle client connection when it holds connections (s).
pub const HOLD_IDLE_S: u32 = 3600;

/// Descriptors HAProxy needs besides two per connection (listeners, pollers, threads, logs).
const HAPROXY_SPARE_FDS: u64 = 128;

/// Connections a terminator holding `n` idle ones has room for (its own and the backend's besides).
fn room(hold: Option<usize>) -> usize {
    hold.map_or(4096, |n| (n + 512).max(4096))
}

/// The longest a terminator waits for the backend or a client (seconds).
const TIMEOUT_S: u32 = 30;

impl ForwardConf {
    /// Refuses values that would not be one token of the configuration language.
    pub fn validate(&self) -> Result<()> {
        let token = |what: &str, v: &str, example: &str| {
            if v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c)) {
                return Err(Error::Invalid(format!(
                    "{what} {v:?} for a terminator: one name of letters, digits, '_' or '-' (e.g. {example})"
                )));
            }
            Ok(())
        };
        token("group", &self.group, "X25519MLKEM768")?;
        token("cipher suite", &self.cipher, "TLS_AES_256_GCM_SHA384")?;
        if !self.cipher.starts_with("TLS_") {
            return Err(Error::Invalid(format!(
                "cipher suite {:?}: a terminator is configured with a TLS 1.3 suite (TLS_AES_128_GCM_SHA256, \
                 TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256)",
                self.cipher
            )));
        }
        for p in &self.providers {
            token("provider", p, "oqsprovider")?;
        }
        if self.workers == 0 || self.workers > 64 {
            return Err(Error::Invalid(format!("{} terminator workers: give 1 to 64", self.workers)));
        }
        for (what, path) in [("chain", &self.chain_pem), ("key", &self.key_pem), ("work directory", &self.work_dir)] {
            if path.is_empty() || path.chars().any(|c| c.is_whitespace() || "\";{}'#".contains(c)) {
                return Err(Error::Invalid(format!(
                    "{what} path {path:?} for a terminator: no spaces, quotes, ';', '{{', '}}' or '#'"
                )));
            }
        }
        Ok(())
    }
}

/// HAProxy's address syntax (`ipv6@` for IPv6).
fn haproxy_addr(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V4(v4) => v4.to_string(),
        SocketAddr::V6(v6) => format!("ipv6@{}:{}", v6.ip(), v6.port()),
    }
}

/// nginx (`nginx -e stderr -c FILE`: master in the foreground, `workers` worker processes)
/// terminating TLS 1.3 and forwarding to the backend. Access logs off, errors (warn and
/// above) to stderr, no temporary files for responses. With oqs-provider, start it with
/// `OPENSSL_CONF=`[`crate::OQS_OPENSSL_CONF`].
pub fn nginx_forward_conf(f: &ForwardConf) -> Result<String> {
    f.validate()?;
    let d = &f.work_dir;
    let mut c = String::new();
    let _ = writeln!(c, "# pqtls --via nginx: TLS 1.3 with {} / {}, forwarding to {}", f.group, f.cipher, f.backend);
    let _ = writeln!(c, "daemon off;\nmaster_process on;\nworker_processes {};", f.workers);
    let _ = writeln!(c, "error_log stderr warn;\npid {d}/nginx.pid;");
    if f.hold_connections.is_some() {
        let _ = writeln!(c, "worker_rlimit_nofile {};", 2 * room(f.hold_connections));
    }
    let _ = writeln!(c, "events {{\n  worker_connections {};\n}}", room(f.hold_connections));
    let _ = writeln!(c, "http {{\n  access_log off;\n  keepalive_requests 1000000;");
    if f.hold_connections.is_some() {
        let _ = writeln!(c, "  keepalive_timeout {HOLD_IDLE_S}s;");
    }
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "  {t}_temp_path {d}/{t};");
    }
    let _ = writeln!(c, "  upstream pqtls_backend {{\n    server {};", f.backend);
    if f.backend_keep_alive {
        let _ = writeln!(c, "    keepalive 64;\n    keepalive_requests 1000000;");
    }
    if f.quic {
        // Several workers share a QUIC port only with reuseport (packets routed by connection).
        let reuse = if f.workers > 1 { " reuseport" } else { "" };
        let _ = writeln!(c, "  }}\n  server {{\n    listen {} quic{reuse};", f.listen);
    } else {
        let _ = writeln!(c, "  }}\n  server {{\n    listen {} ssl;", f.listen);
    }
    let _ = writeln!(c, "    ssl_certificate {};\n    ssl_certificate_key {};", f.chain_pem, f.key_pem);
    let _ = writeln!(c, "    ssl_protocols TLSv1.3;\n    ssl_ecdh_curve {};", f.group);
    let _ = writeln!(c, "    ssl_conf_command Ciphersuites {};", f.cipher);
    let _ = writeln!(c, "    location / {{\n      proxy_pass http://pqtls_backend;\n      proxy_http_version 1.1;");
    let conn = if f.backend_keep_alive { "\"\"" } else { "close" };
    let _ = writeln!(c, "      proxy_set_header Connection {conn};\n      proxy_max_temp_file_size 0;");
    let _ = writeln!(c, "      proxy_connect_timeout {TIMEOUT_S}s;\n      proxy_read_timeout {TIMEOUT_S}s;");
    let _ = writeln!(c, "    }}\n  }}\n}}");
    Ok(c)
}

/// HAProxy (`haproxy -db -f FILE`: one process in the foreground, `workers` threads)
/// terminating TLS 1.3 and forwarding to the backend. No log. The private key is read from
/// `<chain_pem>.key`.
pub fn haproxy_forward_cfg(f: &ForwardConf) -> Result<String> {
    f.validate()?;
    let mut c = String::from("# pqtls --via haproxy\nglobal\n");
    for p in &f.providers {
        let _ = writeln!(c, "  ssl-provider {p}");
    }
    let _ = writeln!(c, "  nbthread {}\n  pidfile {}/haproxy.pid", f.workers, f.work_dir);
    if f.quic {
        // HAProxy on OpenSSL (not quictls) speaks QUIC through its compatibility layer only.
        c.push_str("  limited-quic\n");
    }
    if f.hold_connections.is_some() {
        // HAProxy reserves two descriptors per connection of maxconn (client and server side)
        // and refuses to start without them: maxconn is what the machine's limit allows, which
        // may be fewer than the connections to hold (the measurement then says so).
        let fds = f.fd_limit.map_or(u64::MAX, |l| l);
        let maxconn = (room(f.hold_connections) as u64).min(fds.saturating_sub(HAPROXY_SPARE_FDS) / 2);
        let _ = writeln!(c, "  maxconn {maxconn}");
        let _ = writeln!(c, "  ulimit-n {}", (2 * maxconn + HAPROXY_SPARE_FDS).min(fds));
    }
    let _ = writeln!(c, "  ssl-default-bind-ciphersuites {}", f.cipher);
    c.push_str("  ssl-default-bind-options ssl-min-ver TLSv1.3\n");
    c.push_str("defaults\n  mode http\n");
    let client_s = if f.hold_connections.is_some() { HOLD_IDLE_S } else { TIMEOUT_S };
    let _ = writeln!(c, "  timeout connect {TIMEOUT_S}s\n  timeout client {client_s}s\n  timeout server {TIMEOUT_S}s");
    if f.hold_connections.is_some() {
        let _ = writeln!(c, "  timeout http-keep-alive {HOLD_IDLE_S}s");
    }
    c.push_str(if f.backend_keep_alive { "  option http-keep-alive\n" } else { "  option http-server-close\n" });
    let (bind, alpn) = match (f.quic, f.listen) {
        (false, a) => (haproxy_addr(&a), ""),
        (true, SocketAddr::V4(a)) => (format!("quic4@{a}"), " alpn h3"),
        (true, SocketAddr::V6(a)) => (format!("quic6@{}:{}", a.ip(), a.port()), " alpn h3"),
    };
    let _ = writeln!(
        c,
        "frontend pqtls\n  bind {bind} ssl crt {} ssl-min-ver TLSv1.3 curves {} ciphersuites {}{alpn}",
        f.chain_pem, f.group, f.cipher
    );
    c.push_str("  default_backend pqtls_backend\n");
    let _ = writeln!(c, "backend pqtls_backend\n  server backend {}", haproxy_addr(&f.backend));
    if f.backend_keep_alive {
        c.push_str("  http-reuse always\n");
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf() -> ForwardConf {
        ForwardConf {
            listen: "127.0.0.1:8443".parse().unwrap(),
            quic: false,
            group: "X25519MLKEM768".into(),
            cipher: "TLS_AES_256_GCM_SHA384".into(),
            chain_pem: "/w/chain.pem".into(),
            key_pem: "/w/key.pem".into(),
            work_dir: "/w".into(),
            workers: 1,
            backend: "127.0.0.1:8080".parse().unwrap(),
            backend_keep_alive: true,
            providers: vec![],
            hold_connections: None,
            fd_limit: None,
        }
    }

    #[test]
    fn holding_connections_makes_room_and_keeps_them_idle() {
        let mut f = conf();
        f.hold_connections = Some(10_000);
        let n = nginx_forward_conf(&f).unwrap();
        for line in ["worker_rlimit_nofile 21024;", "worker_connections 10512;", "keepalive_timeout 3600s;"] {
            assert!(n.contains(line), "{line} in\n{n}");
        }
        let h = haproxy_forward_cfg(&f).unwrap();
        for line in ["maxconn 10512", "ulimit-n 21152", "timeout client 3600s", "timeout http-keep-alive 3600s"] {
            assert!(h.contains(line), "{line} in\n{h}");
        }
        // A machine that allows 20,000 descriptors: HAProxy holds what they allow.
        f.fd_limit = Some(20_000);
        let h = haproxy_forward_cfg(&f).unwrap();
        assert!(h.contains("maxconn 9936\n") && h.contains("ulimit-n 20000\n"), "{h}");
        let plain = nginx_forward_conf(&conf()).unwrap();
        assert!(plain.contains("worker_connections 4096;") && !plain.contains("keepalive_timeout"), "{plain}");
    }

    #[test]
    fn nginx_forwards_with_exactly_the_group_and_cipher() {
        let c = nginx_forward_conf(&conf()).unwrap();
        for line in [
            "daemon off;",
            "worker_processes 1;",
            "access_log off;",
            "server 127.0.0.1:8080;",
            "keepalive 64;",
            "listen 127.0.0.1:8443 ssl;",
            "ssl_protocols TLSv1.3;",
            "ssl_ecdh_curve X25519MLKEM768;",
            "ssl_conf_command Ciphersuites TLS_AES_256_GCM_SHA384;",
            "proxy_pass http://pqtls_backend;",
            "proxy_set_header Connection \"\";",
        ] {
            assert!(c.contains(line), "{line} in\n{c}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
        let mut no_ka = conf();
        no_ka.backend_keep_alive = false;
        no_ka.workers = 2;
        let c = nginx_forward_conf(&no_ka).unwrap();
        assert!(!c.contains("keepalive 64;") && c.contains("proxy_set_header Connection close;"), "{c}");
        assert!(c.contains("worker_processes 2;"));
    }

    #[test]
    fn haproxy_forwards_with_exactly_the_group_and_cipher() {
        let mut f = conf();
        f.providers = vec!["oqsprovider".into(), "default".into()];
        f.group = "x25519_mlkem512".into();
        let c = haproxy_forward_cfg(&f).unwrap();
        assert!(c.contains("global\n  ssl-provider oqsprovider\n  ssl-provider default\n  nbthread 1\n"), "{c}");
        for line in [
            "ssl-default-bind-ciphersuites TLS_AES_256_GCM_SHA384",
            "bind 127.0.0.1:8443 ssl crt /w/chain.pem ssl-min-ver TLSv1.3 curves x25519_mlkem512 ciphersuites TLS_AES_256_GCM_SHA384",
            "server backend 127.0.0.1:8080",
            "option http-keep-alive",
        ] {
            assert!(c.contains(line), "{line} in\n{c}");
        }
        f.listen = "[::1]:8443".parse().unwrap();
        assert!(haproxy_forward_cfg(&f).unwrap().contains("bind ipv6@::1:8443 ssl"));
    }

    #[test]
    fn over_quic_both_listen_for_http3_on_udp() {
        let mut f = conf();
        f.quic = true;
        let n = nginx_forward_conf(&f).unwrap();
        assert!(n.contains("listen 127.0.0.1:8443 quic;") && !n.contains(" ssl;"), "{n}");
        assert!(n.contains("proxy_pass http://pqtls_backend;"), "{n}");
        f.workers = 2;
        assert!(nginx_forward_conf(&f).unwrap().contains("listen 127.0.0.1:8443 quic reuseport;"));
        let h = haproxy_forward_cfg(&f).unwrap();
        assert!(h.contains("  limited-quic\n"), "{h}");
        assert!(
            h.contains("bind quic4@127.0.0.1:8443 ssl crt /w/chain.pem ssl-min-ver TLSv1.3 curves X25519MLKEM768 ciphersuites TLS_AES_256_GCM_SHA384 alpn h3"),
            "{h}"
        );
        f.listen = "[::1]:8443".parse().unwrap();
        assert!(haproxy_forward_cfg(&f).unwrap().contains("bind quic6@::1:8443 ssl"));
        assert!(!haproxy_forward_cfg(&conf()).unwrap().contains("limited-quic"));
    }

    #[test]
    fn values_that_would_break_the_configuration_are_refused() {
        let mut f = conf();
        f.group = "x25519; user root".into();
        let e = nginx_forward_conf(&f).unwrap_err().to_string();
        assert!(e.contains("group") && e.contains("X25519MLKEM768"), "{e}");
        let mut f = conf();
        f.cipher = "ECDHE-RSA-AES128-GCM-SHA256".into();
        let e = haproxy_forward_cfg(&f).unwrap_err().to_string();
        assert!(e.contains("TLS 1.3 suite"), "{e}");
        let mut f = conf();
        f.workers = 0;
        assert!(nginx_forward_conf(&f).unwrap_err().to_string().contains("1 to 64"));
        let mut f = conf();
        f.chain_pem = "/a b/chain.pem".into();
        assert!(nginx_forward_conf(&f).is_err());
    }
}
