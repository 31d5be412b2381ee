//! The factor table: every factor of a scenario defined once — its name and spellings, how a
//! written value is read and made canonical, its default, how it enters the id and the label,
//! which measurements use it, and how it sets the typed [`Scenario`].
//!
//! Everything else is derived from [`FACTORS`]: the CLI flags of `insitu`, the TOML experiment
//! parser and its matrix expansion, ids, labels, baselines, exporters' columns. **Adding a
//! factor is adding one entry here** (plus a field in [`Scenario`] if it is a new concept).

use crate::catalogue::{self, CertCompression, CodepointOverrides, Stack};
use crate::config::{ChainSpec, ClientProfile, HelloPadding};
use crate::error::{Error, Result};
use crate::scenario::{Scenario, TransportKind};
use crate::trace::Clock;
use crate::units;
use serde::{Deserialize, Serialize};

/// What a measurement produces: the `kind` of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Per-step CPU time and bytes of handshakes (C1–C3).
    Insitu,
    /// Connections and requests per second through real servers (C4).
    Load,
    /// Latency by layer: TCP, TLS, HTTP (C5).
    Layers,
    /// Time-to-first/last-byte over an emulated network (C6).
    Transfer,
    /// Memory a terminator keeps per idle connection (docs/memory.md).
    Resident,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Insitu, Kind::Load, Kind::Layers, Kind::Transfer, Kind::Resident];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Insitu => "insitu",
            Kind::Load => "load",
            Kind::Layers => "layers",
            Kind::Transfer => "transfer",
            Kind::Resident => "resident",
        }
    }

    /// Whether this build can measure it (the others are reserved record kinds).
    pub fn measurable(self) -> bool {
        matches!(self, Kind::Insitu | Kind::Load | Kind::Layers | Kind::Transfer | Kind::Resident)
    }

    pub fn parse(s: &str) -> Result<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim().to_ascii_lowercase().replace('-', "_"))
            .ok_or_else(|| Error::unknown("measurement", s, Kind::ALL.map(|k| k.name())))
    }
}

/// How a factor enters a scenario's id. Ids must stay equal across versions for equal
/// scenarios (a results store is resumed by id), so the first factors keep the shape that
/// schema-1 stores used: `stack|group|chain|cipher|root=0|parent=0[|shares=…][|mtls=…]…`.
#[derive(Clone, Copy, Debug)]
pub enum IdPart {
    /// Always present, as the value itself (or what the function makes of the scenario).
    Value,
    /// Always present as `name=0|1`.
    Flag(&'static str),
    /// Present as `name=value` only when the value is not the default.
    Named(&'static str),
    /// Present as the bare marker only when true.
    Marker(&'static str),
}

/// What a factor varies: what the commands that take a part of a scenario (`serve` takes the
/// handshake and the clock, `assess` the handshake) and the readers of a table select by,
/// instead of by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// The TLS handshake's configuration: stack, group, chain, suite, mTLS, resumption, …
    Handshake,
    /// How the bytes move: in-situ transports, the wire (TCP or QUIC) and quinn's settings.
    Transport,
    /// How steps inside a call are timed.
    Clock,
    /// The load: its shape, responses, who terminates TLS.
    Load,
    /// The emulated link of the network lab.
    Network,
}

/// One factor.
pub struct Factor {
    /// Canonical name (TOML key, record field, CLI flag with `-` for `_`).
    pub name: &'static str,
    pub class: Class,
    /// Other spellings accepted in experiment files and flags.
    pub aliases: &'static [&'static str],
    pub help: &'static str,
    /// A written example, for error messages.
    pub example: &'static str,
    /// Canonical default; `None` when the factor must be given.
    pub default: Option<&'static str>,
    /// Takes true/false.
    pub boolean: bool,
    /// Written value → canonical value (errors name what would work).
    pub canonical: fn(&str) -> Result<String>,
    pub id: IdPart,
    /// The label's part for a value (`None`: the value does not show in the label).
    pub label: fn(&str) -> Option<String>,
    /// Measurements that can use a value other than the default.
    pub used_by: &'static [Kind],
    /// Sets the typed scenario from the canonical value.
    pub apply: fn(&mut Scenario, &str) -> Result<()>,
}

impl Factor {
    /// The default value, or the example's first value when it has none.
    pub fn default_or_required(&self) -> Result<&'static str> {
        self.default
            .ok_or_else(|| Error::Invalid(format!("factor '{}' must be given; e.g. {}", self.name, self.example)))
    }

    /// The flag name: `send_root` → `send-root`.
    pub fn flag(&self) -> String {
        self.name.replace('_', "-")
    }
}

const ALL_KINDS: &[Kind] = &[Kind::Insitu, Kind::Load, Kind::Layers, Kind::Transfer, Kind::Resident];
/// The emulated link's factors: transfers, and loads through the network lab.
const NETWORK: &[Kind] = &[Kind::Transfer, Kind::Load];
const TRANSFER: &[Kind] = &[Kind::Transfer];
/// The transport factor: in situ's transports, and the transfer's wire (the load's wire is its
/// `http` factor; the resident measurement holds TCP connections).
const TRANSPORTED: &[Kind] = &[Kind::Insitu, Kind::Transfer, Kind::Load];
const LOAD: &[Kind] = &[Kind::Load, Kind::Layers];
const SOCKETS: &[Kind] = &[Kind::Load, Kind::Layers, Kind::Transfer];
/// The terminator factor: who serves the load, or holds the idle connections.
const TERMINATED: &[Kind] = &[Kind::Load, Kind::Layers, Kind::Resident];
/// The response size: the load's, the transfer's, and the resident connections' one request.
const RESPONDING: &[Kind] = &[Kind::Load, Kind::Layers, Kind::Transfer, Kind::Resident];

fn boolean(s: &str) -> Result<String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok("true".into()),
        "false" | "no" | "off" | "0" => Ok("false".into()),
        _ => Err(Error::Invalid(format!("'{s}' is not true or false"))),
    }
}

/// `1.1` or `3` (also `h3`, `http/3`, `h1`, `http/1.1`).
/// The `transport` factor's canonical value. The HTTP versions of the load's old `http` factor
/// (its alias) read as the transport they ran over: `3` is quic, `1.1` the default (a load's
/// TCP), so records and ids written with `http = "1.1"` keep their ids
/// ([`crate::record::Record::from_json_value`] upgrades those written with `http = "3"`).
fn transport(s: &str) -> Result<String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "3" | "h3" | "http/3" => Ok(TransportKind::Quic.name().into()),
        "1.1" | "h1" | "http/1.1" => Ok(TransportKind::Memory.name().into()),
        _ => TransportKind::parse(s).map(|t| t.name().to_string()).map_err(|_| {
            let known = TransportKind::EVERY.iter().map(|k| k.name().to_string());
            Error::unknown("transport", s, known.chain(["3 and 1.1 (as http: quic and tcp)".into()]))
        }),
    }
}

fn groups(s: &str) -> Result<String> {
    let parts: Vec<&str> = s.split([',', '+']).map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(Error::Invalid(format!(
            "group list '{s}' has an empty item; e.g. \"x25519\" or \"X25519MLKEM768+x25519\""
        )));
    }
    let mut names: Vec<&'static str> = Vec::new();
    for p in parts {
        let g = catalogue::group(p)?;
        if names.contains(&g.name) {
            return Err(Error::Invalid(format!("group list '{s}' names {} twice", g.name)));
        }
        names.push(g.name);
    }
    Ok(names.join(","))
}

fn list(v: &str) -> Vec<&'static catalogue::Group> {
    // Only called on canonical values, which name catalogue groups.
    v.split(',').filter_map(|g| catalogue::group(g).ok()).collect()
}

fn none_or(s: &str, f: fn(&str) -> Result<String>) -> Result<String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("none") {
        Ok("none".into())
    } else {
        f(t)
    }
}

fn chain(s: &str) -> Result<String> {
    ChainSpec::parse(s).map(|c| c.label())
}

fn no_label(_: &str) -> Option<String> {
    None
}

/// An initial window: `default` (the kernel's, or for one side the `initcwnd` factor's) or a
/// count of segments, 1 to 1000.
fn initcwnd(s: &str) -> Result<String> {
    if s.trim().eq_ignore_ascii_case("default") {
        Ok("default".into())
    } else {
        units::count(s, "initcwnd", 1000).map(|n| n.to_string())
    }
}

fn when_true(text: &'static str) -> impl Fn(&str) -> Option<String> {
    move |v| (v == "true").then(|| text.to_string())
}

/// The factors, in the order they vary in a matrix expansion (first = outermost loop).
pub static FACTORS: &[Factor] = &[
    Factor {
        name: "stack",
        class: Class::Handshake,
        aliases: &["stacks"],
        help: "TLS stack: openssl, rustls, s2n (s2n-tls) or boringssl",
        example: "stack = [\"openssl\", \"rustls\"]",
        default: Some("openssl"),
        boolean: false,
        canonical: |s| Stack::parse(s).map(|s| s.name().to_string()),
        id: IdPart::Value,
        label: no_label,
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.stack = Stack::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "group",
        class: Class::Handshake,
        aliases: &["groups"],
        help: "key-exchange group; several joined with + are the client's preference list",
        example: "group = [\"x25519\", \"X25519MLKEM768\"]",
        default: Some("x25519"),
        boolean: false,
        canonical: groups,
        id: IdPart::Value,
        label: |v| Some(v.to_string()),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.groups = list(v);
            Ok(())
        },
    },
    Factor {
        name: "chain",
        class: Class::Handshake,
        aliases: &["chains"],
        help: "server certificate chain: leaf:root or leaf:intermediate:root",
        example: "chain = [\"p256:p256\", \"mldsa65:mldsa65\"]",
        default: Some("p256:p256"),
        boolean: false,
        canonical: chain,
        id: IdPart::Value,
        label: |v| Some(v.to_string()),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.chain = ChainSpec::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "cipher",
        class: Class::Handshake,
        aliases: &["ciphers"],
        help: "TLS 1.3 cipher suite",
        example: "cipher = [\"TLS_AES_128_GCM_SHA256\"]",
        default: Some("TLS_AES_128_GCM_SHA256"),
        boolean: false,
        canonical: |s| catalogue::cipher(s).map(|c| c.name.to_string()),
        id: IdPart::Value,
        label: no_label,
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.cipher = catalogue::cipher(v)?;
            Ok(())
        },
    },
    Factor {
        name: "send_root",
        class: Class::Handshake,
        aliases: &["root_sent"],
        help: "the server sends the root certificate too",
        example: "send_root = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Flag("root"),
        label: |v| when_true("+root")(v),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.send_root = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "verify_parent",
        class: Class::Handshake,
        aliases: &["parent_verified"],
        help: "the client verifies the root's own signature (stands for an intermediate CA)",
        example: "verify_parent = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Flag("parent"),
        label: |v| when_true("+verify-parent")(v),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.verify_parent = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "key_shares",
        class: Class::Handshake,
        aliases: &["shares"],
        help: "key shares the client sends (one: for the first group); a share the server will not pick forces a HelloRetryRequest",
        example: "key_shares = [\"one\", \"X25519MLKEM768+x25519\"]",
        default: Some("one"),
        boolean: false,
        canonical: |s| {
            let t = s.trim();
            if t.is_empty() || t.eq_ignore_ascii_case("one") {
                Ok("one".into())
            } else {
                groups(t)
            }
        },
        id: IdPart::Named("shares"),
        label: |v| (v != "one").then(|| format!("shares={}", v.replace(',', "+"))),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.key_shares = if v == "one" { Vec::new() } else { list(v) };
            Ok(())
        },
    },
    Factor {
        name: "share_x25519",
        class: Class::Handshake,
        aliases: &[],
        help: "rustls: one X25519 key behind both an X25519MLKEM768 and an x25519 share",
        example: "share_x25519 = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Marker("share_x25519"),
        label: |v| when_true("shared-x25519")(v),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.share_x25519 = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "client_profile",
        class: Class::Handshake,
        aliases: &["profile", "client_hello"],
        help: "the client's ClientHello: plain (the stack's own) or chrome (Chrome's: GREASE values, permuted extensions; boringssl only — with --key-shares X25519MLKEM768,x25519 the hello Chrome sends)",
        example: "client_profile = [\"plain\", \"chrome\"]",
        default: Some("plain"),
        boolean: false,
        canonical: |s| ClientProfile::parse(s).map(|p| p.name().to_string()),
        id: IdPart::Named("profile"),
        label: |v| (v != "plain").then(|| format!("profile={v}")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.client_profile = ClientProfile::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "client_chain",
        class: Class::Handshake,
        aliases: &["mtls", "client_chains"],
        help: "mutual TLS with this client chain (none: server authentication only)",
        example: "client_chain = [\"none\", \"mldsa65:mldsa65\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| none_or(s, chain),
        id: IdPart::Named("mtls"),
        label: |v| (v != "none").then(|| format!("mtls={v}")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.client_chain = if v == "none" { None } else { Some(ChainSpec::parse(v)?) };
            Ok(())
        },
    },
    Factor {
        name: "resumption",
        class: Class::Handshake,
        aliases: &["resumed"],
        help: "measure resumed (session ticket) handshakes instead of full ones",
        example: "resumption = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Marker("resumed"),
        label: |v| when_true("resumed")(v),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.resumption = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "codepoints",
        class: Class::Handshake,
        aliases: &["codepoint_overrides"],
        help: "code points of the OQS algorithms for peers built with other ones: name=0xNNNN joined by + (none: oqs-provider 0.9's); see docs/oqs.md",
        example: "codepoints = [\"none\", \"frodo640aes=0xFE23+x25519_frodo640aes=0xFE25\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| {
            none_or(s, |t| {
                let o = CodepointOverrides::parse(&t.replace('+', ","))?;
                Ok(if o.is_empty() { "none".into() } else { o.to_string().replace(',', "+") })
            })
        },
        id: IdPart::Named("codepoints"),
        label: |v| (v != "none").then(|| format!("codepoints={v}")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.codepoints =
                if v == "none" { CodepointOverrides::none() } else { CodepointOverrides::parse(&v.replace('+', ","))? };
            Ok(())
        },
    },
    Factor {
        name: "cert_compression",
        class: Class::Handshake,
        aliases: &["compression", "compress"],
        help: "certificate compression (RFC 8879): none, zlib, brotli or zstd — the server (and with mutual TLS the client) sends its chain as a CompressedCertificate, the peer offers only that algorithm (openssl, rustls); see docs/auth-bytes.md",
        example: "cert_compression = [\"none\", \"brotli\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| CertCompression::parse(s).map(|c| c.name().to_string()),
        id: IdPart::Named("compress"),
        label: |v| (v != "none").then(|| format!("compress={v}")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.cert_compression = CertCompression::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "auth_bytes",
        class: Class::Handshake,
        aliases: &["auth_size"],
        help: "the server's Certificate + CertificateVerify messages made exactly this size (bytes, e.g. 16KiB) by a non-critical padding extension in the leaf (none: the chain as it is); see docs/auth-bytes.md",
        example: "auth_bytes = [\"none\", \"4KiB\", \"16KiB\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| none_or(s, |t| units::bytes(t).map(|n| n.to_string())),
        id: IdPart::Named("auth"),
        label: |v| (v != "none").then(|| format!("auth={v}B")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.auth_bytes = if v == "none" { None } else { Some(v.parse().map_err(|_| Error::Invalid(format!("auth_bytes '{v}' is not a number of bytes")))?) };
            Ok(())
        },
    },
    Factor {
        name: "client_hello_padding",
        class: Class::Handshake,
        aliases: &["hello_padding", "ch_padding"],
        help: "RFC 7685 padding of the ClientHello: none, or 512 — a hello of 256–511 bytes (header included) padded to 512, as OpenSSL's SSL_OP_TLSEXT_PADDING does for cURL (openssl only; larger hellos, e.g. ML-KEM's, are not padded); see docs/experiments.md",
        example: "client_hello_padding = [\"none\", \"512\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| HelloPadding::parse(s).map(|p| p.name().to_string()),
        id: IdPart::Named("ch_pad"),
        label: |v| (v != "none").then(|| format!("hello-pad={v}B")),
        used_by: ALL_KINDS,
        apply: |sc, v| {
            sc.handshake.client_hello_padding = HelloPadding::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "transport",
        class: Class::Transport,
        aliases: &["mode", "http"],
        help: "how bytes move. In situ: memory (one thread), socketpair (two pinned threads), tcp (two pinned threads over loopback TCP), quic (QUIC datagrams in memory, one thread; rustls only). Transfer and load: tcp (HTTPS/1.1; the default) or quic (HTTP/3 over quinn; rustls only). `http = \"3\"`, the old spelling, is quic",
        example: "transport = [\"memory\", \"tcp\"]",
        default: Some("memory"),
        boolean: false,
        canonical: transport,
        id: IdPart::Named("transport"),
        label: |v| (v != "memory").then(|| format!("over {v}")),
        used_by: TRANSPORTED,
        apply: |sc, v| {
            sc.transport = TransportKind::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "clock",
        class: Class::Clock,
        aliases: &[],
        help: "how steps inside a call are timed: split (thread CPU clock at each call's ends and at anchors ≥ 50 µs apart, shared by wall time in between) or cpu (thread CPU clock at every event); see docs/attribution.md",
        example: "clock = [\"split\", \"cpu\"]",
        default: Some("split"),
        boolean: false,
        canonical: |s| Clock::parse(s).map(|c| c.name().to_string()),
        id: IdPart::Named("clock"),
        label: |v| (v != "split").then(|| format!("clock={v}")),
        // Only in situ times steps inside calls (load, transfer and resident read the process's
        // or the connection's CPU): elsewhere a clock would be accepted and ignored.
        used_by: &[Kind::Insitu],
        apply: |sc, v| {
            sc.clock = Clock::parse(v)?;
            Ok(())
        },
    },
    Factor {
        name: "threads",
        class: Class::Load,
        aliases: &[],
        help: "load generator threads, each with its own event loop",
        example: "threads = [\"1\", \"4\", \"8\"]",
        default: Some("1"),
        boolean: false,
        canonical: |s| units::count(s, "threads", 1024).map(|n| n.to_string()),
        id: IdPart::Named("threads"),
        label: |v| (v != "1").then(|| format!("{v} threads")),
        used_by: LOAD,
        apply: |sc, v| {
            sc.load.threads = units::count(v, "threads", 1024)?;
            Ok(())
        },
    },
    Factor {
        name: "connections",
        class: Class::Load,
        aliases: &[],
        help: "concurrent connections per load thread (threads × connections in all)",
        example: "connections = [\"1\", \"64\"]",
        default: Some("1"),
        boolean: false,
        canonical: |s| units::count(s, "connections", 1_000_000).map(|n| n.to_string()),
        id: IdPart::Named("connections"),
        label: |v| (v != "1").then(|| format!("{v} conns")),
        used_by: LOAD,
        apply: |sc, v| {
            sc.load.connections = units::count(v, "connections", 1_000_000)?;
            Ok(())
        },
    },
    Factor {
        name: "rate",
        class: Class::Load,
        aliases: &[],
        help: "open-loop request rate (e.g. 100/s), or max for a closed loop",
        example: "rate = [\"max\", \"100/s\"]",
        default: Some("max"),
        boolean: false,
        canonical: |s| {
            units::rate_per_s(s).map(|r| match r {
                None => "max".to_string(),
                Some(x) => format!("{x}/s"),
            })
        },
        id: IdPart::Named("rate"),
        label: |v| (v != "max").then(|| format!("@{v}")),
        used_by: SOCKETS,
        apply: |sc, v| {
            sc.load.rate_per_s = units::rate_per_s(v)?;
            Ok(())
        },
    },
    Factor {
        name: "response_size",
        class: Class::Load,
        aliases: &["size"],
        help: "bytes the server answers each request with (0: handshake and an empty response)",
        example: "response_size = [\"0\", \"1KiB\", \"64KiB\"]",
        default: Some("0"),
        boolean: false,
        canonical: |s| units::bytes(s).map(units::format_bytes),
        id: IdPart::Named("size"),
        label: |v| (v != "0").then(|| v.to_string()),
        used_by: RESPONDING,
        apply: |sc, v| {
            sc.load.response_bytes = units::bytes(v)?;
            Ok(())
        },
    },
    Factor {
        name: "keep_alive",
        class: Class::Load,
        aliases: &[],
        help: "reuse connections for several requests (false: one request per TLS connection)",
        example: "keep_alive = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Marker("keep_alive"),
        label: |v| when_true("keep-alive")(v),
        used_by: LOAD,
        apply: |sc, v| {
            sc.load.keep_alive = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "verify",
        class: Class::Load,
        aliases: &[],
        help: "the load client verifies the server's certificate chain (false: accepts it as sent — the work h2load does; the CertificateVerify signature is still checked)",
        example: "verify = [true, false]",
        default: Some("true"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Named("verify"),
        label: |v| (v == "false").then(|| "no verify".to_string()),
        used_by: LOAD,
        apply: |sc, v| {
            sc.load.verify = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "terminator",
        class: Class::Load,
        aliases: &["via"],
        help: "who terminates TLS for the load: pqtls (pqtls serve), nginx or haproxy (forwarding to pqtls serve --plain)",
        example: "terminator = [\"pqtls\", \"haproxy\"]",
        default: Some("pqtls"),
        boolean: false,
        canonical: |s| match s.trim().to_ascii_lowercase().as_str() {
            t @ ("pqtls" | "nginx" | "haproxy") => Ok(t.to_string()),
            other => Err(Error::unknown("terminator", other, ["pqtls", "nginx", "haproxy"])),
        },
        id: IdPart::Named("via"),
        label: |v| (v != "pqtls").then(|| format!("via {v}")),
        used_by: TERMINATED,
        apply: |sc, v| {
            sc.load.terminator = v.to_string();
            Ok(())
        },
    },
    Factor {
        name: "tls",
        class: Class::Load,
        aliases: &[],
        help: "TLS on (false: plain HTTP, the \"no TLS\" baseline of a load study)",
        example: "tls = [true, false]",
        default: Some("true"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Named("tls"),
        label: |v| (v == "false").then(|| "no TLS".to_string()),
        used_by: LOAD,
        apply: |sc, v| {
            sc.load.tls = v == "true";
            Ok(())
        },
    },
    Factor {
        name: "rtt",
        class: Class::Network,
        aliases: &[],
        help: "round-trip time of the emulated link (none: no emulated network)",
        example: "rtt = [\"10ms\", \"50ms\", \"150ms\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| none_or(s, |t| units::duration_ns(t).map(units::format_duration)),
        id: IdPart::Named("rtt"),
        label: |v| (v != "none").then(|| format!("rtt {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.rtt_ns = if v == "none" { None } else { Some(units::duration_ns(v)?) };
            Ok(())
        },
    },
    Factor {
        name: "bandwidth",
        class: Class::Network,
        aliases: &[],
        help: "rate of the emulated link (none: unlimited)",
        example: "bandwidth = [\"100mbit\"]",
        default: Some("none"),
        boolean: false,
        canonical: |s| none_or(s, |t| units::bits_per_s(t).map(units::format_bits)),
        id: IdPart::Named("bw"),
        label: |v| (v != "none").then(|| v.to_string()),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.bits_per_s = if v == "none" { None } else { Some(units::bits_per_s(v)?) };
            Ok(())
        },
    },
    Factor {
        name: "loss",
        class: Class::Network,
        aliases: &[],
        help: "packet loss of the emulated link, in percent",
        example: "loss = [\"0%\", \"0.5%\"]",
        default: Some("0%"),
        boolean: false,
        canonical: |s| units::percent(s).map(|f| format!("{}%", f * 100.0)),
        id: IdPart::Named("loss"),
        label: |v| (v != "0%").then(|| format!("loss {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.loss = units::percent(v)?;
            Ok(())
        },
    },
    Factor {
        name: "jitter",
        class: Class::Network,
        aliases: &[],
        help: "delay variation of the emulated link",
        example: "jitter = [\"0ms\", \"2ms\"]",
        default: Some("0ms"),
        boolean: false,
        canonical: |s| units::duration_ns(s).map(units::format_duration),
        id: IdPart::Named("jitter"),
        label: |v| (v != "0ms").then(|| format!("jitter {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.jitter_ns = units::duration_ns(v)?;
            Ok(())
        },
    },
    Factor {
        name: "initcwnd",
        class: Class::Network,
        aliases: &[],
        help: "TCP initial congestion window (segments) of client and server routes (default: the kernel's)",
        example: "initcwnd = [\"10\", \"40\"]",
        default: Some("default"),
        boolean: false,
        canonical: initcwnd,
        id: IdPart::Named("initcwnd"),
        label: |v| (v != "default").then(|| format!("initcwnd {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.initcwnd = if v == "default" { None } else { Some(units::count(v, "initcwnd", 1000)?) };
            Ok(())
        },
    },
    Factor {
        name: "client_initcwnd",
        class: Class::Network,
        aliases: &[],
        help: "TCP initial congestion window (segments) of the client's route only (default: the initcwnd factor's value)",
        example: "client_initcwnd = [\"10\", \"40\"]",
        default: Some("default"),
        boolean: false,
        canonical: initcwnd,
        id: IdPart::Named("client_initcwnd"),
        label: |v| (v != "default").then(|| format!("client initcwnd {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.client_initcwnd = if v == "default" { None } else { Some(units::count(v, "client_initcwnd", 1000)?) };
            Ok(())
        },
    },
    Factor {
        name: "server_initcwnd",
        class: Class::Network,
        aliases: &[],
        help: "TCP initial congestion window (segments) of the server's route only (default: the initcwnd factor's value)",
        example: "server_initcwnd = [\"10\", \"40\"]",
        default: Some("default"),
        boolean: false,
        canonical: initcwnd,
        id: IdPart::Named("server_initcwnd"),
        label: |v| (v != "default").then(|| format!("server initcwnd {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.network.server_initcwnd = if v == "default" { None } else { Some(units::count(v, "server_initcwnd", 1000)?) };
            Ok(())
        },
    },
    Factor {
        name: "quic_initial_mtu",
        class: Class::Transport,
        aliases: &[],
        help: "transport = quic only: quinn's initial MTU (bytes of UDP payload, 1200–1472) on both sides: the size of the client's Initial datagrams, and so of the server's 3× anti-amplification budget (default: quinn's 1200; docs/quic.md)",
        example: "quic_initial_mtu = [\"1200\", \"1452\"]",
        default: Some("default"),
        boolean: false,
        canonical: quic_initial_mtu,
        id: IdPart::Named("quic_mtu"),
        label: |v| (v != "default").then(|| format!("quic mtu {v}")),
        used_by: NETWORK,
        apply: |sc, v| {
            sc.load.quic_initial_mtu = if v == "default" { None } else { Some(units::count(&quic_initial_mtu(v)?, "quic_initial_mtu", 1472)?) };
            Ok(())
        },
    },
    Factor {
        name: "quic_token",
        class: Class::Transport,
        aliases: &[],
        help: "transport = quic only: a second contact — the server sends address-validation tokens (NEW_TOKEN) and every measured connection offers one from an earlier connection to it, so its address is valid at once and the 3× anti-amplification limit does not apply (default: false, every connection a first contact; docs/quic.md)",
        example: "quic_token = [false, true]",
        default: Some("false"),
        boolean: true,
        canonical: boolean,
        id: IdPart::Marker("quic_token"),
        label: |v| when_true("quic token")(v),
        used_by: TRANSFER,
        apply: |sc, v| {
            sc.load.quic_token = v == "true";
            Ok(())
        },
    },
];

/// `default`, or a QUIC initial MTU the lab's links carry: 1,200 (RFC 9000's minimum) to
/// 1,472 (a 1,500-byte link's UDP payload).
fn quic_initial_mtu(s: &str) -> Result<String> {
    if s.trim().eq_ignore_ascii_case("default") {
        return Ok("default".into());
    }
    match units::count(s, "quic_initial_mtu", 1472)? {
        n if n >= 1200 => Ok(n.to_string()),
        n => Err(Error::Invalid(format!(
            "quic_initial_mtu {n}: give 1200 (RFC 9000's smallest Initial datagram, quinn's default) to 1472 (a \
             1,500-byte link's UDP payload)"
        ))),
    }
}

/// The most configurations one matrix may describe (an experiment file's, or a command's
/// flags): counted before anything is expanded, so a small file describing millions is refused
/// at once instead of filling the memory (issue 39). More is a sweep for several machines:
/// split it into several experiments.
pub const MAX_CONFIGURATIONS: u128 = 100_000;

/// How many points the product of `lists` has (saturating), and the product as written
/// (`3 × 4 × 2`, the lists of more than one value).
pub fn count_points<T>(lists: &[(&str, Vec<T>)]) -> (u128, String) {
    let n = lists.iter().fold(1u128, |n, (_, v)| n.saturating_mul(v.len() as u128));
    let shown: Vec<String> =
        lists.iter().filter(|(_, v)| v.len() > 1).map(|(f, v)| format!("{} {f}", v.len())).collect();
    (n, shown.join(" × "))
}

/// The refusal of a matrix of `n` configurations above `cap` (at most [`MAX_CONFIGURATIONS`]
/// unless the run raised it), `None` at or below it; `how`: the product as written.
pub fn too_many_configurations(n: u128, how: &str, cap: u128) -> Option<String> {
    (n > cap).then(|| {
        format!(
            "the matrix describes {n} configurations ({how}), more than the {cap} one experiment may hold; split it \
             into several experiments (each its own results directory), or list fewer values — or, for an experiment \
             file, raise the cap with `pqtls run --max-configurations {n}` (the run walks the matrix rather than \
             holding it, about {BYTES_PER_CONFIGURATION} bytes per configuration, and measures the configurations one \
             after another: it says how long that takes at least before it starts)"
        )
    })
}

/// What a run holds per configuration of its matrix, about: the matrix is walked, not held (peak
/// resident 42.3 MB for 100,000 load configurations against 27.9 MB for 10,000 before the first
/// measurement: docs/reliability.md), for the cap's refusal and its flag.
pub const BYTES_PER_CONFIGURATION: u64 = 160;

/// Refuses a value written for a `kind` of measurement that would read it as something else:
/// `transport = memory` (or socketpair) for a load or a transfer, which run over tcp (their
/// default, which the table spells `memory`) or quic.
pub fn refuse_written(f: &Factor, kind: Kind, written: &str) -> Result<()> {
    if f.name == "transport" && kind != Kind::Insitu {
        if let Ok(t @ (TransportKind::Memory | TransportKind::Socketpair)) = TransportKind::parse(written) {
            return Err(Error::Unsupported(format!(
                "transport {} is in situ's: the {} measurement runs over tcp (HTTPS/1.1, the default) or quic \
                 (HTTP/3); give one of those or leave the transport out",
                t.name(),
                kind.name()
            )));
        }
    }
    Ok(())
}

/// The points of a matrix: every combination of one value per factor, `lists` in factor-table
/// order, the first factor outermost and the last varying fastest. The one expansion that both
/// front doors (experiment files and `insitu` flags) use, so equal matrices give equal orders.
pub fn product<T: Clone>(lists: &[(&str, Vec<T>)]) -> Vec<Vec<(String, T)>> {
    points(lists).collect()
}

/// [`product`] one point at a time: a matrix of 100,000 points is walked, never held.
pub fn points<S: AsRef<str>, T: Clone>(lists: &[(S, Vec<T>)]) -> Points<'_, S, T> {
    let empty = lists.iter().any(|(_, v)| v.is_empty());
    Points { lists, at: (!empty).then(|| vec![0; lists.len()]) }
}

/// The iterator of [`points`]: an odometer over the lists' indices, the last factor fastest.
pub struct Points<'l, S, T> {
    lists: &'l [(S, Vec<T>)],
    /// The indices of the next point; `None` once the last was given.
    at: Option<Vec<usize>>,
}

impl<S: AsRef<str>, T: Clone> Iterator for Points<'_, S, T> {
    type Item = Vec<(String, T)>;

    fn next(&mut self) -> Option<Self::Item> {
        let idx = self.at.as_mut()?;
        let point = self
            .lists
            .iter()
            .zip(idx.iter())
            .map(|((f, vals), &i)| (f.as_ref().to_string(), vals[i].clone()))
            .collect();
        // Odometer: the last factor varies fastest.
        let mut k = self.lists.len();
        loop {
            if k == 0 {
                self.at = None;
                break;
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < self.lists[k].1.len() {
                break;
            }
            idx[k] = 0;
        }
        Some(point)
    }
}

/// The factor of a name or alias.
pub fn factor(name: &str) -> Option<&'static Factor> {
    let n = name.trim().replace('-', "_");
    FACTORS.iter().find(|f| f.name == n).or_else(|| FACTORS.iter().find(|f| f.aliases.contains(&n.as_str())))
}

/// Every factor name, for error messages.
pub fn names() -> Vec<&'static str> {
    FACTORS.iter().map(|f| f.name).collect()
}

/// The canonical value of `value` for the factor `name` (an unknown factor is an error that
/// lists the known ones).
pub fn canonical(name: &str, value: &str) -> Result<String> {
    let f = factor(name).ok_or_else(|| Error::unknown("factor", name, names()))?;
    (f.canonical)(value).map_err(|e| Error::Invalid(format!("{}: {e}", f.name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `serve` and `assess` select by class is what they selected by name before: the
    /// handshake's factors (and, for `serve`, the clock); the transport is in situ's, the
    /// transfer's and the load's (QUIC is `transport = quic` everywhere).
    #[test]
    fn classes_select_the_handshake_and_transport_is_used_where_it_is_read() {
        let names =
            |keep: &dyn Fn(&Factor) -> bool| FACTORS.iter().filter(|f| keep(f)).map(|f| f.name).collect::<Vec<_>>();
        let by_name = names(&|f| f.used_by.contains(&Kind::Insitu) && !matches!(f.name, "transport" | "clock"));
        assert_eq!(names(&|f| f.class == Class::Handshake), by_name);
        assert!(by_name.contains(&"stack") && by_name.contains(&"client_chain") && by_name.len() == 15, "{by_name:?}");
        assert!(FACTORS.iter().filter(|f| f.class == Class::Handshake).all(|f| f.used_by == ALL_KINDS));
        assert_eq!(factor("transport").unwrap().used_by, [Kind::Insitu, Kind::Transfer, Kind::Load]);
        assert!(factor("http").is_some_and(|f| f.name == "transport"), "http is the transport's old name");
        assert_eq!(factor("clock").unwrap().class, Class::Clock);
    }

    /// The load's old `http` spellings are transports: 3 is quic, 1.1 the default (a load's TCP,
    /// so 1.1 ids do not change); anything else is refused naming both spellings.
    #[test]
    fn http_versions_read_as_transports() {
        for (given, expected) in [("3", "quic"), ("h3", "quic"), ("HTTP/3", "quic"), ("1.1", "memory"), ("tcp", "tcp")]
        {
            assert_eq!(canonical("http", given).unwrap(), expected, "{given}");
        }
        let e = canonical("http", "2").unwrap_err().to_string();
        assert!(e.contains("'2'") && e.contains("quic") && e.contains("1.1"), "{e}");
        let written = |t: &str, k: Kind| refuse_written(factor("transport").unwrap(), k, t).map_err(|e| e.to_string());
        assert!(written("memory", Kind::Load).unwrap_err().contains("in situ's"));
        assert!(written("socketpair", Kind::Transfer).is_err());
        assert!(written("1.1", Kind::Load).is_ok() && written("quic", Kind::Load).is_ok());
        assert!(written("memory", Kind::Insitu).is_ok());
    }

    #[test]
    fn every_factor_has_a_canonical_default_and_a_unique_name() {
        let mut seen = std::collections::HashSet::new();
        for f in FACTORS {
            assert!(seen.insert(f.name), "{} twice", f.name);
            for a in f.aliases {
                assert!(seen.insert(a), "alias {a} twice");
            }
            if let Some(d) = f.default {
                assert_eq!((f.canonical)(d).unwrap(), d, "default of {} is not canonical", f.name);
            }
        }
    }

    #[test]
    fn values_are_canonical_and_bad_ones_say_what_works() {
        assert_eq!(canonical("groups", "x25519mlkem768+X25519").unwrap(), "X25519MLKEM768,x25519");
        assert!(canonical("group", "x25519,x25519").unwrap_err().to_string().contains("twice"));
        assert!(canonical("group", "x25519,").unwrap_err().to_string().contains("empty item"));
        assert_eq!(canonical("mtls", "NONE").unwrap(), "none");
        assert_eq!(canonical("rtt", "0.05s").unwrap(), "50ms");
        assert_eq!(canonical("size", "1024").unwrap(), "1KiB");
        assert_eq!(canonical("transport", "threads").unwrap(), "socketpair");
        assert_eq!(canonical("compression", "Brotli").unwrap(), "brotli");
        assert_eq!(canonical("cert_compression", "off").unwrap(), "none");
        let e = canonical("cert_compression", "lz4").unwrap_err().to_string();
        assert!(e.contains("'lz4'") && e.contains("zlib") && e.contains("brotli") && e.contains("zstd"), "{e}");
        let e = canonical("nope", "1").unwrap_err().to_string();
        assert!(e.contains("unknown factor 'nope'") && e.contains("group"), "{e}");
    }
}
