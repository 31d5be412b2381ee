//! The transfer measurement (`kind = "transfer"`, SPEC C6): TLS or mutual-TLS transfers over
//! an emulated link of the network lab (crates/pqtls-netlab). Per scenario: `pqtls serve` on
//! the scenario's stack in the lab's server namespace, the load generator ([`crate::load`]) in
//! its client namespace, one connection at a time and a new TLS connection per transfer
//! (`Connection: close`), the response of `response_size` bytes. The record holds TTFB and
//! TTLB percentiles, the layers, the message sizes, the negotiated parameters (checked against
//! the scenario), the verified link, the delay emulator's lateness during the transfers, and
//! the round trips of each layer measured next to what slow start predicts
//! ([`FlightModel::predict`]).
//!
//! The lab is kept across consecutive scenarios on the same link and refused links are
//! reported ([`crate::links`], shared with the load measurement over the lab).

use crate::carrier::Client;
use crate::links::{netlab_error, Links};
pub use crate::links::{plan_links, Refusals};
use crate::load::{self, Expect, LoadOptions, LoadProgress, LoadRun, Target};
use crate::serve::{ServeOptions, Server};
use pqtls_core::backend::{EndpointOptions, KeyLog, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::load::{LoadResult, ServerSide, Terminator};
use pqtls_core::record::{Measured, Outcome, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::transfer::{FlightModel, Percentiles, TransferResult, KERNEL_INITCWND, LAB_MSS_BYTES};
use pqtls_core::transport::TransportKind;
use pqtls_core::{units, Error, Result};
use pqtls_lab::measurement::{Measurement, Progress};
use pqtls_lab::Stacks;
use pqtls_netlab::{EmulatorReport, Lab, LabOptions, LinkReport, Side, VerifyOptions};
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

/// What the scenario asks the handshake to negotiate.
fn expect(scenario: &Scenario) -> Expect {
    let h = &scenario.handshake;
    Expect {
        group: h.groups.first().map(|g| g.name.to_string()),
        cipher: Some(h.cipher.name.to_string()),
        sigalg: None,
    }
}

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
        if scenario.transport == TransportKind::Quic {
            return self.measure_quic(scenario, settings, interrupt, progress, rtt_ns);
        }
        let (done, link) = self.links.with_lab(&scenario.network, interrupt, progress, |lab, link, progress| {
            let (prepared, _files) = self.stacks.prepare(scenario)?;
            Ok((self.transfers(lab, scenario, settings, prepared, interrupt, progress)?, link))
        })?;
        let backend = self.stacks.backend(scenario.handshake.stack)?;
        let run = &done.run;
        completed(run, settings, "")?;
        let messages = match &run.messages {
            Some(Ok(m)) => m.clone(),
            Some(Err(why)) => {
                return Err(Error::Other(format!("the handshake's message sizes were not measured: {why}")))
            }
            None => return Err(Error::Other("the handshake's message sizes were not measured".into())),
        };
        check_client_auth(scenario.handshake.client_chain.is_some(), &messages)?;
        let terminator = Terminator {
            name: "pqtls".into(),
            version: format!(
                "pqtls serve {} ({}) in the lab's server namespace",
                backend.library_version(),
                scenario.handshake.stack
            ),
            backend: None,
        };
        let load = crate::shared::load_result(&done.opts, run, terminator, Some(done.server_side), None);
        let result = transfer_result(load, link, done.emulator, &done.opts, scenario, rtt_ns);
        let record = Record::measured(scenario, settings, &self.stacks.env, Outcome::Transfer(Box::new(result)));
        Ok(Measured { record, samples: Vec::new() })
    }
}

/// What one scenario's transfers in the lab gave: the load generator's options and run, the
/// server's counters over it, the delay emulator's report.
struct Transfers {
    opts: LoadOptions,
    run: LoadRun,
    server_side: ServerSide,
    emulator: EmulatorReport,
}

impl Transfer<'_> {
    /// Starts `pqtls serve` in the lab's server namespace and runs the transfers from the
    /// client's, one at a time; stops the server and checks the emulator kept up.
    fn transfers(
        &self,
        lab: &Lab,
        scenario: &Scenario,
        settings: &Settings,
        prepared: Arc<dyn Prepared>,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Transfers> {
        let endpoint =
            EndpointOptions { traced: false, key_log: self.setup.key_log.clone(), ..EndpointOptions::default() };
        let serve = ServeOptions {
            listen: "0.0.0.0:0".parse().expect("a valid address"),
            threads: 1,
            tls: Some(prepared.clone()),
            endpoint: endpoint.clone(),
            keep_alive: false,
        };
        // The listening socket belongs to the namespace of the thread that makes it.
        let server = lab.run_in(Side::Server, move || Server::start(serve)).map_err(netlab_error)??;
        let path = format!("/{}", units::format_bytes(scenario.load.response_bytes).replace(' ', ""));
        let addr = SocketAddr::from((lab.server_addr(), server.addr().port()));
        let opts = LoadOptions {
            client: Client::Tcp { tls: Some(prepared), endpoint },
            expect: expect(scenario),
            stalls: self.links.stall_screen(lab, Some(crate::links::most_again(settings.load.requests))),
            ..options(
                settings,
                Target::parse(&format!("https://{addr}{path}"))?,
                Client::Tcp { tls: None, endpoint: EndpointOptions::default() },
            )
        };
        let before = server.stats();
        lab.reset_emulator();
        let run = in_client(lab, settings, progress, |report| load::run(&opts, interrupt, report))?;
        let emulator = lab.emulator_report();
        let emulator_ok = lab.check_emulator();
        let after = server.stats();
        let server_stopped = server.stop();
        let run = run?;
        emulator_ok.map_err(netlab_error)?;
        server_stopped?;
        Ok(Transfers { opts, run, server_side: crate::shared::server_side(&before, &after, true), emulator })
    }
}

/// Refuses a run that was interrupted (nothing of the scenario is kept; it is measured again on
/// resume) or in which no transfer completed (`over`: the transport, for the message).
pub(crate) fn completed(run: &LoadRun, settings: &Settings, over: &str) -> Result<()> {
    if run.stopped == "interrupted" {
        return Err(Error::Other("interrupted".into()));
    }
    if run.requests == 0 {
        return Err(Error::Other(format!(
            "no transfer{over} completed in {} ({} errors: {})",
            units::format_duration(settings.load.duration_ms * 1_000_000),
            run.errors.iter().map(|e| e.count).sum::<u64>(),
            run.errors.iter().map(|e| format!("{} {}: {}", e.count, e.kind, e.last)).collect::<Vec<_>>().join("; ")
        )));
    }
    Ok(())
}

/// The load generator's options of a scenario's transfers to `target`: one connection at a
/// time, a new one per transfer, no TLS (the caller sets it), the run's timing.
pub(crate) fn options(settings: &Settings, target: Target, client: Client) -> LoadOptions {
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
pub(crate) fn in_client<T: Send>(
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
pub(crate) fn transfer_result(
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
        ..FlightModel::default()
    }
    .completed(&load, &link);
    let ttlb = Percentiles::of(&load.latency);
    let ttfb = Percentiles::of(&load.ttfb);
    let mut result = TransferResult { load, ttfb, ttlb, link, emulator, model, rounds: Vec::new(), quic: None };
    result.rounds = result.rounds_now();
    result
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
