//! The transfer measurement (`kind = "transfer"`, SPEC C6): TLS or mutual-TLS transfers over
//! an emulated link of the network lab (crates/pqtls-netlab), on either wire of the
//! [`crate::carrier`] (`transport = tcp`, the default, or `quic`). Per scenario: pqtls' own
//! server on the scenario's stack in the lab's server namespace, the load generator in its
//! client namespace, one connection at a time and a new connection per transfer (TCP:
//! `Connection: close`; QUIC: one HTTP/3 connection per transfer), the response of
//! `response_size` bytes. The record holds TTFB and TTLB percentiles, the layers, the message
//! sizes, the negotiated parameters (checked against the scenario), the verified link, the delay
//! emulator's lateness during the transfers, and the round trips of each layer measured next to
//! what slow start predicts ([`FlightModel::predict`]) — over QUIC also next to the QUIC
//! model's ([`QuicFlightModel`]), with quinn's datagram counters of the first connection.
//!
//! The delay emulator's NFQUEUE rule, the loss rule and tbf match every IP packet, UDP
//! included; the link's RTT is verified with UDP probes. Over QUIC (rustls only), `initcwnd` is
//! the congestion controller's initial window: N × the initial datagram (1,200 bytes), set on
//! quinn (`client_initcwnd` on the client, `server_initcwnd` on the server); without it quinn's
//! default, 12,000 bytes. `quic_initial_mtu` sets quinn's initial MTU on both sides (the
//! client's Initial datagrams, and so the server's 3× budget). `quic_token = true` measures a
//! second contact: the server sends address-validation tokens (NEW_TOKEN), one unmeasured
//! connection before the run receives the first, and every connection of the run (warm-up
//! included, one at a time) offers one its predecessor received — its address valid at once,
//! no 3× limit. The server counts the connections that came with a valid token; one that did
//! not fails the measurement (it would be a first contact recorded as a second).
//!
//! The lab is kept across consecutive scenarios on the same link and refused links are
//! reported ([`crate::links`], shared with the load measurement over the lab).

use crate::carrier::quic::{QuicClient, QuicServing};
use crate::carrier::{Client, ServeWith, Wire};
use crate::links::{netlab_error, Links};
pub use crate::links::{plan_links, Refusals};
use crate::load::{Expect, LoadOptions, LoadProgress, LoadRun, Target};
use crate::serve::StatsSnapshot;
use crate::shared::{load_result, server_side};
use pqtls_core::backend::{EndpointOptions, KeyLog, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::load::{LoadResult, Terminator};
use pqtls_core::record::{Measured, Outcome, Record};
use pqtls_core::roundtrip_quic::quinn_mtu_probes;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::transfer::{
    FlightModel, Percentiles, QuicFlightModel, QuicTransfer, TokenUse, TransferResult, KERNEL_INITCWND, LAB_MSS_BYTES,
};
use pqtls_core::transport::TransportKind;
use pqtls_core::{units, Error, Result};
use pqtls_lab::measurement::{Measurement, Progress};
use pqtls_lab::Stacks;
use pqtls_netlab::{EmulatorReport, Lab, LabOptions, LinkReport, Side, VerifyOptions};
use pqtls_quic::tuning::Tuning;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// The transfer measurement: the stacks, how it is set up, the lab of the current link.
pub struct Transfer<'a> {
    pub stacks: Stacks<'a>,
    pub setup: TransferSetup,
    pub(crate) links: Links,
}

/// How the transfer measurement is set up.
#[derive(Clone, Default)]
pub struct TransferSetup {
    /// Receives the client's and the server's TLS secrets.
    pub key_log: Option<Arc<dyn KeyLog>>,
    /// Congestion control, delay backend, emulator CPU (the windows come from each scenario).
    pub lab: LabOptions,
    pub verify: VerifyOptions,
}

impl<'a> Transfer<'a> {
    pub fn new(stacks: Stacks<'a>, setup: TransferSetup) -> Transfer<'a> {
        let links = Links::new(setup.lab.clone(), setup.verify.clone());
        Transfer { stacks, setup, links }
    }

    /// The links refused so far, each with the verification's reason.
    pub fn refusals(&self) -> Refusals {
        self.links.refusals()
    }

    /// Links built and verified so far.
    pub fn verifications(&self) -> u64 {
        self.links.verifications()
    }

    /// Tears the current lab down (also done when the measurement is dropped), reporting what
    /// could not be removed.
    pub fn close(&self) -> Result<()> {
        self.links.close()
    }
}

/// What a transfer must negotiate: the scenario's group, suite and the leaf's signature
/// scheme (the client trusts the PKI, so the server's CertificateVerify is the leaf's).
fn expect(scenario: &Scenario) -> Expect {
    let h = &scenario.handshake;
    Expect {
        group: Some(h.expected_group().name.to_string()),
        cipher: Some(h.cipher.name.to_string()),
        sigalg: Some(h.chain.leaf.scheme.to_string()),
        cert_compression: crate::carrier::compression_asked(h),
    }
}

/// HTTP/3 bytes of a request besides its path and authority: the HEADERS frame with its QPACK
/// field lines (method, scheme, static-table hits), and the client's control stream with its
/// SETTINGS (an estimate: the model needs it to a few tens of bytes).
const H3_REQUEST_OVERHEAD_BYTES: u64 = 48;
/// HTTP/3 bytes of a response besides its body: the HEADERS frame (status, content-type,
/// content-length) and the server's control stream with its SETTINGS (an estimate).
const H3_RESPONSE_OVERHEAD_BYTES: u64 = 48;
/// A DATA frame's header: type and length (varints).
const H3_DATA_FRAME_HEADER_BYTES: u64 = 5;
/// The body bytes `pqtls serve --quic` puts in one DATA frame.
const H3_DATA_FRAME_BYTES: u64 = 16 * 1024;

/// Checks that mutual TLS happened exactly when asked: the server's CertificateRequest and
/// the client's Certificate and CertificateVerify are in the measured handshake (the server
/// verifies the client's chain, and refuses a client without one: both stacks are configured
/// so; see docs/netlab.md).
pub fn check_client_auth(mtls: bool, messages: &indexmap::IndexMap<String, u64>) -> Result<()> {
    let has = |m: &str| messages.get(m).copied().unwrap_or(0) > 0;
    let seen = ["CertificateRequest", "ClientCertificate", "ClientCertificateVerify"].map(has);
    match (mtls, seen) {
        (true, [true, true, true]) | (false, [false, false, false]) => Ok(()),
        (true, _) => Err(Error::Other(format!(
            "mutual TLS was asked, but the handshake had CertificateRequest {}, client Certificate {}, client \
             CertificateVerify {}",
            seen[0], seen[1], seen[2]
        ))),
        (false, _) => Err(Error::Other(
            "no client chain was asked, but the server requested (or the client sent) a certificate".into(),
        )),
    }
}

impl Measurement for Transfer<'_> {
    fn kind(&self) -> Kind {
        Kind::Transfer
    }

    fn stacks(&self) -> Vec<Stack> {
        self.stacks.stacks()
    }

    fn measure(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Measured> {
        let rtt_ns = asked_rtt_ns(scenario)?;
        let wire = Wire::of(scenario.transport);
        let contexts = self.contexts(scenario, wire)?;
        let (done, link) = self.links.with_lab(&scenario.network, interrupt, progress, |lab, link, progress| {
            Ok((self.transfers(lab, scenario, settings, &contexts, interrupt, progress)?, link))
        })?;
        let over = if wire == Wire::Quic { " over QUIC" } else { "" };
        let run = &done.run;
        completed(run, settings, over)?;
        let messages = match &run.messages {
            Some(Ok(m)) => m.clone(),
            Some(Err(why)) => {
                return Err(Error::Other(format!("the handshake's message sizes were not measured{over}: {why}")))
            }
            None => return Err(Error::Other(format!("the handshake's message sizes were not measured{over}"))),
        };
        check_client_auth(scenario.handshake.client_chain.is_some(), &messages)?;
        scenario.handshake.check_auth_bytes(&messages)?;
        scenario.handshake.check_client_hello_messages(&messages)?;
        let stack = scenario.handshake.stack;
        let library = self.stacks.backend(stack)?.library_version();
        let terminator = Terminator {
            name: "pqtls".into(),
            version: format!("{} in the lab's server namespace", wire.carrier().describe(&library, stack)),
            backend: None,
        };
        let server_side = server_side(&done.before, &done.after, true);
        let mut load = load_result(&done.opts, run, terminator, Some(server_side), None);
        if wire == Wire::Quic {
            load.notes.push(
                "QUIC: no tcp layer (tcp and tcp_to_tls are 0), tls is first Initial → handshake done at the client; \
                 handshake bytes are TLS messages (CRYPTO data) without QUIC headers, tags or padding"
                    .into(),
            );
        }
        let mut result = transfer_result(load, link, done.emulator, &done.opts, scenario, rtt_ns);
        if let Client::Quic(client) = &done.opts.client {
            let tokens = scenario.load.quic_token.then(|| TokenUse {
                connections: done.after.connections - done.before.connections,
                validated: done.after.address_validated - done.before.address_validated,
            });
            if let Some(t) = &tokens {
                if t.validated < t.connections {
                    return Err(Error::Other(format!(
                        "quic_token = true: {} of the run's {} connections came without a valid address-validation \
                         token (the server refused or never received it), so they were first contacts; the \
                         measurement is not recorded",
                        t.connections - t.validated,
                        t.connections
                    )));
                }
            }
            let model =
                quic_model(&result.load, &result.link, &done.opts, client, scenario, rtt_ns, contexts.server_tuning);
            let (handshake, connection) = done.run.first_connection.unwrap_or_default();
            result.quic = Some(QuicTransfer { model, handshake, connection, tokens });
            result.rounds = result.rounds_now();
        }
        let record = Record::measured(scenario, settings, &self.stacks.env, Outcome::Transfer(Box::new(result)));
        Ok(Measured { record, samples: Vec::new() })
    }
}

/// A scenario's contexts on its wire, prepared by `Stacks::prepare` on both: over TCP both
/// endpoints log their secrets; over QUIC (rustls only) the client's key log has both sides'
/// secrets (Wireshark needs no more), and quinn's settings on each side.
struct Contexts {
    server: Option<Arc<dyn Prepared>>,
    client: Client,
    server_tuning: Tuning,
}

/// What one scenario's transfers in the lab gave: the load generator's options and run, the
/// server's counters before and after it, the delay emulator's report.
struct Transfers {
    opts: LoadOptions,
    run: LoadRun,
    before: StatsSnapshot,
    after: StatsSnapshot,
    emulator: EmulatorReport,
}

impl Transfer<'_> {
    fn contexts(&self, scenario: &Scenario, wire: Wire) -> Result<Contexts> {
        let key_log = self.setup.key_log.clone();
        match wire {
            Wire::Tcp => {
                let (prepared, _) = self.stacks.prepare(scenario)?;
                let endpoint = EndpointOptions { traced: false, key_log, ..EndpointOptions::default() };
                let client = Client::Tcp { tls: Some(prepared.clone()), endpoint };
                Ok(Contexts { server: Some(prepared), client, server_tuning: Tuning::default() })
            }
            Wire::Quic => {
                let cfg = &scenario.handshake;
                pqtls_quic::h3::require_rustls(cfg.stack)?;
                let network = &scenario.network;
                let mtu = scenario.load.quic_initial_mtu.map(|m| u16::try_from(m).unwrap_or(u16::MAX));
                let tuning =
                    Tuning { initial_mtu_bytes: mtu, address_tokens: scenario.load.quic_token, ..Tuning::default() };
                tuning.validate()?;
                let server_tuning = tuning.with_initcwnd(network.server_window())?;
                let client_tuning = tuning.with_initcwnd(network.client_window())?;
                let (prepared, files) = self.stacks.prepare(scenario)?;
                let h3 = pqtls_quic::h3::configs(cfg, prepared.as_ref(), key_log)?;
                let client = Client::Quic(QuicClient::new(cfg, &files, h3.client, client_tuning));
                Ok(Contexts { server: Some(prepared), client, server_tuning })
            }
        }
    }

    /// Starts pqtls' own server in the lab's server namespace and runs the transfers from the
    /// client's, one at a time (over QUIC with `quic_token`, after one unmeasured first contact
    /// that receives the first token); stops the server and checks the emulator kept up.
    fn transfers(
        &self,
        lab: &Lab,
        scenario: &Scenario,
        settings: &Settings,
        contexts: &Contexts,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Transfers> {
        let wire = contexts.client.wire();
        let carrier = wire.carrier();
        let (endpoint, quic) = match &contexts.client {
            Client::Tcp { endpoint, .. } => (endpoint.clone(), None),
            Client::Quic(_) => (
                EndpointOptions::default(),
                Some(QuicServing { cfg: &scenario.handshake, tuning: contexts.server_tuning, key_log: None }),
            ),
        };
        let with = ServeWith {
            listen: "0.0.0.0:0".parse().expect("a valid address"),
            workers: 1,
            tls: contexts.server.clone(),
            endpoint,
            keep_alive: false,
            quic,
        };
        // The listening socket belongs to the namespace of the thread that makes it.
        let server = lab.within(Side::Server, || carrier.serve(with), || {}).map_err(netlab_error)??;
        let path = format!("/{}", units::format_bytes(scenario.load.response_bytes).replace(' ', ""));
        let addr = SocketAddr::from((lab.server_addr(), server.addr().port()));
        let opts = LoadOptions {
            expect: expect(scenario),
            stalls: self.links.stall_screen(lab, Some(crate::links::most_again(settings.load.requests))),
            ..options(settings, Target::parse(&format!("https://{addr}{path}"))?, contexts.client.clone())
        };
        if matches!(&opts.client, Client::Quic(q) if q.tokens.is_some()) {
            // The first contact, unmeasured: its NEW_TOKEN frames fill the run's store.
            let prime = LoadOptions { warmup: Duration::ZERO, requests: Some(1), timelines: false, ..opts.clone() };
            let primed = in_client(lab, settings, &mut |_| {}, |report| carrier.run(&prime, interrupt, report))??;
            if primed.requests == 0 {
                return Err(Error::Other(format!(
                    "quic_token = true: the first connection, which receives the token, failed: {:?}",
                    primed.errors
                )));
            }
        }
        let before = server.stats();
        lab.reset_emulator();
        let run = in_client(lab, settings, progress, |report| carrier.run(&opts, interrupt, report))?;
        let emulator = lab.emulator_report();
        let emulator_ok = lab.check_emulator();
        let after = server.stop();
        let run = run?;
        emulator_ok.map_err(netlab_error)?;
        let after = after?;
        Ok(Transfers { opts, run, before, after, emulator })
    }
}

/// Refuses a run that was interrupted (nothing of the scenario is kept; it is measured again on
/// resume) or in which no transfer completed (`over`: the transport, for the message).
fn completed(run: &LoadRun, settings: &Settings, over: &str) -> Result<()> {
    if run.stopped == "interrupted" {
        return Err(Error::Other("interrupted".into()));
    }
    if run.requests == 0 {
        // Transfers the stall screen discarded completed, but were not kept: say so.
        let stalls = run.stalls.as_ref().and_then(|s| s.summary()).map_or(String::new(), |s| format!("; {s}"));
        return Err(Error::Other(format!(
            "no transfer{over} completed in {} ({} errors: {}){stalls}",
            units::format_duration(run.duration_ns.max(settings.load.duration_ms * 1_000_000)),
            run.errors.iter().map(|e| e.count).sum::<u64>(),
            run.errors.iter().map(|e| format!("{} {}: {}", e.count, e.kind, e.last)).collect::<Vec<_>>().join("; ")
        )));
    }
    Ok(())
}

/// The load generator's options of a scenario's transfers to `target`: one connection at a
/// time, a new one per transfer, no TLS (the caller sets it), the run's timing.
fn options(settings: &Settings, target: Target, client: Client) -> LoadOptions {
    LoadOptions {
        target,
        client,
        threads: 1,
        connections: 1,
        rate_per_s: None,
        keep_alive: false,
        warmup: Duration::from_millis(settings.load.warmup_ms),
        duration: Duration::from_millis(settings.load.duration_ms),
        requests: settings.load.requests,
        timeout: Duration::from_millis(settings.load.timeout_ms),
        max_body_bytes: crate::load::DEFAULT_MAX_BODY_BYTES,
        expect: Expect::default(),
        trust: pqtls_core::backend::ClientTrust::default().describe(),
        timelines: false,
        stalls: None,
    }
}

/// Runs a load generator (`run`, given where to report its progress) in the lab's client
/// namespace, reporting its progress as the measurement's: transfers done of those asked, or
/// time done of warm-up + duration.
fn in_client<T: Send>(
    lab: &Lab,
    settings: &Settings,
    progress: &mut dyn FnMut(&Progress),
    run: impl FnOnce(&mut dyn FnMut(&LoadProgress)) -> T + Send,
) -> Result<T> {
    let total_ms = settings.load.warmup_ms + settings.load.duration_ms;
    let target_requests = settings.load.requests;
    let mut report = |p: &LoadProgress| {
        let (done, target) = match target_requests {
            Some(n) if p.phase != "warm-up" => (p.requests, n),
            _ => (p.elapsed.as_millis() as u64, total_ms),
        };
        progress(&Progress { phase: p.phase, done, target, worst: None, notes: Vec::new() });
    };
    crate::shared::in_client_namespace(lab, &mut report, run)
}

/// The RTT a transfer scenario asks for, or an error when it names no link or asks for an
/// open loop.
fn asked_rtt_ns(scenario: &Scenario) -> Result<u64> {
    scenario.validate_for(Kind::Transfer)?;
    let Some(rtt_ns) = scenario.network.rtt_ns else {
        return Err(Error::Invalid(
            "a transfer needs an emulated link: give its RTT, e.g. rtt = \"50ms\" (--rtt 50ms)".into(),
        ));
    };
    if scenario.transport == TransportKind::Socketpair {
        return Err(Error::Invalid(
            "transport = socketpair: a transfer crosses the lab's link over TCP (the default, or transport = tcp) or \
             QUIC (transport = quic)"
                .into(),
        ));
    }
    if scenario.transport != TransportKind::Quic && scenario.load.quic_initial_mtu.is_some() {
        return Err(Error::Invalid(format!(
            "quic_initial_mtu = {} applies to QUIC: give transport = quic, or leave it at its default for TCP",
            scenario.value("quic_initial_mtu")
        )));
    }
    if scenario.transport != TransportKind::Quic && scenario.load.quic_token {
        return Err(Error::Invalid(
            "quic_token = true applies to QUIC (address-validation tokens): give transport = quic, or leave it \
             false for TCP"
                .into(),
        ));
    }
    if scenario.load.rate_per_s.is_some() {
        return Err(Error::Invalid(format!(
            "rate = {}: transfers run one at a time, each on a new connection (closed loop); leave rate at max",
            scenario.value("rate")
        )));
    }
    Ok(rtt_ns)
}

/// The transfer result: the load result with TTFB/TTLB percentiles, the verified link, the
/// emulator, and the round trips measured against the flight model's prediction.
fn transfer_result(
    load: LoadResult,
    link: LinkReport,
    emulator: EmulatorReport,
    opts: &LoadOptions,
    scenario: &Scenario,
    rtt_ns: u64,
) -> TransferResult {
    let size = scenario.load.response_bytes;
    let bytes = load.bytes.clone().unwrap_or_default();
    let request_bytes = crate::http::get(&opts.target.path, &opts.target.host, false).len() as u64;
    let response_bytes = crate::http::head(200, size, false, "application/octet-stream").len() as u64 + size;
    let (client_hello_bytes, server_flight_bytes, client_flight_bytes, response_tls_bytes) =
        FlightModel::flights(&bytes, request_bytes, response_bytes);
    let setup = &link.setup;
    let model = FlightModel {
        mss_bytes: LAB_MSS_BYTES,
        client_initcwnd: setup.client_initcwnd.unwrap_or(KERNEL_INITCWND),
        server_initcwnd: setup.server_initcwnd.unwrap_or(KERNEL_INITCWND),
        client_hello_bytes,
        server_flight_bytes,
        client_flight_bytes,
        response_bytes: response_tls_bytes,
        rtt_ns: if link.rtt.median_ns > 0 { link.rtt.median_ns } else { rtt_ns },
        bits_per_s: scenario.network.bits_per_s,
        hello_retry: bytes.messages.contains_key("HelloRetryRequest"),
        ..FlightModel::default()
    }
    .completed(&load, &link);
    let ttlb = Percentiles::of(&load.latency);
    let ttfb = Percentiles::of(&load.ttfb);
    let mut result = TransferResult { load, ttfb, ttlb, link, emulator, model, rounds: Vec::new(), quic: None };
    result.rounds = result.rounds_now();
    result
}

/// The QUIC model's inputs: the measured handshake's message sizes, the HTTP/3 request and
/// response, the windows and the datagram size, the verified link, the handshake CPU.
fn quic_model(
    load: &pqtls_core::load::LoadResult,
    link: &pqtls_core::link::LinkReport,
    opts: &LoadOptions,
    q: &QuicClient,
    scenario: &Scenario,
    rtt_ns: u64,
    server: Tuning,
) -> QuicFlightModel {
    let (client_hello_bytes, server_flight_bytes, client_flight_bytes, ticket_bytes) =
        QuicFlightModel::flights(&load.bytes.clone().unwrap_or_default());
    let body = scenario.load.response_bytes;
    QuicFlightModel {
        datagram_bytes: q.tuning.datagram_bytes(),
        client_initial_window_bytes: q.tuning.window_bytes(),
        server_initial_window_bytes: server.window_bytes(),
        client_hello_bytes,
        server_flight_bytes,
        client_flight_bytes,
        request_bytes: H3_REQUEST_OVERHEAD_BYTES + (opts.target.path.len() + opts.target.host.len()) as u64,
        response_bytes: ticket_bytes
            + H3_RESPONSE_OVERHEAD_BYTES
            + body
            + body.div_ceil(H3_DATA_FRAME_BYTES) * H3_DATA_FRAME_HEADER_BYTES,
        rtt_ns: if link.rtt.median_ns > 0 { link.rtt.median_ns } else { rtt_ns },
        bits_per_s: scenario.network.bits_per_s,
        client_cpu_ns: load.client_handshake_cpu_ns_mean.round() as u64,
        server_cpu_ns: load.server.as_ref().map_or(0, |s| s.handshake_cpu_ns_mean.round() as u64),
        mtu_probes_bytes: quinn_mtu_probes(server.datagram_bytes()),
        // Every connection came with a valid token (checked against the server's count).
        address_validated: server.address_tokens,
        hello_retry: load.bytes.as_ref().is_some_and(|b| b.messages.contains_key("HelloRetryRequest")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_auth_must_be_as_asked() {
        let mut m = indexmap::IndexMap::new();
        m.insert("ClientHello".to_string(), 300u64);
        assert!(check_client_auth(false, &m).is_ok());
        let e = check_client_auth(true, &m).unwrap_err().to_string();
        assert!(e.contains("mutual TLS was asked") && e.contains("CertificateRequest false"), "{e}");
        m.insert("CertificateRequest".into(), 40);
        m.insert("ClientCertificate".into(), 5000);
        m.insert("ClientCertificateVerify".into(), 3300);
        assert!(check_client_auth(true, &m).is_ok());
        assert!(check_client_auth(false, &m).is_err());
    }
}
