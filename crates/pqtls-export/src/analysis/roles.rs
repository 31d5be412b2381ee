//! Which step does what. The one place that knows the step vocabularies:
//!
//! - **canonical** (both stacks, schema 2 onwards, [`pqtls_core::steps`]): steps named by the
//!   protocol — `client_hello`, `server_hello`, `certificate`, `certificate_verify`, …
//!   (docs/attribution.md);
//! - **OpenSSL, schema 1**: `read_<message>` / `process_<message>` / `write_<message>` / `io`;
//! - **rustls, schema 1**: API calls (`write_client_hello`, `read_tls`, `process_new_packets`,
//!   `write_tls`) and timed crypto operations (`kx_keygen`, `kx_encapsulate`,
//!   `kx_decapsulate`, `sign`, `verify_cert_chain`, `verify_signature`).
//!
//! [`role`] maps a step of a side to a [`Role`] — key share, key exchange, sign, verify chain,
//! verify signature, other — so the charts (the signing tail, OpenSSL vs rustls) and the
//! rules work on records of either vocabulary.

use super::InsituView;
use indexmap::IndexMap;
use pqtls_core::record::SideSummary;
use pqtls_core::steps as st;
use pqtls_core::trace::Side;
use serde::Serialize;

/// What a step does, as far as the analysis needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Client: building the ClientHello with its key share(s) (key generation).
    KeyShare,
    /// Server: the key share (encapsulation or shared secret); client: decapsulation or
    /// shared secret (canonical and OpenSSL: with the handshake key schedule).
    KeyExchange,
    /// Signing CertificateVerify (the server; the client with mutual TLS).
    Sign,
    /// Validating the peer's certificate chain.
    VerifyChain,
    /// Verifying the peer's CertificateVerify signature.
    VerifySignature,
    /// Everything else: parsing, key schedule, Finished, tickets, record layer, I/O.
    Other,
}

impl Role {
    pub const ALL: [Role; 6] =
        [Role::KeyShare, Role::KeyExchange, Role::Sign, Role::VerifyChain, Role::VerifySignature, Role::Other];

    pub fn name(self) -> &'static str {
        match self {
            Role::KeyShare => "key share",
            Role::KeyExchange => "key exchange",
            Role::Sign => "sign",
            Role::VerifyChain => "verify chain",
            Role::VerifySignature => "verify signature",
            Role::Other => "other",
        }
    }
}

/// The step names a side uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vocabulary {
    Canonical,
    OpensslV1,
    RustlsV1,
}

/// Steps only the schema-1 rustls backend reported.
const RUSTLS_V1: &[&str] = &[
    "read_tls",
    "process_new_packets",
    "write_tls",
    "kx_keygen",
    "kx_encapsulate",
    "kx_decapsulate",
    "sign",
    "verify_cert_chain",
    "verify_signature",
];

impl Vocabulary {
    /// The vocabulary of a side's step names: canonical when one is a canonical name, rustls
    /// schema 1 when one is a rustls API call or crypto operation, else OpenSSL schema 1.
    pub fn of<'a>(steps: impl IntoIterator<Item = &'a str>) -> Vocabulary {
        let mut rustls = false;
        for s in steps {
            if st::ALL.contains(&s) {
                return Vocabulary::Canonical;
            }
            rustls |= RUSTLS_V1.contains(&s);
        }
        if rustls {
            Vocabulary::RustlsV1
        } else {
            Vocabulary::OpensslV1
        }
    }

    /// The vocabulary of one side of a record.
    pub fn of_side(s: &SideSummary) -> Vocabulary {
        Vocabulary::of(s.steps.keys().map(String::as_str))
    }

    pub fn name(self) -> &'static str {
        match self {
            Vocabulary::Canonical => "canonical",
            Vocabulary::OpensslV1 => "OpenSSL schema-1",
            Vocabulary::RustlsV1 => "rustls schema-1",
        }
    }
}

/// The role of step `step` of `side` in vocabulary `v`.
pub fn role(v: Vocabulary, side: Side, step: &str) -> Role {
    use Role::*;
    use Side::{Client, Server};
    use Vocabulary::*;
    match (v, side, step) {
        (Canonical, Client, st::CLIENT_HELLO) => KeyShare,
        (Canonical, Client, st::SERVER_HELLO) => KeyExchange,
        (Canonical, Client, st::CERTIFICATE) => VerifyChain,
        (Canonical, Client, st::CERTIFICATE_VERIFY) => VerifySignature,
        (Canonical, Client, st::CLIENT_CERTIFICATE_VERIFY) => Sign,
        (Canonical, Server, st::SERVER_HELLO) => KeyExchange,
        (Canonical, Server, st::CERTIFICATE_VERIFY) => Sign,
        (Canonical, Server, st::CLIENT_CERTIFICATE) => VerifyChain,
        (Canonical, Server, st::CLIENT_CERTIFICATE_VERIFY) => VerifySignature,
        (OpensslV1, Client, "write_client_hello") => KeyShare,
        (OpensslV1, Client, "process_server_hello") => KeyExchange,
        (OpensslV1, Client, "process_certificate") => VerifyChain,
        (OpensslV1, Client, "process_certificate_verify") => VerifySignature,
        (OpensslV1, Client, "write_certificate_verify") => Sign,
        (OpensslV1, Server, "write_server_hello") => KeyExchange,
        (OpensslV1, Server, "write_certificate_verify") => Sign,
        (OpensslV1, Server, "process_certificate") => VerifyChain,
        (OpensslV1, Server, "process_certificate_verify") => VerifySignature,
        (RustlsV1, _, "kx_keygen") => KeyShare,
        (RustlsV1, _, "kx_encapsulate" | "kx_decapsulate") => KeyExchange,
        (RustlsV1, _, "sign") => Sign,
        (RustlsV1, _, "verify_cert_chain") => VerifyChain,
        (RustlsV1, _, "verify_signature") => VerifySignature,
        _ => Other,
    }
}

/// Where a step comes in the handshake: canonical steps in protocol order
/// ([`pqtls_core::steps::ALL`]); other names after them, in the order given (a stable sort
/// keeps it).
pub fn step_order(step: &str) -> usize {
    st::ALL.iter().position(|s| *s == step).unwrap_or(st::ALL.len())
}

/// The summary of one side of a record.
pub fn side_of<'a>(r: &InsituView<'a>, side: Side) -> &'a SideSummary {
    match side {
        Side::Client => &r.result.client,
        Side::Server => &r.result.server,
    }
}

/// The steps of one side that play `role`, in the side's order.
pub fn steps_with(s: &SideSummary, side: Side, which: Role) -> Vec<&str> {
    let v = Vocabulary::of_side(s);
    s.steps.keys().map(String::as_str).filter(|k| role(v, side, k) == which).collect()
}

/// Median CPU ns per role of one side (every role, 0 when no step plays it); the roles add
/// up to the sum of the step medians.
pub fn role_medians(s: &SideSummary, side: Side) -> IndexMap<Role, f64> {
    let v = Vocabulary::of_side(s);
    let mut out: IndexMap<Role, f64> = Role::ALL.iter().map(|r| (*r, 0.0)).collect();
    for (k, sum) in &s.steps {
        *out.entry(role(v, side, k)).or_insert(0.0) += sum.median;
    }
    out
}

/// The server step that signs CertificateVerify (canonical `certificate_verify`, OpenSSL
/// schema-1 `write_certificate_verify`, rustls schema-1 `sign`).
pub fn signing_step(r: &InsituView) -> Option<String> {
    steps_with(&r.result.server, Side::Server, Role::Sign).first().map(|s| s.to_string())
}

/// One bar of the stack comparison: a record, and its segments (series name, median ns).
#[derive(Clone, Debug)]
pub struct StackBar<'a> {
    pub record: InsituView<'a>,
    pub segments: Vec<(String, f64)>,
}

/// Records of the same scenario on different stacks, side by side step by step.
#[derive(Clone, Debug)]
pub struct StackComparison<'a> {
    /// Steps grouped by role (the records do not share a step vocabulary) or by step name.
    pub by_role: bool,
    /// Series in drawing order: client's, then server's (`client <step>`, `server <step>`).
    pub series: Vec<String>,
    /// Consecutive bars of one scenario, one per stack.
    pub bars: Vec<StackBar<'a>>,
    /// Scenarios compared.
    pub scenarios: usize,
}

/// The scenarios measured on more than one stack (records equal in every factor but the
/// stack), at most `max_scenarios` of them, each record split into client and server steps.
/// When all of them use one step vocabulary (canonical names), segments are steps; else
/// they are [`Role`]s, which both vocabularies map to. `None` when no scenario has two stacks.
pub fn across_stacks<'a>(records: &[InsituView<'a>], max_scenarios: usize) -> Option<StackComparison<'a>> {
    let mut groups: Vec<(Vec<&str>, Vec<InsituView<'a>>)> = Vec::new();
    for r in records {
        let key = super::key_without(r.record, &[super::STACK]);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => {
                if !g.iter().any(|x| x.factor(super::STACK) == r.factor(super::STACK)) {
                    g.push(*r)
                }
            }
            None => groups.push((key, vec![*r])),
        }
    }
    let groups: Vec<Vec<InsituView<'a>>> =
        groups.into_iter().map(|(_, g)| g).filter(|g| g.len() > 1).take(max_scenarios.max(1)).collect();
    if groups.is_empty() {
        return None;
    }
    let sides = [(Side::Client, "client"), (Side::Server, "server")];
    let mut vocabularies: Vec<Vocabulary> = Vec::new();
    for r in groups.iter().flatten() {
        for (side, _) in sides {
            let v = Vocabulary::of_side(side_of(r, side));
            if !vocabularies.contains(&v) {
                vocabularies.push(v);
            }
        }
    }
    let by_role = vocabularies.len() > 1;
    let mut series: Vec<String> = Vec::new();
    let mut bars = Vec::new();
    for r in groups.iter().flatten() {
        let mut segments = Vec::new();
        for (side, name) in sides {
            let s = side_of(r, side);
            if by_role {
                for (role, ns) in role_medians(s, side) {
                    segments.push((format!("{name} {}", role.name()), ns));
                }
            } else {
                let mut steps: Vec<(&String, f64)> = s.steps.iter().map(|(k, v)| (k, v.median)).collect();
                steps.sort_by_key(|(k, _)| step_order(k));
                segments.extend(steps.into_iter().map(|(k, v)| (format!("{name} {k}"), v)));
            }
        }
        for (k, _) in &segments {
            if !series.contains(k) {
                series.push(k.clone());
            }
        }
        bars.push(StackBar { record: *r, segments });
    }
    // Client series before server series, each in protocol order (canonical steps).
    series.sort_by_key(|s| {
        let (side, step) = s.split_once(' ').unwrap_or(("", s));
        (side != "client", if by_role { 0 } else { step_order(step) })
    });
    Some(StackComparison { by_role, series, bars, scenarios: groups.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_vocabularies_map_to_the_same_roles() {
        use Side::{Client, Server};
        let openssl = Vocabulary::of(["read_client_hello", "write_certificate_verify", "io"]);
        let rustls = Vocabulary::of(["write_client_hello", "process_new_packets", "sign"]);
        let canonical = Vocabulary::of(["client_hello", "server_hello", "certificate_verify"]);
        assert_eq!((openssl, rustls, canonical), (Vocabulary::OpensslV1, Vocabulary::RustlsV1, Vocabulary::Canonical));
        // Server signing.
        assert_eq!(role(canonical, Server, "certificate_verify"), Role::Sign);
        assert_eq!(role(openssl, Server, "write_certificate_verify"), Role::Sign);
        assert_eq!(role(rustls, Server, "sign"), Role::Sign);
        // Client: chain validation, signature verification, key exchange.
        assert_eq!(role(canonical, Client, "certificate"), Role::VerifyChain);
        assert_eq!(role(openssl, Client, "process_certificate"), Role::VerifyChain);
        assert_eq!(role(rustls, Client, "verify_cert_chain"), Role::VerifyChain);
        assert_eq!(role(canonical, Client, "certificate_verify"), Role::VerifySignature);
        assert_eq!(role(openssl, Client, "process_certificate_verify"), Role::VerifySignature);
        assert_eq!(role(rustls, Client, "verify_signature"), Role::VerifySignature);
        assert_eq!(role(canonical, Client, "server_hello"), Role::KeyExchange);
        assert_eq!(role(openssl, Client, "process_server_hello"), Role::KeyExchange);
        assert_eq!(role(rustls, Client, "kx_decapsulate"), Role::KeyExchange);
        assert_eq!(role(canonical, Server, "server_hello"), Role::KeyExchange);
        assert_eq!(role(openssl, Server, "write_server_hello"), Role::KeyExchange);
        assert_eq!(role(rustls, Server, "kx_encapsulate"), Role::KeyExchange);
        assert_eq!(role(canonical, Client, "client_hello"), Role::KeyShare);
        assert_eq!(role(openssl, Client, "write_client_hello"), Role::KeyShare);
        assert_eq!(role(rustls, Client, "kx_keygen"), Role::KeyShare);
        // The same name means different things on the two sides.
        assert_eq!(role(canonical, Server, "client_hello"), Role::Other);
        assert_eq!(role(canonical, Server, "certificate"), Role::Other);
        // rustls's ClientHello call without its timed key generation is not the key share.
        assert_eq!(role(rustls, Client, "write_client_hello"), Role::Other);
    }

    /// A synthetic record with its steps renamed to the canonical vocabulary.
    fn canonical(stack: &str) -> pqtls_core::record::Record {
        let mut rec = crate::csv::tests::record(&[("stack", stack), ("group", "x25519"), ("chain", "p256:p256")]);
        let r = rec.insitu_mut().unwrap();
        let rename = |s: &mut SideSummary, map: &[(&str, &str)]| {
            s.steps = std::mem::take(&mut s.steps)
                .into_iter()
                .map(|(k, v)| (map.iter().find(|(o, _)| *o == k).map_or("other", |(_, n)| n).to_string(), v))
                .fold(IndexMap::new(), |mut m, (k, v)| {
                    m.entry(k).or_insert(v);
                    m
                });
        };
        rename(
            &mut r.client,
            &[
                ("write_client_hello", "client_hello"),
                ("process_server_hello", "server_hello"),
                ("process_encrypted_extensions", "encrypted_extensions"),
                ("process_certificate", "certificate"),
                ("process_certificate_verify", "certificate_verify"),
                ("process_finished", "finished"),
            ],
        );
        rename(
            &mut r.server,
            &[
                ("process_client_hello", "client_hello"),
                ("write_server_hello", "server_hello"),
                ("write_encrypted_extensions", "encrypted_extensions"),
                ("write_certificate", "certificate"),
                ("write_certificate_verify", "certificate_verify"),
                ("write_finished", "finished"),
                ("process_finished", "client_finished"),
            ],
        );
        rec
    }

    #[test]
    fn canonical_steps_compare_across_stacks_by_name() {
        let (a, mut b) = (canonical("openssl"), canonical("rustls"));
        // rustls keeps its signing operation as a sub-step of certificate_verify.
        let r = b.insitu_mut().unwrap();
        let sign = r.server.steps["certificate_verify"].clone();
        r.server.substeps.insert("certificate_verify/sign".into(), sign);
        let html =
            crate::html::render(&crate::ResultSet::from_records(vec![a.clone(), b.clone()]), &Default::default())
                .unwrap();
        assert!(html.contains("<td>server</td><td>certificate_verify/sign</td>"), "sub-step row");
        assert!(html.contains("inside a canonical step"));
        let recs = [InsituView::of(&a).unwrap(), InsituView::of(&b).unwrap()];
        assert_eq!(Vocabulary::of_side(&recs[1].server), Vocabulary::Canonical);
        assert_eq!(signing_step(&recs[0]).as_deref(), Some("certificate_verify"));
        let cmp = across_stacks(&recs, 10).unwrap();
        assert!(!cmp.by_role);
        assert_eq!(cmp.scenarios, 1);
        assert_eq!(cmp.bars.len(), 2);
        assert!(cmp.series.contains(&"server certificate_verify".to_string()), "{:?}", cmp.series);
        // Protocol order, not the records' (alphabetical) order.
        let pos = |n: &str| cmp.series.iter().position(|s| s == n).unwrap();
        assert!(
            pos("client client_hello") < pos("client server_hello")
                && pos("client server_hello") < pos("client certificate")
        );
        assert!(
            pos("server server_hello") < pos("server certificate_verify")
                && pos("server certificate_verify") < pos("server client_finished")
        );
        let client_last = cmp.series.iter().rposition(|s| s.starts_with("client ")).unwrap();
        assert!(cmp.series[..=client_last].iter().all(|s| s.starts_with("client ")), "{:?}", cmp.series);
        // A schema-1 record next to a canonical one: compared by role, and the roles add up.
        let old = crate::csv::tests::record(&[("stack", "rustls"), ("group", "x25519"), ("chain", "p256:p256")]);
        let mixed = [recs[0], InsituView::of(&old).unwrap()];
        let cmp = across_stacks(&mixed, 10).unwrap();
        assert!(cmp.by_role);
        for bar in &cmp.bars {
            let sum: f64 = bar.segments.iter().map(|(_, v)| v).sum();
            let steps: f64 =
                bar.record.client.steps.values().chain(bar.record.server.steps.values()).map(|s| s.median).sum();
            assert!((sum - steps).abs() < 1e-6 * steps, "{sum} vs {steps}");
        }
        // Same stack twice is no comparison.
        assert!(across_stacks(&[recs[0], recs[0]], 10).is_none());
    }
}
