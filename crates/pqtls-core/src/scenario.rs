//! A scenario: what one record measured — the handshake configuration, the transport, and
//! (for the measurements that use them) the load and the emulated network. Built only from
//! the factor table ([`crate::factor::FACTORS`]), so the CLI, experiment files, ids and labels
//! agree by construction.

use crate::catalogue;
use crate::config::{ChainSpec, HandshakeConfig};
use crate::error::{Error, Result};
use crate::factor::{self, IdPart, Kind, FACTORS};
use crate::trace::Clock;
use indexmap::IndexMap;

pub use crate::transport::TransportKind;

/// The load a load generator puts on a server (load and layers measurements).
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSpec {
    pub threads: u64,
    /// Concurrent connections per load thread.
    pub connections: u64,
    /// Open loop at this rate; `None`: closed loop, as fast as it goes.
    pub rate_per_s: Option<f64>,
    pub response_bytes: u64,
    pub keep_alive: bool,
    /// Who terminates TLS: `pqtls`, `nginx` or `haproxy`.
    pub terminator: String,
    /// TLS on (false: plain HTTP, the "no TLS" baseline).
    pub tls: bool,
    /// The client verifies the server's chain (false: `--no-verify`, as h2load).
    pub verify: bool,
    /// QUIC only: quinn's initial MTU, bytes of UDP payload (`None`: quinn's 1,200).
    pub quic_initial_mtu: Option<u64>,
    /// QUIC only: every measured connection offers an address-validation token from an earlier
    /// connection to the server (a second contact: no 3× limit).
    pub quic_token: bool,
}

/// The emulated network (transfer measurement; a load through the network lab).
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkSpec {
    /// `None`: no emulated network.
    pub rtt_ns: Option<u64>,
    pub bits_per_s: Option<u64>,
    /// Packet loss as a fraction.
    pub loss: f64,
    pub jitter_ns: u64,
    /// `None`: the kernel's default.
    pub initcwnd: Option<u64>,
    /// One side's initial window when it differs from `initcwnd` (`None`: `initcwnd`).
    pub client_initcwnd: Option<u64>,
    pub server_initcwnd: Option<u64>,
}

impl NetworkSpec {
    /// The client's route's initial window (`None`: the kernel's default).
    pub fn client_window(&self) -> Option<u64> {
        self.client_initcwnd.or(self.initcwnd)
    }

    /// The server's route's initial window (`None`: the kernel's default).
    pub fn server_window(&self) -> Option<u64> {
        self.server_initcwnd.or(self.initcwnd)
    }

    /// Whether any network factor is set (a load is then measured through the network lab).
    pub fn emulated(&self) -> bool {
        self.rtt_ns.is_some()
            || self.bits_per_s.is_some()
            || self.loss > 0.0
            || self.jitter_ns > 0
            || self.client_window().is_some()
            || self.server_window().is_some()
    }
}

/// One point of a matrix, typed.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Every factor's canonical value, in table order.
    values: IndexMap<String, String>,
    pub handshake: HandshakeConfig,
    pub transport: TransportKind,
    pub clock: Clock,
    pub load: LoadSpec,
    pub network: NetworkSpec,
}

impl PartialEq for Scenario {
    fn eq(&self, other: &Self) -> bool {
        self.values == other.values
    }
}

impl Scenario {
    /// A scenario from written values (any spelling of factor names; values as a user writes
    /// them). Factors not given take their defaults; `group` and `chain` must be given.
    pub fn new<'a>(given: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Scenario> {
        let mut values: IndexMap<String, String> = IndexMap::new();
        for (name, value) in given {
            let f = factor::factor(name).ok_or_else(|| Error::unknown("factor", name, factor::names()))?;
            let v = (f.canonical)(value).map_err(|e| Error::Invalid(format!("{}: {e}", f.name)))?;
            if values.insert(f.name.to_string(), v).is_some() {
                return Err(Error::Invalid(format!("factor '{}' given twice", f.name)));
            }
        }
        Scenario::from_canonical(&values)
    }

    /// A scenario from canonical values (as stored in records and produced by the experiment
    /// parser); missing factors take their defaults.
    pub fn from_canonical(given: &IndexMap<String, String>) -> Result<Scenario> {
        let mut values = IndexMap::new();
        for f in FACTORS {
            let v = match given.get(f.name) {
                Some(v) => v.clone(),
                None => f.default_or_required()?.to_string(),
            };
            values.insert(f.name.to_string(), v);
        }
        if let Some(unknown) = given.keys().find(|k| !values.contains_key(k.as_str())) {
            return Err(Error::unknown("factor", unknown, factor::names()));
        }
        let placeholder = HandshakeConfig::new(
            catalogue::Stack::Openssl,
            catalogue::group("x25519")?,
            ChainSpec::parse("p256:p256")?,
            catalogue::cipher("TLS_AES_128_GCM_SHA256")?,
        );
        let mut sc = Scenario {
            values: IndexMap::new(),
            handshake: placeholder,
            transport: TransportKind::Memory,
            clock: Clock::Split,
            load: LoadSpec {
                threads: 1,
                connections: 1,
                rate_per_s: None,
                response_bytes: 0,
                keep_alive: false,
                quic_initial_mtu: None,
                quic_token: false,
                terminator: "pqtls".into(),
                tls: true,
                verify: true,
            },
            network: NetworkSpec {
                rtt_ns: None,
                bits_per_s: None,
                loss: 0.0,
                jitter_ns: 0,
                initcwnd: None,
                client_initcwnd: None,
                server_initcwnd: None,
            },
        };
        for f in FACTORS {
            (f.apply)(&mut sc, &values[f.name]).map_err(|e| Error::Invalid(format!("{}: {e}", f.name)))?;
        }
        // The client supports every group it sends a share for.
        for s in sc.handshake.key_shares.clone() {
            if !sc.handshake.groups.contains(&s) {
                sc.handshake.groups.push(s);
            }
        }
        sc.values = values;
        Ok(sc)
    }

    /// Canonical value of a factor (every factor has one).
    pub fn value(&self, factor: &str) -> &str {
        let name = factor::factor(factor).map_or(factor, |f| f.name);
        self.values.get(name).map_or("", String::as_str)
    }

    /// Every factor's canonical value, in table order.
    pub fn values(&self) -> &IndexMap<String, String> {
        &self.values
    }

    /// This scenario with some factors changed (canonical or written values).
    pub fn with<'a>(&self, changes: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Scenario> {
        let mut values = self.values.clone();
        for (name, value) in changes {
            let f = factor::factor(name).ok_or_else(|| Error::unknown("factor", name, factor::names()))?;
            values.insert(f.name.to_string(), (f.canonical)(value)?);
        }
        Scenario::from_canonical(&values)
    }

    /// A stable identifier: equal scenarios have equal ids, across runs and versions (schema-1
    /// stores' ids are kept: new factors appear only when not at their default).
    pub fn id(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for f in FACTORS {
            let v = &self.values[f.name];
            match f.id {
                IdPart::Value if f.name == "group" => {
                    parts.push(self.handshake.groups.iter().map(|g| g.name).collect::<Vec<_>>().join(","))
                }
                IdPart::Value => parts.push(v.clone()),
                IdPart::Flag(n) => parts.push(format!("{n}={}", (v == "true") as u8)),
                IdPart::Named(n) if Some(v.as_str()) != f.default => parts.push(format!("{n}={v}")),
                IdPart::Marker(n) if v == "true" => parts.push(n.to_string()),
                IdPart::Named(_) | IdPart::Marker(_) => {}
            }
        }
        parts.join("|")
    }

    /// The id a load scenario over QUIC had before the load's `http` factor folded into
    /// `transport` (issue 33): no `transport=quic` part, and `http=3` where that factor stood
    /// (after `tls`). `None` for a scenario not over QUIC, whose id did not change. Only a load's
    /// id changed: a transfer over QUIC always said `transport=quic`.
    pub fn load_id_before_transport_quic(&self) -> Option<String> {
        if self.transport != crate::transport::TransportKind::Quic {
            return None;
        }
        let id = self.with([("transport", "memory")]).ok()?.id();
        let mut parts: Vec<&str> = id.split('|').collect();
        // The parts of the factors after `tls` in the table, `http`'s place: the first of them
        // present in the id is where `http=3` goes.
        let after_tls = FACTORS.iter().skip_while(|f| f.name != "tls").skip(1);
        let later: Vec<String> = after_tls
            .filter_map(|f| match f.id {
                IdPart::Named(n) => Some(format!("{n}=")),
                IdPart::Marker(n) => Some(n.to_string()),
                _ => None,
            })
            .collect();
        let at = parts
            .iter()
            .position(|p| later.iter().any(|l| if l.ends_with('=') { p.starts_with(l.as_str()) } else { p == l }))
            .unwrap_or(parts.len());
        parts.insert(at, "http=3");
        Some(parts.join("|"))
    }

    /// A short human label for tables: `X25519MLKEM768 mldsa65:mldsa65` plus what differs from
    /// the defaults (the stack is shown in its own column).
    pub fn label(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for f in FACTORS {
            let part = if f.name == "group" {
                Some(self.handshake.groups.iter().map(|g| g.name).collect::<Vec<_>>().join(","))
            } else {
                (f.label)(&self.values[f.name])
            };
            parts.extend(part);
        }
        parts.join(" ")
    }

    /// Checks that the stack can do the handshake and that every factor set away from its
    /// default is one the measurement uses; errors name what would work.
    pub fn validate_for(&self, kind: Kind) -> Result<()> {
        if !kind.measurable() {
            return Err(Error::Unsupported(format!(
                "the {} measurement is not in this version of pqtls yet; measurements available: {}",
                kind.name(),
                Kind::ALL.iter().filter(|k| k.measurable()).map(|k| k.name()).collect::<Vec<_>>().join(", ")
            )));
        }
        for f in FACTORS {
            let v = &self.values[f.name];
            if Some(v.as_str()) != f.default && !f.used_by.contains(&kind) {
                return Err(Error::Unsupported(format!(
                    "factor {} = {v} is not measurable by the {} measurement (it applies to: {}); leave it at its default ({})",
                    f.name,
                    kind.name(),
                    f.used_by.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "),
                    f.default.unwrap_or("-")
                )));
            }
        }
        if kind == Kind::Load && self.transport == crate::transport::TransportKind::Socketpair {
            return Err(Error::Unsupported(
                "transport = socketpair is in situ's: a load runs over tcp (HTTPS/1.1, the default) or quic (HTTP/3)"
                    .into(),
            ));
        }
        if self.transport == crate::transport::TransportKind::Quic
            && self.handshake.client_hello_padding != crate::config::HelloPadding::None
        {
            return Err(Error::Unsupported(format!(
                "client_hello_padding = {} pads a ClientHello carried in TLS records: over QUIC the hello travels in \
                 Initial packets that QUIC itself pads to at least 1200 bytes (RFC 9000 §14.1; the quic_initial_mtu \
                 factor sets their size), and no stack pads the hello inside them; use stack = openssl over another \
                 transport (tcp; in situ's memory or socketpair too), or client_hello_padding = none",
                self.handshake.client_hello_padding
            )));
        }
        if self.transport == crate::transport::TransportKind::Quic
            && self.handshake.stack != crate::catalogue::Stack::Rustls
        {
            return Err(Error::Unsupported(format!(
                "transport = quic runs on the rustls stack only (quinn carries rustls); the {} stack over QUIC is not \
                 built (OpenSSL 3.5's QUIC API drives its own UDP I/O, see docs/quic.md): use stack = rustls, or \
                 transport = {} for {}",
                self.handshake.stack,
                // A transfer or a load goes over TCP; in situ has the in-process transports too.
                if kind == Kind::Insitu { "memory/socketpair/tcp" } else { "tcp" },
                self.handshake.stack
            )));
        }
        self.handshake.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load over QUIC's id, spelled as before `http` folded into `transport` (the ids of the
    /// fixture tests/fixtures/unchanged-net/expected-load, written by the binary of then).
    #[test]
    fn a_quic_load_id_is_known_in_its_old_spelling() {
        let sc = |given: &[(&str, &str)]| Scenario::new(given.iter().copied()).unwrap();
        let base = [("stack", "rustls"), ("group", "x25519"), ("chain", "p256:p256")];
        let quic = sc(&[&base[..], &[("transport", "quic"), ("connections", "2"), ("rate", "20/s")]].concat());
        assert_eq!(
            quic.id(),
            "rustls|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0|transport=quic|connections=2|rate=20/s"
        );
        assert_eq!(
            quic.load_id_before_transport_quic().unwrap(),
            "rustls|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0|connections=2|rate=20/s|http=3"
        );
        let keep_alive = sc(&[&base[..], &[("http", "3"), ("keep_alive", "true"), ("rtt", "10ms")]].concat());
        assert_eq!(
            keep_alive.load_id_before_transport_quic().unwrap(),
            "rustls|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0|keep_alive|http=3|rtt=10ms"
        );
        assert_eq!(sc(&base).load_id_before_transport_quic(), None);
    }

    #[test]
    fn ids_keep_the_schema_1_shape() {
        let s = Scenario::new([("group", "x25519"), ("chain", "p256:p256")]).unwrap();
        assert_eq!(s.id(), "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0");
        assert_eq!(s.label(), "x25519 p256:p256");
        let s = Scenario::new([
            ("stack", "rustls"),
            ("group", "X25519MLKEM768"),
            ("chain", "mldsa65:mldsa65"),
            ("key_shares", "X25519MLKEM768,x25519"),
            ("share_x25519", "true"),
            ("mtls", "p256:p256"),
            ("resumption", "true"),
        ])
        .unwrap();
        assert_eq!(
            s.id(),
            "rustls|X25519MLKEM768,x25519|mldsa65:mldsa65|TLS_AES_128_GCM_SHA256|root=0|parent=0|shares=X25519MLKEM768,x25519|share_x25519|mtls=p256:p256|resumed"
        );
        let t = s.with([("transport", "tcp"), ("clock", "cpu")]).unwrap();
        assert!(t.id().ends_with("|resumed|transport=tcp|clock=cpu"), "{}", t.id());
        assert!(t.label().contains("over tcp") && t.label().contains("clock=cpu"), "{}", t.label());
    }

    /// Chrome's ClientHello is a factor: in the id and label only when chosen, the same id as
    /// the handshake configuration's, refused on the stacks without it naming the one with it.
    #[test]
    fn the_client_profile_shows_only_when_chosen_and_is_boringssls() {
        let base =
            [("stack", "boringssl"), ("group", "X25519MLKEM768,x25519"), ("key_shares", "X25519MLKEM768,x25519")];
        let plain = Scenario::new(base).unwrap();
        assert_eq!(plain.value("client_profile"), "plain");
        assert!(!plain.id().contains("profile"), "{}", plain.id());
        let chrome = plain.with([("profile", "Chrome")]).unwrap();
        assert_eq!(chrome.value("client_profile"), "chrome");
        assert_eq!(chrome.handshake.client_profile, crate::config::ClientProfile::Chrome);
        assert!(chrome.id().ends_with("|shares=X25519MLKEM768,x25519|profile=chrome"), "{}", chrome.id());
        assert_eq!(chrome.id(), chrome.handshake.id());
        assert!(chrome.label().contains("profile=chrome"), "{}", chrome.label());
        for kind in [Kind::Insitu, Kind::Load, Kind::Layers, Kind::Transfer] {
            chrome.validate_for(kind).unwrap();
        }
        let e = chrome.with([("stack", "openssl")]).unwrap().validate_for(Kind::Insitu).unwrap_err().to_string();
        assert!(e.contains("client profile chrome") && e.contains("not available on openssl"), "{e}");
        assert!(e.contains("stacks that have it: boringssl"), "{e}");
        let e = plain.with([("client_profile", "firefox")]).unwrap_err().to_string();
        assert!(e.contains("firefox") && e.contains("plain") && e.contains("chrome"), "{e}");
    }

    #[test]
    fn per_side_windows_default_to_initcwnd_and_keep_ids() {
        let s =
            Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("rtt", "50ms"), ("initcwnd", "10")]).unwrap();
        assert_eq!(s.id(), "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0|rtt=50ms|initcwnd=10");
        assert_eq!((s.network.client_window(), s.network.server_window()), (Some(10), Some(10)));
        let t = s.with([("server_initcwnd", "40")]).unwrap();
        assert!(t.id().ends_with("|initcwnd=10|server_initcwnd=40"), "{}", t.id());
        assert_eq!((t.network.client_window(), t.network.server_window()), (Some(10), Some(40)));
        assert!(t.label().contains("server initcwnd 40"), "{}", t.label());
        assert!(t.validate_for(Kind::Transfer).is_ok());
        // A load runs through the network lab too; the other kinds refuse the link by name.
        assert!(t.validate_for(Kind::Load).is_ok());
        assert!(
            t.network.emulated() && !s.with([("rtt", "none"), ("initcwnd", "default")]).unwrap().network.emulated()
        );
        let e = t.validate_for(Kind::Resident).unwrap_err().to_string();
        assert!(e.contains("rtt = 50ms"), "{e}");
        assert!(Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("client_initcwnd", "0")]).is_err());
    }

    /// The compression factor enters the id and label only when not none; every measurement
    /// takes it over TCP and QUIC alike.
    #[test]
    fn certificate_compression_is_named_in_ids_and_labels() {
        let s = Scenario::new([("stack", "rustls"), ("group", "x25519"), ("chain", "mldsa65:mldsa65")]).unwrap();
        assert_eq!(s.value("cert_compression"), "none");
        let z = s.with([("compression", "zstd")]).unwrap();
        assert_eq!(z.id(), format!("{}|compress=zstd", s.id()));
        assert_eq!(z.label(), "x25519 mldsa65:mldsa65 compress=zstd");
        let q = z.with([("transport", "quic")]).unwrap();
        assert!(q.validate_for(Kind::Insitu).is_ok());
        assert!(q.validate_for(Kind::Transfer).is_ok() && q.validate_for(Kind::Load).is_ok());
        assert!(z.with([("transport", "tcp")]).unwrap().validate_for(Kind::Transfer).is_ok());
    }

    #[test]
    fn factors_a_measurement_does_not_use_are_refused_by_name() {
        let s = Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("rtt", "50ms")]).unwrap();
        let e = s.validate_for(Kind::Insitu).unwrap_err().to_string();
        assert!(e.contains("rtt = 50ms") && e.contains("transfer, load"), "{e}");
        let e = Scenario::new([("group", "x25519"), ("groups", "x25519")]).unwrap_err().to_string();
        assert!(e.contains("given twice"), "{e}");
    }
}
