//! The resident measurement (`kind = "resident"`, docs/memory.md): what a TLS terminator keeps
//! in memory per established, idle connection. Per scenario: the terminator is started —
//! `pqtls serve` in a process of its own with its heap counted (so that none of this client's
//! allocations are in its figures: [`ResidentServers`]), or nginx / HAProxy in front of a plain
//! `pqtls serve` ([`Terminators`], configured to hold the connections) — and its memory read
//! with no connection, then with each count of `held` connections in turn: each connection
//! completes its handshake (resumed from a ticket with `resumption = true`) and one request
//! and response (GET /`response_size`), then stays open and idle. The client keeps only the
//! socket of a held connection (its TLS state is dropped, nothing is sent), so its own memory
//! stays small. Memory per connection is (reading at N − reading at 0) / N.
//!
//! Readings: `pqtls serve`'s heap counters and open connections from `GET /stats` (over one
//! more connection, open during every reading alike, so it cancels out of the differences),
//! and every terminator's Σ RSS and Σ PSS from /proc.

use crate::load::{self, Expect, Target};
use crate::response::ResponseReader;
use crate::serve::{ServeOptions, Server, StatsSnapshot};
use crate::shared::{request_once, RunningTerminator, Terminators};
use pqtls_core::backend::{EndpointOptions, Negotiated, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::record::{Measured, Outcome, Record, INTERRUPTED};
use pqtls_core::resident::{PerConnection, ResidentReading, ResidentResult};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::{units, Error, Result};
use pqtls_lab::measurement::{Measurement, Progress};
use pqtls_lab::Stacks;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::shared::ResidentServers;

/// The resident measurement: the stacks and how it is set up.
pub struct Resident<'a> {
    pub stacks: Stacks<'a>,
    pub setup: ResidentSetup<'a>,
}

/// How the resident measurement is set up: who starts the terminators.
#[derive(Clone)]
pub struct ResidentSetup<'a> {
    /// `pqtls serve` in a process of its own (terminator `pqtls`); `None`: refused by name.
    pub serve: Option<&'a dyn ResidentServers>,
    /// nginx and HAProxy, configured to hold the connections; `None`: refused by name.
    pub terminators: Option<&'a dyn Terminators>,
    /// Client threads opening the connections.
    pub threads: usize,
    /// A connection's handshake and response, and a reading, must complete within this.
    pub timeout: Duration,
}

impl Default for ResidentSetup<'_> {
    fn default() -> Self {
        ResidentSetup { serve: None, terminators: None, threads: 2, timeout: Duration::from_secs(10) }
    }
}

/// Local ports kept free besides the held connections (the readings', other programs').
const SPARE_PORTS: u64 = 64;

/// Makes sure `connections` held sockets fit under this process's open-files limit (raising the
/// soft limit to the hard one when needed; the terminator's process, started after, inherits
/// it), or says how many fit and how to raise it.
pub fn ensure_fds(connections: u64) -> Result<u64> {
    let what = format!("holding {connections} connections needs about {{need}} file descriptors");
    load::ensure_descriptors(connections, 8, &what, "pqtls resident …", &|hard, open| {
        format!("at most {} connections fit: give --held up to that", hard.saturating_sub(open + 2 * 64 + 8))
    })
}

/// The kernel's ephemeral port range (net.ipv4.ip_local_port_range): how many connections to
/// one address and port a client can have open at once.
pub fn ephemeral_ports() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().filter_map(|x| x.parse::<u64>().ok());
    Some((it.next()?, it.next()?))
}

/// Refuses `connections` that the ephemeral port range cannot hold to one server address,
/// saying how to widen it.
pub fn ensure_ports(connections: u64) -> Result<()> {
    let Some((low, high)) = ephemeral_ports() else { return Ok(()) };
    let ports = high.saturating_sub(low) + 1;
    if connections + SPARE_PORTS > ports {
        return Err(Error::Invalid(format!(
            "{connections} connections to one server need as many local ports, but the ephemeral port range \
             (net.ipv4.ip_local_port_range) is {low}–{high}: {ports} ports, {SPARE_PORTS} kept spare; hold at most {} \
             connections, or widen the range as root: `sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`",
            ports.saturating_sub(SPARE_PORTS)
        )));
    }
    Ok(())
}

/// What holds one scenario's connections: the terminator, and the backend behind a third party.
struct Holding {
    terminator: Box<dyn RunningTerminator>,
    /// The plain `pqtls serve` behind nginx or HAProxy (in this process).
    _backend: Option<Server>,
    /// The terminator is `pqtls serve`, whose `/stats` is read.
    own: bool,
}

impl Measurement for Resident<'_> {
    fn kind(&self) -> Kind {
        Kind::Resident
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
        scenario.validate_for(Kind::Resident)?;
        let held = pqtls_core::settings::ResidentSettings::held_from(&settings.resident.held)?;
        let most = *held.last().expect("held_from returns at least one count");
        // Before anything starts: this process's descriptors (one per held connection; the
        // terminator's own process inherits the raised limit) and the local ports fit.
        ensure_fds(most)?;
        ensure_ports(most)?;
        let (client, files) = self.stacks.prepare(scenario)?;
        let holding = self.hold(scenario, &files, most)?;
        let path = format!("/{}", units::format_bytes(scenario.load.response_bytes).replace(' ', ""));
        let target =
            Target { addr: holding.terminator.addr(), host: holding.terminator.addr().to_string(), path, tls: true };
        let mut notes = Vec::new();
        if scenario.handshake.resumption {
            // The ticket the held connections resume from: one full handshake, then closed.
            let (_, n) = open(&target, &client, self.setup.timeout, &expect(scenario, false))?;
            if n.resumed {
                return Err(Error::Other("the connection that fetches the session ticket was resumed".into()));
            }
        }
        let settle = Duration::from_millis(settings.resident.settle_ms);
        let coverage = Mutex::new(None);
        let read = |connections: u64| -> Result<ResidentReading> {
            std::thread::sleep(settle);
            let (reading, covered) = self.reading(&holding, &target, &client, connections)?;
            if covered.is_some() {
                *coverage.lock().unwrap_or_else(|p| p.into_inner()) = covered;
            }
            Ok(reading)
        };
        let mut readings = vec![read(0)?];
        let streams: Mutex<Vec<TcpStream>> = Mutex::new(Vec::with_capacity(most as usize));
        let (resumed, negotiated) = (AtomicU64::new(0), Mutex::new(None::<Negotiated>));
        let started = Instant::now();
        let mut stopped = "complete".to_string();
        for &n in &held {
            let have = streams.lock().unwrap_or_else(|p| p.into_inner()).len() as u64;
            progress(&Progress {
                phase: "opening connections",
                done: have,
                target: most,
                worst: None,
                notes: Vec::new(),
            });
            let want = expect(scenario, scenario.handshake.resumption);
            let opened = self.open_many(&target, &client, n - have, &want, interrupt, &streams, &resumed, &negotiated);
            if let Err(e) = opened {
                if interrupt.load(Ordering::SeqCst) {
                    stopped = INTERRUPTED.into();
                    break;
                }
                return Err(e);
            }
            progress(&Progress { phase: "reading memory", done: n, target: most, worst: None, notes: Vec::new() });
            readings.push(read(n)?);
        }
        let opening_ns = started.elapsed().as_nanos() as u64;
        // Close them all, and see that the terminator did too.
        drop(streams.into_inner().unwrap_or_else(|p| p.into_inner()));
        let open_after_close = if holding.own { Some(self.wait_closed(&target, &client)?) } else { None };
        let per_connection: Vec<PerConnection> =
            readings.iter().skip(1).map(|r| PerConnection::between(&readings[0], r)).collect();
        if let Some(r) = readings.iter().find(|r| r.open_connections.is_some_and(|o| o != r.connections)) {
            notes.push(format!(
                "with {} connections held the terminator counted {} open: connections were closed or refused on its side",
                r.connections,
                r.open_connections.unwrap_or(0)
            ));
        }
        let terminator = holding.terminator.describe();
        drop(holding);
        let coverage = coverage.into_inner().unwrap_or_else(|p| p.into_inner());
        let result = ResidentResult {
            terminator,
            negotiated: negotiated.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or_default(),
            path: target.path.clone(),
            resumed_connections: resumed.load(Ordering::SeqCst),
            readings,
            per_connection,
            open_after_close,
            opening_ns,
            counted: coverage.as_ref().map(|c| c.counted.clone()).unwrap_or_default(),
            not_counted: coverage.as_ref().map(|c| c.not_counted.clone()).unwrap_or_default(),
            stopped,
            notes,
        };
        let record = Record::measured(scenario, settings, &self.stacks.env, Outcome::Resident(Box::new(result)));
        Ok(Measured { record, samples: Vec::new() })
    }
}

/// What the held connections must negotiate: the scenario's group, cipher and signature (not
/// checked on resumed ones: they carry no signature), resumed or not.
fn expect(scenario: &Scenario, resumed: bool) -> (Expect, bool) {
    let h = &scenario.handshake;
    (
        Expect {
            group: Some(h.expected_group().name.to_string()),
            cipher: Some(h.cipher.name.to_string()),
            sigalg: (!resumed).then(|| h.chain.leaf.scheme.to_string()),
            cert_compression: (!resumed).then(|| crate::carrier::compression_asked(h)).flatten(),
        },
        resumed,
    )
}

/// Opens one connection: TLS handshake, one request, its response (status 200); the client
/// keeps the session ticket it got for the next connection. Returns the socket, still open.
fn open(
    target: &Target,
    client: &Arc<dyn Prepared>,
    timeout: Duration,
    (want, resumed): &(Expect, bool),
) -> Result<(TcpStream, Negotiated)> {
    let deadline = Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&target.addr, timeout)
        .map_err(|e| Error::io(format!("connecting to {}", target.addr), e))?;
    let _ = s.set_nodelay(true);
    let req = crate::http::get(&target.path, &target.host, true);
    let mut reader = ResponseReader::new(load::DEFAULT_MAX_BODY_BYTES);
    let (status, ep) = request_once(&mut s, Some(client), &req, &mut reader, deadline, &target.path)?;
    if status != 200 {
        return Err(Error::Other(format!("GET {} answered {status}", target.path)));
    }
    let mut ep = ep.ok_or_else(|| Error::Other("no TLS client".into()))?;
    ep.finish()?;
    let n = ep.negotiated()?;
    let differs = |what: &str, asked: &Option<String>, got: &str| match asked {
        Some(a) if a != got => Err(Error::Other(format!("{what} {got} was negotiated, {a} was asked"))),
        _ => Ok(()),
    };
    differs("group", &want.group, &n.group)?;
    differs("cipher suite", &want.cipher, &n.cipher)?;
    differs("signature algorithm", &want.sigalg, &n.sigalg)?;
    if !n.resumed {
        differs("certificate compression", &want.cert_compression, n.cert_compression.as_deref().unwrap_or("unknown"))?;
    }
    if *resumed && !n.resumed {
        return Err(Error::Other(
            "resumption was asked, but the connection made a full handshake (the server did not accept the ticket)"
                .into(),
        ));
    }
    // The TLS state is dropped here; the socket stays open and nothing more is sent on it.
    drop(ep);
    Ok((s, n))
}

impl Resident<'_> {
    /// Starts what holds the scenario's connections.
    fn hold(&self, scenario: &Scenario, files: &pqtls_core::backend::PkiFiles, most: u64) -> Result<Holding> {
        match scenario.load.terminator.as_str() {
            "pqtls" => {
                let serve = self.setup.serve.ok_or_else(|| {
                    Error::Unsupported(
                        "terminator pqtls: this command cannot start pqtls serve in a process of its own".into(),
                    )
                })?;
                Ok(Holding { terminator: serve.serve(scenario, most)?, _backend: None, own: true })
            }
            name => {
                let t = self.setup.terminators.ok_or_else(|| {
                    Error::Unsupported(format!("terminator {name}: this command cannot start third-party terminators"))
                })?;
                let backend = Server::start(ServeOptions {
                    listen: "127.0.0.1:0".parse().expect("a valid address"),
                    threads: 1,
                    tls: None,
                    endpoint: EndpointOptions::traced(false),
                    keep_alive: true,
                })?;
                let terminator = t.start(name, scenario, files, backend.addr())?;
                Ok(Holding { terminator, _backend: Some(backend), own: false })
            }
        }
    }

    /// The terminator's memory now, `connections` being held.
    fn reading(
        &self,
        holding: &Holding,
        target: &Target,
        client: &Arc<dyn Prepared>,
        connections: u64,
    ) -> Result<(ResidentReading, Option<pqtls_core::backend::AllocationCoverage>)> {
        let (heap, open, coverage) = if holding.own {
            let s = self.stats(target, client)?;
            let heap = s.heap.ok_or_else(|| {
                Error::Other("pqtls serve's /stats has no heap counters (it was not started with --memory)".into())
            })?;
            let coverage =
                pqtls_core::backend::AllocationCoverage { counted: heap.counted, not_counted: heap.not_counted };
            // The reading's own connection is open while /stats answers.
            (Some(heap.reading), Some(s.open_connections.saturating_sub(1)), Some(coverage))
        } else {
            (None, None, None)
        };
        let p = holding.terminator.processes().unwrap_or_default();
        let reading = ResidentReading {
            connections,
            open_connections: open,
            heap,
            processes: p.processes,
            rss_bytes: p.rss_bytes,
            pss_bytes: p.pss_bytes,
        };
        Ok((reading, coverage))
    }

    fn stats(&self, target: &Target, client: &Arc<dyn Prepared>) -> Result<StatsSnapshot> {
        crate::shared::fetch_stats(target, Some(client))
    }

    /// After the client closed every connection: polls `pqtls serve`'s open connections until
    /// they are 0 (the reading's own not counted) or the timeout passes; returns the last count.
    fn wait_closed(&self, target: &Target, client: &Arc<dyn Prepared>) -> Result<u64> {
        let until = Instant::now() + self.setup.timeout;
        loop {
            let open = self.stats(target, client)?.open_connections.saturating_sub(1);
            if open == 0 || Instant::now() >= until {
                return Ok(open);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Opens `count` connections on the setup's threads, adding their sockets to `streams`.
    #[allow(clippy::too_many_arguments)]
    fn open_many(
        &self,
        target: &Target,
        client: &Arc<dyn Prepared>,
        count: u64,
        want: &(Expect, bool),
        interrupt: &AtomicBool,
        streams: &Mutex<Vec<TcpStream>>,
        resumed: &AtomicU64,
        negotiated: &Mutex<Option<Negotiated>>,
    ) -> Result<()> {
        let next = AtomicU64::new(0);
        let failed = AtomicBool::new(false);
        // A client keeps one session ticket, taken by the handshake that offers it and replaced
        // by the one it receives: resumed connections are opened one after another.
        let threads = if want.1 { 1 } else { self.setup.threads.clamp(1, count.max(1) as usize) };
        let timeout = self.setup.timeout;
        let errors: Vec<Result<()>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        while next.fetch_add(1, Ordering::SeqCst) < count {
                            if interrupt.load(Ordering::SeqCst) {
                                return Err(Error::Other("interrupted".into()));
                            }
                            if failed.load(Ordering::SeqCst) {
                                return Ok(());
                            }
                            let (s, n) = open(target, client, timeout, want).inspect_err(|_| {
                                failed.store(true, Ordering::SeqCst);
                            })?;
                            if n.resumed {
                                resumed.fetch_add(1, Ordering::SeqCst);
                            }
                            negotiated.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(n);
                            streams.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_else(|_| Err(Error::Other("a client thread panicked".into()))))
                .collect()
        });
        let held = streams.lock().unwrap_or_else(|p| p.into_inner()).len();
        match errors.into_iter().find(|r| r.is_err()) {
            Some(Err(e)) => Err(Error::Other(format!("opening connection {} to {}: {e}", held + 1, target.addr))),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn more_connections_than_local_ports_are_refused_with_the_sysctl() {
        let Some((low, high)) = ephemeral_ports() else { return };
        let ports = high - low + 1;
        assert!(ensure_ports(ports - SPARE_PORTS).is_ok());
        let e = ensure_ports(ports).unwrap_err().to_string();
        assert!(e.contains("net.ipv4.ip_local_port_range") && e.contains("sysctl -w"), "{e}");
    }
}
