//! Third-party TLS peers that pqtls talks to, in one place for the interop tests and the
//! `--via nginx|haproxy` terminator of `pqtls load`:
//! - configuration writers: nginx and HAProxy 3.0 terminating TLS 1.3 with one group and one
//!   certificate chain, answering `ok` ([`nginx_conf`], [`haproxy_cfg`]) or forwarding to a
//!   plain backend with exactly one cipher suite ([`forward`]), optionally with oqs-provider
//!   loaded (nginx through a lab-only OpenSSL configuration given in `OPENSSL_CONF`, HAProxy
//!   from its global section);
//! - the Debian trixie root (scripts/trixie-root.sh) and files staged into it ([`Root`],
//!   [`Staged`]);
//! - supervised processes that leave nothing behind ([`Supervised`]) and the terminator
//!   manager built on them ([`Terminator::start`] → [`Running`]), offered to the load
//!   measurement as `pqtls_net::shared::Terminators` by [`Via`];
//! - `pqtls serve` started as a child for a scenario, for the resident measurement ([`ServeChild`]).
//!
//! `unsafe` appears only at the two FFI edges of [`process`] (prctl in the forked child,
//! kill of a process group), each with a `// SAFETY:` comment.

#![deny(unsafe_code)]

pub mod forward;
pub mod port;
pub mod process;
pub mod root;
pub mod serve;
pub mod terminator;
pub mod via;

pub use forward::{haproxy_forward_cfg, nginx_forward_conf, ForwardConf};
pub use process::{group_members, is_alive, Stopped, Supervised};
pub use root::{Root, Staged, DEFAULT_ROOT};
pub use serve::ServeChild;
pub use terminator::{
    needs_oqs_provider, Forward, HowToRun, Running, Terminator, TerminatorInfo, OQS_PROVIDER_GROUPS,
    OQS_PROVIDER_SIG_ALGS,
};
pub use via::Via;

use std::fmt::Write as _;

/// The lab-only OpenSSL configuration that scripts/oqs-peer.sh installs in the trixie root
/// (OpenSSL's default provider plus oqs-provider). Give it to a program as `OPENSSL_CONF`;
/// the root's global openssl.cnf is never changed.
pub const OQS_OPENSSL_CONF: &str = "/etc/pqtls/openssl-oqs.cnf";

/// One TLS site: where it listens, what it negotiates, and its files (paths as the terminator
/// sees them, e.g. inside the chroot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// `127.0.0.1:8443`.
    pub listen: String,
    /// The one TLS 1.3 group offered (OpenSSL's name, e.g. `x25519_mlkem512`).
    pub group: String,
    /// Leaf certificate then intermediates (PEM).
    pub chain_pem: String,
    /// The leaf's private key (PKCS#8 PEM).
    pub key_pem: String,
    /// A directory the terminator may write its pid, logs and temporary files to.
    pub work_dir: String,
}

/// nginx (foreground, one process) terminating TLS 1.3 for `site` and answering `ok`. With
/// oqs-provider, start it with `OPENSSL_CONF=`[`OQS_OPENSSL_CONF`].
pub fn nginx_conf(site: &Site) -> String {
    let d = &site.work_dir;
    let mut c = String::new();
    let _ = writeln!(c, "daemon off;\nmaster_process off;\nerror_log {d}/error.log;\npid {d}/nginx.pid;");
    let _ = writeln!(c, "events {{}}\nhttp {{\n  access_log off;");
    for t in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "  {t}_temp_path {d}/{t};");
    }
    let _ = writeln!(c, "  server {{\n    listen {} ssl;", site.listen);
    let _ = writeln!(c, "    ssl_certificate {};\n    ssl_certificate_key {};", site.chain_pem, site.key_pem);
    let _ = writeln!(c, "    ssl_protocols TLSv1.3;\n    ssl_ecdh_curve {};", site.group);
    let _ = writeln!(c, "    location / {{ return 200 \"ok\\n\"; }}\n  }}\n}}");
    c
}

/// HAProxy 3.0 (foreground: `haproxy -db -f FILE`) terminating TLS 1.3 for `site` and
/// answering `ok`. HAProxy's `crt` is `site.chain_pem`, and it reads the private key from
/// `<chain_pem>.key` ([`haproxy_key_path`]): the caller puts a copy of `site.key_pem` there.
/// (A key appended to the chain file is not found when the provider that decodes it —
/// oqs-provider for Falcon-512 — is loaded from the global section; a separate key file is.)
/// `providers` are loaded from the global section (`ssl-provider`), e.g.
/// `["oqsprovider", "default"]`: naming providers disables OpenSSL's implicit default one, so
/// list `default` too.
pub fn haproxy_cfg(site: &Site, providers: &[&str]) -> String {
    let crt_pem = &site.chain_pem;
    let mut c = String::from("global\n");
    for p in providers {
        let _ = writeln!(c, "  ssl-provider {p}");
    }
    let _ = writeln!(c, "  pidfile {}/haproxy.pid", site.work_dir);
    c.push_str("defaults\n  mode http\n  timeout connect 5s\n  timeout client 20s\n  timeout server 20s\n");
    let _ = writeln!(
        c,
        "frontend pqtls\n  bind {} ssl crt {crt_pem} ssl-min-ver TLSv1.3 curves {}",
        site.listen, site.group
    );
    c.push_str("  http-request return status 200 content-type text/plain string \"ok\"\n");
    c
}

/// Where HAProxy looks for the private key of `crt` `chain_pem`.
pub fn haproxy_key_path(chain_pem: &str) -> String {
    format!("{chain_pem}.key")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site() -> Site {
        Site {
            listen: "127.0.0.1:8443".into(),
            group: "x25519_mlkem512".into(),
            chain_pem: "/w/chain.pem".into(),
            key_pem: "/w/key.pem".into(),
            work_dir: "/w".into(),
        }
    }

    #[test]
    fn nginx_offers_the_one_group_and_stays_in_the_foreground() {
        let c = nginx_conf(&site());
        for line in [
            "daemon off;",
            "master_process off;",
            "listen 127.0.0.1:8443 ssl;",
            "ssl_ecdh_curve x25519_mlkem512;",
            "ssl_certificate /w/chain.pem;",
            "ssl_certificate_key /w/key.pem;",
            "ssl_protocols TLSv1.3;",
        ] {
            assert!(c.contains(line), "{line} in\n{c}");
        }
        assert_eq!(c.matches('{').count(), c.matches('}').count());
    }

    #[test]
    fn haproxy_loads_the_providers_from_its_global_section() {
        let c = haproxy_cfg(&site(), &["oqsprovider", "default"]);
        assert!(c.starts_with("global\n  ssl-provider oqsprovider\n  ssl-provider default\n"), "{c}");
        assert!(
            c.contains("bind 127.0.0.1:8443 ssl crt /w/chain.pem ssl-min-ver TLSv1.3 curves x25519_mlkem512"),
            "{c}"
        );
    }
}
