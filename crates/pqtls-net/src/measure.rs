//! The load measurement (`kind = "load"`): one scenario = one load run against a server —
//! `pqtls serve` started in this process for the scenario (terminator `pqtls`), a third-party
//! terminator in front of `pqtls serve --plain` (`nginx`, `haproxy`: started through
//! [`Terminators`]), or a URL the user gave. Run by the lab's one runner, stored as records of
//! kind `load` like every other measurement.

use crate::carrier::quic::{QuicClient, QuicServing};
use crate::carrier::tcp::Tcp;
use crate::carrier::{Carrier, Client, OwnServer, ServeWith, Wire};
use crate::links::{netlab_error, Links};
use crate::load::{self, Expect, LoadOptions, LoadProgress, LoadRun, Target};
use crate::serve::StatsSnapshot;
use crate::shared::{
    fetch_stats, in_client_namespace, load_result, server_side, terminator_processes, ProcessReading,
    RunningTerminator, Terminators,
};
use pqtls_capture::Capture;
use pqtls_core::backend::{Anchors, ClientTrust, EndpointOptions, KeyLog, PkiFiles, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::load::{LoadResult, LoadShare, ServerSide, Terminator};
use pqtls_core::record::{Measured, Outcome, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::transport::TransportKind;
use pqtls_core::{units, Error, Result};
use pqtls_lab::keylog::KeyLogFile;
use pqtls_lab::measurement::{Measurement, Progress};
use pqtls_lab::Stacks;
use pqtls_netlab::{Lab, LinkReport, Side};
use pqtls_quic::tuning::Tuning;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The load measurement: the stacks, how it is set up, and the network lab's links (for
/// scenarios with network factors).
pub struct Load<'a> {
    pub stacks: Stacks<'a>,
    pub setup: LoadSetup<'a>,
    pub links: Links,
}

/// How the load measurement is set up: which server, what it keeps besides the record.
#[derive(Clone)]
pub struct LoadSetup<'a> {
    /// A server the user gave (`pqtls load URL`); `None`: start one per scenario.
    pub url: Option<Target>,
    /// For terminators other than pqtls; `None`: such scenarios are refused by name.
    pub terminators: Option<&'a dyn Terminators>,
    /// Worker threads of the `pqtls serve` this measurement starts.
    pub server_workers: usize,
    /// A response body over this is an error of kind `body` (when the URL's path names no size;
    /// [`load::DEFAULT_MAX_BODY_BYTES`] unless `pqtls load --max-body`).
    pub max_body_bytes: u64,
    /// Per-step traces (costs clock reads per event; off: only call boundaries are timed).
    pub traced: bool,
    /// Receives the client's TLS secrets (and the server's, when pqtls serves).
    pub key_log: Option<Arc<dyn KeyLog>>,
    /// This process does 1/N of the rate (or of the connections) of a sharded load.
    pub shard: Option<LoadShare>,
    /// Receives every measured transaction's timeline, with its scenario's id (layers,
    /// captures); `None`: not kept.
    pub timelines: Option<&'a std::sync::Mutex<Vec<(String, pqtls_core::timeline::Timeline)>>>,
    /// Capture each scenario's packets and cross-check them with the client's timelines
    /// (`pqtls load --capture`; the `layers` measurement); `None`: no capture.
    pub capture: Option<CaptureTo<'a>>,
    /// What the load client trusts and the name it checks (default: the PKI's root, as
    /// `localhost`; `pqtls load --ca`, `--servername`). The `verify` factor still applies.
    pub trust: ClientTrust,
}

impl Default for LoadSetup<'_> {
    /// A `pqtls serve` of one worker started per scenario; nothing kept but the record.
    fn default() -> Self {
        LoadSetup {
            url: None,
            terminators: None,
            server_workers: 1,
            max_body_bytes: load::DEFAULT_MAX_BODY_BYTES,
            traced: false,
            key_log: None,
            shard: None,
            timelines: None,
            capture: None,
            trust: ClientTrust::default(),
        }
    }
}

/// Where and how the `layers` measurement (a load run with a capture) captures.
#[derive(Clone)]
pub struct CaptureTo<'a> {
    /// The capture file and the key log of a scenario (the key log gets the client's secrets
    /// of every connection, and the server's when pqtls serves in this process).
    pub files: &'a (dyn Fn(&Scenario) -> (PathBuf, PathBuf) + Sync),
    /// The interface the transactions use (`lo` on loopback), and its network namespace.
    pub interface: String,
    pub netns: Option<String>,
    /// Append to an existing key log (`pqtls load --keylog FILE`); false: each scenario's
    /// key log starts empty (`pqtls run`: a redone scenario replaces its files).
    pub append_keylog: bool,
}

/// A scenario id as a file name: `|`, `:`, `/` and the like become `_` (the capture files of the
/// `layers` measurement are named by record id).
pub fn file_name(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || "-.=,+".contains(c) { c } else { '_' }).collect()
}

/// Two key logs at once.
struct BothLogs(Arc<dyn KeyLog>, Arc<dyn KeyLog>);

impl KeyLog for BothLogs {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0.log(label, client_random, secret);
        self.1.log(label, client_random, secret);
    }
}

impl Load<'_> {
    /// The load client's endpoints: their chain verification timed (two clock reads per
    /// handshake) for the verification CPU per connection.
    fn endpoint(&self, key_log: Option<Arc<dyn KeyLog>>) -> EndpointOptions {
        EndpointOptions { traced: self.setup.traced, key_log, verification_timed: true, ..EndpointOptions::default() }
    }
}

/// What serves one scenario while it is measured (stopped when dropped).
struct Serving {
    target: Target,
    terminator: Terminator,
    /// pqtls' own server (the TLS terminator, or the plain backend behind a third party).
    server: Option<Box<dyn OwnServer>>,
    /// The server's counters count TLS handshakes (it terminates TLS).
    server_terminates: bool,
    _third_party: Option<Box<dyn RunningTerminator>>,
}

impl Measurement for Load<'_> {
    fn kind(&self) -> Kind {
        if self.setup.capture.is_some() {
            Kind::Layers
        } else {
            Kind::Load
        }
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
        scenario.validate_for(self.kind())?;
        if scenario.network.emulated() {
            return self.measure_in_lab(scenario, settings, interrupt, progress);
        }
        self.measure_on(scenario, settings, interrupt, progress, None)
    }
}

/// The network lab a load runs through: the lab (the caller's thread is in its server
/// namespace) and its link as verified.
type InLab<'l> = Option<(&'l Lab, &'l LinkReport)>;

impl Load<'_> {
    /// A scenario with network factors: the lab of its link (built and verified once per link,
    /// [`Links`]), the terminator started in the lab's server namespace (pqtls serve, or nginx
    /// and HAProxy with pqtls serve --plain behind them), the load generator in its client
    /// namespace; the record is the load record with the link and the emulator's lateness.
    fn measure_in_lab(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Measured> {
        if let Some(t) = &self.setup.url {
            return Err(Error::Invalid(format!(
                "network factors with a URL ({}): the network lab carries the load to a server it starts in its \
                 server namespace; leave out the URL, or the network factors (rtt, bandwidth, loss, jitter, initcwnd)",
                t.url()
            )));
        }
        if wire(scenario) == Wire::Quic {
            return Err(Error::Unsupported(
                "a load over QUIC through the network lab is not built yet (the transfer measurement crosses it over \
                 QUIC): use transport = tcp with network factors, or QUIC on loopback"
                    .into(),
            ));
        }
        if scenario.network.rtt_ns.is_none() {
            return Err(Error::Invalid(
                "a load through the network lab needs the link's RTT, e.g. rtt = \"10ms\" (--rtt 10ms)".into(),
            ));
        }
        self.links.with_lab(&scenario.network, interrupt, progress, |lab, link, progress| {
            lab.reset_emulator();
            // The measurement runs on a thread in the server namespace (the terminator it
            // starts lives as long as that thread); its progress comes back through `latest`.
            let latest: Mutex<Option<Progress>> = Mutex::new(None);
            let forward = |p: &Progress| *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.clone());
            lab.within(
                Side::Server,
                || self.measure_on(scenario, settings, interrupt, &mut { forward }, Some((lab, &link))),
                || {
                    if let Some(p) = latest.lock().unwrap_or_else(|e| e.into_inner()).take() {
                        progress(&p);
                    }
                },
            )
            .map_err(netlab_error)?
        })
    }

    /// A scenario on its wire (HTTPS/1.1 or plain HTTP over TCP, HTTP/3 over QUIC): its
    /// server started (or the user's URL), the load run, the record. `lab`: the server in the
    /// lab's server namespace (the calling thread's), the load generator in its client namespace.
    fn measure_on(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
        lab: InLab,
    ) -> Result<Measured> {
        let spec = &scenario.load;
        let tls = spec.tls;
        let wire = wire(scenario);
        if wire == Wire::Quic {
            self.quic_refusals(scenario, settings)?;
        }
        if settings.memory {
            self.count_heap(scenario)?;
        }
        let KeyLogs { capture: capture_files, capture_log, key_log } = self.key_logs(scenario)?;
        let contexts = self.contexts(scenario, wire, key_log.clone())?;
        if wire == Wire::Tcp {
            let (threads, connections, _) = self.shape(scenario);
            // Before any server starts: the connections' file descriptors (both sides, when the
            // server is in this process) fit, or the scenario is refused saying what would.
            load::ensure_fds(threads, connections, if self.setup.url.is_some() { 1 } else { 2 })?;
        }
        let listen = lab.map_or(Ipv4Addr::LOCALHOST, |(lab, _)| lab.server_addr());
        let serving = self.serve(scenario, &contexts, key_log.clone(), listen)?;
        let serving_port = serving.target.addr.port();
        let before = self.stats(&serving, &contexts);
        let procs_before = terminator_tree(&serving);
        let opts = LoadOptions {
            expect: if tls { expect(scenario, &self.setup.trust) } else { Expect::default() },
            timelines: self.setup.timelines.is_some() || capture_files.is_some(),
            // Through the lab: transactions that went through host stalls are counted (a load's
            // rate would be biased by measuring them again).
            stalls: lab.and_then(|(lab, _)| self.links.stall_screen(lab, None)),
            ..self.options(scenario, settings, serving.target.clone(), contexts.client.clone())
        };
        let mut report = reporter(settings, progress);
        // tcpdump listens before the first connection and stops after the last one closed.
        let capture = match &capture_files {
            Some((to, (pcap, _))) => {
                Some(Capture::start(&to.interface, to.netns.as_deref(), &format!("tcp port {serving_port}"), pcap)?)
            }
            None => None,
        };
        let carrier = wire.carrier();
        let run = match lab {
            None => carrier.run(&opts, interrupt, &mut report),
            Some((lab, _)) => in_client_namespace(lab, &mut report, |r| carrier.run(&opts, interrupt, r))?,
        };
        let capture_stats = capture.map(Capture::stop).transpose();
        // A server that did not answer `/stats` before is not asked again (2 s more of a
        // hostile server's trickle for nothing).
        let after = match &before {
            Some(_) => self.stats(&serving, &contexts),
            None => None,
        };
        let server = server_over(before, after, serving.server.is_none(), tls, serving.server_terminates);
        let procs_after = terminator_tree(&serving);
        // The terminator first, then the backend behind it.
        let Serving { terminator, server: own, _third_party, .. } = serving;
        drop(_third_party);
        drop(own);
        let mut run = run?;
        let capture_stats = capture_stats?;
        if let (Some(tally), true) = (&contexts.verifications, spec.verify) {
            // The verifier counts every connection's, warm-up included: their mean, per
            // measured handshake.
            let (verify_cpu_ns, verified) = tally.read();
            if verified > 0 {
                run.verification_cpu_ns = Some(verify_cpu_ns * run.handshakes / verified);
            }
        }
        let mut result = load_result(&opts, &run, terminator, server, self.setup.shard);
        if let Some(bytes) = result.bytes.as_ref().filter(|_| tls) {
            scenario.handshake.check_client_hello_messages(&bytes.messages)?;
        }
        // The client's trust is recorded over TCP (the HTTP/3 records never had it).
        if tls && wire == Wire::Tcp {
            result.trust = Some(opts.trust.clone());
        }
        if let Some((lab, link)) = lab {
            result.link = Some(Box::new(link.clone()));
            result.emulator = Some(lab.emulator_report());
            lab.check_emulator().map_err(netlab_error)?;
        }
        if !tls || !spec.verify {
            result.client_verify_cpu_ns_mean = None;
        }
        result.terminator_processes = terminator_processes(procs_before, procs_after, &run, tls && !spec.keep_alive);
        if let (Some((to, (pcap, keys))), Some(stats)) = (&capture_files, &capture_stats) {
            if let Some(e) = capture_log.as_ref().and_then(|l| l.error()) {
                return Err(Error::Other(e));
            }
            result.capture = Some(Box::new(cross_check(to, pcap, keys, stats, &run, &opts, serving_port)?));
        }
        if wire == Wire::Quic {
            result.notes.push(
                "HTTP/3 over QUIC: the tcp and tcp_to_tls layers are 0 (no TCP), tls is the QUIC handshake; handshake \
                 bytes are the TLS messages (CRYPTO data), without QUIC headers, AEAD tags or padding"
                    .into(),
            );
        }
        self.record(scenario, settings, &run, &opts, result)
    }
}

impl Load<'_> {
    /// Threads, connections per thread and rate of a scenario, with this process's share of a
    /// sharded load.
    fn shape(&self, scenario: &Scenario) -> (usize, usize, Option<f64>) {
        let spec = &scenario.load;
        let (threads, mut connections, mut rate) = (spec.threads as usize, spec.connections as usize, spec.rate_per_s);
        if let Some(s) = self.setup.shard {
            match rate.as_mut() {
                Some(r) => *r /= s.count as f64,
                None => connections = (connections / s.count as usize).max(1),
            }
        }
        (threads, connections, rate)
    }

    /// The load generator's options for a scenario against `target` with `client`: its shape
    /// and the settings' timing and the client's trust; no expectations or timelines (the
    /// caller's).
    fn options(&self, scenario: &Scenario, settings: &Settings, target: Target, client: Client) -> LoadOptions {
        let (threads, connections, rate) = self.shape(scenario);
        LoadOptions {
            target,
            client,
            threads,
            connections,
            rate_per_s: rate,
            keep_alive: scenario.load.keep_alive,
            warmup: Duration::from_millis(settings.load.warmup_ms),
            duration: Duration::from_millis(settings.load.duration_ms),
            requests: if rate.is_none() { settings.load.requests } else { None },
            timeout: Duration::from_millis(settings.load.timeout_ms),
            max_body_bytes: self.setup.max_body_bytes,
            expect: Expect::default(),
            trust: ClientTrust { verify: scenario.load.verify, ..self.setup.trust.clone() }.describe(),
            timelines: false,
            stalls: None,
        }
    }

    /// What the load measurement does not do over QUIC, refused by name before anything starts.
    fn quic_refusals(&self, scenario: &Scenario, settings: &Settings) -> Result<()> {
        pqtls_quic::h3::require_rustls(scenario.handshake.stack)?;
        if !scenario.load.tls {
            return Err(Error::Invalid(
                "http = 3 with tls = false: QUIC always carries TLS 1.3; leave tls at true (or http at 1.1 for the \
                 plain-HTTP baseline)"
                    .into(),
            ));
        }
        if settings.memory {
            return Err(Error::Unsupported(
                "--memory over HTTP/3: the QUIC server's heap is not counted yet; leave out --memory with --quic"
                    .into(),
            ));
        }
        if self.setup.capture.is_some() {
            return Err(Error::Unsupported(
                "a capture of HTTP/3 connections is not analysed yet (the capture analysis reads TCP): leave out \
                 --capture with --quic (--keylog alone works: Wireshark decrypts QUIC with it)"
                    .into(),
            ));
        }
        if let Some(t) = self.setup.url.as_ref().filter(|t| !t.tls) {
            return Err(Error::Invalid(format!("{}: HTTP/3 needs an https:// URL (QUIC always carries TLS)", t.url())));
        }
        Ok(())
    }

    /// The scenario's contexts on its wire: over TCP the stack's prepared contexts (none for
    /// plain HTTP), the client trusting what the setup says; over QUIC the rustls
    /// configurations (the client's key log has both sides' secrets) and the client's
    /// verifications counted.
    fn contexts(&self, scenario: &Scenario, wire: Wire, key_log: Option<Arc<dyn KeyLog>>) -> Result<Contexts> {
        match wire {
            Wire::Tcp => {
                let prepared = if scenario.load.tls {
                    Some(self.stacks.prepare_trusting(scenario, &self.setup.trust)?)
                } else {
                    None
                };
                let client =
                    Client::Tcp { tls: prepared.as_ref().map(|p| p.0.clone()), endpoint: self.endpoint(key_log) };
                Ok(Contexts {
                    server: prepared.clone().map(|p| p.0),
                    files: prepared.map(|p| p.1),
                    client,
                    verifications: None,
                })
            }
            Wire::Quic => {
                let cfg = &scenario.handshake;
                let (prepared, files) = self.stacks.prepare_trusting(scenario, &self.setup.trust)?;
                let h3 = pqtls_quic::h3::configs(cfg, prepared.as_ref(), key_log)?;
                let client = Client::Quic(QuicClient::new(cfg, &files, h3.client, Tuning::default()));
                Ok(Contexts {
                    server: Some(prepared),
                    files: Some(files),
                    client,
                    verifications: Some(h3.verifications),
                })
            }
        }
    }

    /// A run's end, over TCP or QUIC: its timelines to the sink, and the record — or, when no
    /// request completed, the failure (a server slower than one response per measured duration
    /// is measured with a longer one), with the errors by kind.
    fn record(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        run: &LoadRun,
        opts: &LoadOptions,
        result: LoadResult,
    ) -> Result<Measured> {
        if let Some(sink) = self.setup.timelines {
            let id = scenario.id();
            sink.lock().unwrap_or_else(|p| p.into_inner()).extend(run.timelines.iter().map(|t| (id.clone(), *t)));
        }
        if result.requests == 0 {
            if run.stopped == "interrupted" {
                return Err(Error::Other("interrupted before any request completed".into()));
            }
            return Err(Error::Other(nothing_measured(run, opts)));
        }
        let record = Record::measured(scenario, settings, &self.stacks.env, Outcome::Load(Box::new(result)));
        Ok(Measured { record, samples: Vec::new() })
    }
}

/// A scenario's contexts on its wire ([`Load::contexts`]).
struct Contexts {
    /// TCP: the server's prepared contexts (`None`: plain HTTP, or QUIC).
    server: Option<Arc<dyn Prepared>>,
    /// The scenario's PKI files (a third-party terminator's chain; the QUIC server's).
    files: Option<PkiFiles>,
    client: Client,
    /// QUIC: the client's chain verifications, counted by its verifier.
    verifications: Option<Arc<pqtls_quic::h3::VerifyTally>>,
}

/// The wire of a load scenario: QUIC for `transport = "quic"`, else TCP (the default).
fn wire(scenario: &Scenario) -> Wire {
    if scenario.transport == TransportKind::Quic {
        Wire::Quic
    } else {
        Wire::Tcp
    }
}

/// A scenario's key logs: with a capture, its files (pcap, key log), the scenario's own key
/// log and what the endpoints log to (the scenario's, and the user's too when both are given);
/// without, the user's.
struct KeyLogs<'c> {
    capture: Option<(&'c CaptureTo<'c>, (PathBuf, PathBuf))>,
    capture_log: Option<Arc<KeyLogFile>>,
    key_log: Option<Arc<dyn KeyLog>>,
}

/// The third-party terminator's processes now, when there is one.
fn terminator_tree(serving: &Serving) -> Option<ProcessReading> {
    serving._third_party.as_ref().and_then(|t| t.processes())
}

/// The server's counters over the run, from snapshots before and after it. Those fetched
/// through `GET /stats` (a server not in this process): the second fetch's own connection,
/// handshake and request are in the second snapshot, not in the load, and are taken off.
fn server_over(
    before: Option<StatsSnapshot>,
    after: Option<StatsSnapshot>,
    fetched: bool,
    tls: bool,
    terminates: bool,
) -> Option<ServerSide> {
    let (b, mut a) = (before?, after?);
    if fetched {
        a.requests = a.requests.saturating_sub(1);
        if tls {
            let n = a.handshakes;
            let per = |total: u64| total.checked_div(n).unwrap_or(0);
            let phases = a.phase_cpu_ns;
            a.handshake_cpu_ns_total -= per(a.handshake_cpu_ns_total);
            a.phase_cpu_ns.first_flight_cpu_ns -= per(phases.first_flight_cpu_ns);
            a.phase_cpu_ns.completion_cpu_ns -= per(phases.completion_cpu_ns);
            a.handshakes = a.handshakes.saturating_sub(1);
        }
    }
    Some(server_side(&b, &a, terminates))
}

/// The capture of a run, opened with its key log and matched with the client's timelines over
/// the measured window.
fn cross_check(
    to: &CaptureTo,
    pcap: &PathBuf,
    keys: &PathBuf,
    stats: &pqtls_capture::CaptureStats,
    run: &LoadRun,
    opts: &LoadOptions,
    port: u16,
) -> Result<pqtls_core::crosscheck::CaptureCheck> {
    let a = pqtls_capture::analyse(pcap, Some(keys))
        .map_err(|e| Error::Other(format!("analysing the capture {}: {e}", pcap.display())))?;
    let from = run.origin_unix_ns + opts.warmup.as_nanos() as u64;
    let window = (from, from + run.duration_ns);
    let mut check = pqtls_capture::crosscheck::check(&a, Some(stats), &run.timelines, run.origin_unix_ns, window);
    // Absolute: the record is read from elsewhere (`pqtls report`).
    let full = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()).display().to_string();
    check.pcap = full(pcap);
    check.keylog = full(keys);
    check.interface = to.interface.clone();
    check.filter = format!("tcp port {port}");
    Ok(check)
}

impl Load<'_> {
    /// The scenario's [`KeyLogs`] (a capture's key log starts empty unless appended to).
    fn key_logs(&self, scenario: &Scenario) -> Result<KeyLogs<'_>> {
        let Some(to) = self.setup.capture.as_ref() else {
            return Ok(KeyLogs { capture: None, capture_log: None, key_log: self.setup.key_log.clone() });
        };
        let (pcap, keys) = (to.files)(scenario);
        if !to.append_keylog {
            match std::fs::remove_file(&keys) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing the old key log {}", keys.display()), e))
                }
                _ => {}
            }
        }
        let file = Arc::new(KeyLogFile::open(&keys)?);
        let key_log: Arc<dyn KeyLog> = match &self.setup.key_log {
            Some(user) => Arc::new(BothLogs(user.clone(), file.clone())),
            None => file.clone(),
        };
        Ok(KeyLogs { capture: Some((to, (pcap, keys))), capture_log: Some(file), key_log: Some(key_log) })
    }

    /// `--memory`: allocations are counted from now on (left on for the process's other
    /// scenarios), so pqtls serve's workers report their heap per connection. Refused where
    /// the counts would be wrong (the stack's hooks or the counting allocator missing) or
    /// there is no pqtls serve to count (a third-party terminator's memory is its processes'
    /// RSS/PSS, always in the record; an external URL's is not seen).
    fn count_heap(&self, scenario: &Scenario) -> Result<()> {
        if self.setup.url.is_some() || scenario.load.terminator != "pqtls" {
            return Err(Error::Invalid(format!(
                "--memory counts pqtls serve's heap, and {} is served by {}: drop --memory (the record has \
                 nginx's and HAProxy's RSS/PSS anyway), or load the URL of a `pqtls serve --memory` without it (its /stats carries its heap)",
                scenario.label(),
                self.setup.url.as_ref().map_or(scenario.load.terminator.clone(), |t| t.url())
            )));
        }
        if scenario.load.tls {
            self.stacks.backend(scenario.handshake.stack)?.counted_allocations()?;
        }
        let was = pqtls_core::memory::counting();
        pqtls_core::memory::start_counting();
        if !pqtls_core::memory::rust_allocations_counted() {
            if !was {
                pqtls_core::memory::stop_counting();
            }
            return Err(Error::Unsupported(
                "Rust allocations are not being counted: this program's global allocator is not \
                 pqtls_core::memory::CountingAllocator (the pqtls binary's is)"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Starts what serves the scenario (or points at the user's server).
    fn serve(
        &self,
        scenario: &Scenario,
        contexts: &Contexts,
        key_log: Option<Arc<dyn KeyLog>>,
        listen: Ipv4Addr,
    ) -> Result<Serving> {
        let spec = &scenario.load;
        let wire = wire(scenario);
        let path = format!("/{}", units::format_bytes(spec.response_bytes).replace(' ', ""));
        if let Some(t) = &self.setup.url {
            if t.tls != spec.tls {
                return Err(Error::Invalid(format!(
                    "{} is {}, but the scenario has tls = {}",
                    t.url(),
                    if t.tls { "https" } else { "http" },
                    spec.tls
                )));
            }
            return Ok(Serving {
                target: t.clone(),
                terminator: Terminator { name: "external".into(), version: String::new(), backend: None },
                server: None,
                server_terminates: true,
                _third_party: None,
            });
        }
        let own = |carrier: &dyn Carrier, tls: Option<Arc<dyn Prepared>>, quic: Option<QuicServing>| {
            carrier.serve(ServeWith {
                listen: SocketAddr::from((listen, 0)),
                workers: self.setup.server_workers,
                tls,
                endpoint: EndpointOptions { traced: false, key_log: key_log.clone(), ..EndpointOptions::default() },
                keep_alive: true,
                quic,
            })
        };
        let scheme = if spec.tls { "https" } else { "http" };
        match spec.terminator.as_str() {
            "pqtls" => {
                let stack = scenario.handshake.stack;
                let describe = || -> Result<String> {
                    Ok(wire.carrier().describe(&self.stacks.backend(stack)?.library_version(), stack))
                };
                let (server, version) = match (wire, &contexts.files) {
                    (Wire::Quic, _) => {
                        let quic = QuicServing { cfg: &scenario.handshake, tuning: Tuning::default(), key_log: None };
                        (own(wire.carrier(), contexts.server.clone(), Some(quic))?, describe()?)
                    }
                    _ if spec.tls => (own(wire.carrier(), contexts.server.clone(), None)?, describe()?),
                    _ => (own(wire.carrier(), None, None)?, "pqtls serve --plain".into()),
                };
                let target = Target::parse(&format!("{scheme}://{}{path}", server.addr()))?;
                Ok(Serving {
                    target,
                    terminator: Terminator { name: "pqtls".into(), version, backend: None },
                    server: Some(server),
                    server_terminates: spec.tls,
                    _third_party: None,
                })
            }
            name => {
                let Some(t) = self.setup.terminators else {
                    return Err(Error::Unsupported(format!(
                        "terminator {name}: this command cannot start third-party terminators; use terminator = pqtls"
                    )));
                };
                let files = contexts.files.as_ref().ok_or_else(|| {
                    Error::Invalid(format!("terminator {name} with tls = false: a plain backend needs no terminator"))
                })?;
                // The backend is plain HTTP/1.1 over TCP, whatever the terminator's wire (nginx
                // and HAProxy listen on UDP for HTTP/3 when the scenario's wire is QUIC).
                let backend = own(&Tcp, None, None)?;
                let running = t.start(name, scenario, files, backend.addr())?;
                let target = Target::parse(&format!("https://{}{path}", running.addr()))?;
                let mut terminator = running.describe();
                terminator.backend = Some(format!("pqtls serve --plain on {}", backend.addr()));
                Ok(Serving {
                    target,
                    terminator,
                    server: Some(backend),
                    server_terminates: false,
                    _third_party: Some(running),
                })
            }
        }
    }

    /// The server's counters: our own server's directly, a user's `pqtls serve` through
    /// `GET /stats` over TCP (other servers have none, nor has one over QUIC: `None`).
    fn stats(&self, s: &Serving, contexts: &Contexts) -> Option<StatsSnapshot> {
        match (&s.server, &contexts.client) {
            (Some(server), _) => Some(server.stats()),
            (None, Client::Tcp { tls, .. }) => fetch_stats(&s.target, tls.as_ref()).ok(),
            (None, Client::Quic(_)) => None,
        }
    }
}

/// Why a run that completed no request measured nothing: its errors by kind, or what was in
/// flight.
pub fn nothing_measured(run: &LoadRun, opts: &LoadOptions) -> String {
    let stopped = match run.stopped.as_str() {
        "server gone" => format!(
            "the server went away (connections refused for {} s) before any measured request completed",
            load::GONE_AFTER.as_secs()
        ),
        _ => format!("no request completed in the measured {:.1} s", run.duration_ns as f64 / 1e9),
    };
    let errors = if run.errors.is_empty() {
        format!(
            "no errors; {} requests unfinished (a server slower than one response per --duration: give a longer \
             --duration or --timeout than {:?})",
            run.unfinished, opts.timeout
        )
    } else {
        format!(
            "errors by kind: {}{}",
            run.errors
                .iter()
                .map(|e| format!("{} {} (last: {})", e.count, e.kind, e.last))
                .collect::<Vec<_>>()
                .join("; "),
            if run.unfinished > 0 { format!("; {} unfinished", run.unfinished) } else { String::new() }
        )
    };
    format!("measured nothing against {}: {stopped}; {errors}", opts.target.url())
}

/// The runner's progress from the load generator's: time done of warm-up + duration.
fn reporter<'p>(settings: &Settings, progress: &'p mut dyn FnMut(&Progress)) -> impl FnMut(&LoadProgress) + 'p {
    let total_ms = settings.load.warmup_ms + settings.load.duration_ms;
    move |p: &LoadProgress| {
        progress(&Progress {
            phase: p.phase,
            done: p.elapsed.as_millis() as u64,
            target: total_ms,
            worst: None,
            notes: Vec::new(),
        })
    }
}

/// What the scenario asks the handshake to negotiate: its group and cipher suite, and the
/// signature scheme of its chain when the chain is pqtls' (a server's own chain signs with
/// whatever its leaf is).
fn expect(scenario: &Scenario, trust: &ClientTrust) -> Expect {
    let h = &scenario.handshake;
    Expect {
        group: Some(h.expected_group().name.to_string()),
        cipher: Some(h.cipher.name.to_string()),
        sigalg: (trust.anchors == Anchors::Pki).then(|| h.chain.leaf.scheme.to_string()),
        cert_compression: crate::carrier::compression_asked(h),
    }
}
