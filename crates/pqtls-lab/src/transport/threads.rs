//! The two-thread transports: the client endpoint in the calling thread, the server endpoint
//! in a second thread, each pinned to its own CPU, one handshake after another over a fresh
//! connection. What differs between socketpair and TCP is only the [`Link`] that makes the
//! connection; the exchange, the pinning, the barrier and the timeouts are the same code.

use super::cpus::{self, Pinned, Placement, Plan};
use super::stream::{exchange, Limit, Role};
use super::{Batch, Handshake, Transport, TransportKind, TransportOptions, Wait};
use pqtls_core::backend::{EndpointOptions, Negotiated, Prepared};
use pqtls_core::trace::{attribute, RecordCount, SideSample};
use pqtls_core::{Error, Result};
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a two-thread transport connects its client and its server.
pub trait Link: Sized {
    const KIND: TransportKind;
    type Stream: Read + Write + Send + 'static;

    /// Set up once per run (a TCP listener, for instance).
    fn open() -> Result<Self>;

    /// Both ends of a new connection, `(client end, server end)`, ready for one handshake:
    /// non-blocking with [`Wait::Spin`]; with [`Wait::Sleep`], blocking with `timeout` on
    /// every read and write. Runs before the handshake's measured calls.
    fn connect(&mut self, wait: Wait, timeout: Duration) -> Result<(Self::Stream, Self::Stream)>;
}

/// A two-thread transport over the link `L`.
pub struct Threads<L: Link> {
    options: TransportOptions,
    /// The CPUs, chosen on the first run and kept: every batch of a measurement runs on the
    /// same two.
    plan: Option<Plan>,
    link: PhantomData<fn() -> L>,
}

impl<L: Link> Threads<L> {
    pub fn new(options: TransportOptions) -> Self {
        Threads { options, plan: None, link: PhantomData }
    }
}

/// The server thread's outcome for one handshake: its sample, the bytes it sent, its events.
type ServerSide = Result<(SideSample, RecordCount, usize)>;

/// The client thread's outcome for one handshake.
struct ClientSide {
    sample: SideSample,
    sent: RecordCount,
    events: usize,
    negotiated: Negotiated,
}

impl<L: Link> Transport for Threads<L> {
    fn kind(&self) -> TransportKind {
        L::KIND
    }

    fn run(
        &mut self,
        prepared: Arc<dyn Prepared>,
        handshakes: u64,
        opts: &EndpointOptions,
        stop: &dyn Fn() -> bool,
    ) -> Result<Batch> {
        if self.options.handshake_timeout.is_zero() {
            return Err(Error::Invalid("the handshake timeout must be above zero, e.g. 10 s".into()));
        }
        let plan = match &self.plan {
            Some(p) => p.clone(),
            None => self.plan.insert(cpus::plan_here(self.options.cpus, Path::new(cpus::SYSFS_CPU_ROOT))?).clone(),
        };
        let (client_cpu, server_cpu) = match plan.placement {
            Placement::Pinned { client, server } => (Some(client), Some(server)),
            Placement::Unpinned => (None, None),
        };
        let wait = self.options.wait;
        let timeout = self.options.handshake_timeout;
        let mut link = L::open()?;
        let (to_server, streams) = mpsc::channel::<L::Stream>();
        let (to_client, results) = mpsc::channel::<ServerSide>();

        std::thread::scope(|scope| {
            let server = {
                let prepared = prepared.clone();
                std::thread::Builder::new()
                    .name("pqtls-server".into())
                    .spawn_scoped(scope, move || {
                        serve(prepared.as_ref(), streams, to_client, opts, server_cpu, timeout, L::KIND.name())
                    })
                    .map_err(|e| Error::io("starting the server thread", e))?
            };
            let client_pin = client_cpu.map(Pinned::current_thread);
            let mut batch = Batch { handshakes: Vec::with_capacity(handshakes as usize), notes: Vec::new() };
            let mut outcome = Ok(());
            for i in 0..handshakes {
                match one_handshake(&mut link, prepared.as_ref(), &to_server, &results, opts, wait, timeout) {
                    Ok(h) => batch.handshakes.push(h),
                    Err(e) => {
                        outcome = Err(e.context(format!("{} handshake {} of {handshakes}", L::KIND, i + 1)));
                        break;
                    }
                }
                if stop() {
                    break;
                }
            }
            // Closing the channel tells the server thread the run is over.
            drop(to_server);
            let server_pin = server.join().map_err(|_| Error::Other("the server thread panicked".into()))?;
            outcome?;
            let mut refused = Vec::new();
            if let Some(Err(e)) = &client_pin {
                refused.push(format!("client thread: {e}"));
            }
            if let Some(Err(e)) = &server_pin {
                refused.push(format!("server thread: {e}"));
            }
            if refused.is_empty() {
                batch.notes = plan.notes.clone();
                if plan.placement == Placement::Unpinned && wait == Wait::Spin {
                    batch.notes.push(
                        "both threads spin while waiting for each other on one CPU, which wastes its time slices: prefer waiting by sleeping (wait = sleep)".into(),
                    );
                }
            } else if let Placement::Pinned { client, server } = plan.placement {
                batch.notes.push(format!(
                    "could not pin to CPUs {client} and {server} ({}); the threads that could not be pinned ran unpinned",
                    refused.join("; ")
                ));
            }
            Ok(batch)
        })
    }
}

/// One handshake: connect (outside the measured calls), hand the server its end, run the
/// client here, close, and wait for the server's outcome before the next handshake (the
/// barrier that keeps handshakes apart).
fn one_handshake<L: Link>(
    link: &mut L,
    prepared: &dyn Prepared,
    to_server: &mpsc::Sender<L::Stream>,
    results: &Receiver<ServerSide>,
    opts: &EndpointOptions,
    wait: Wait,
    timeout: Duration,
) -> Result<Handshake> {
    let (mut stream, server_end) = link.connect(wait, timeout)?;
    to_server.send(server_end).map_err(|_| Error::Other("the server thread ended before the handshake".into()))?;
    let limit = Limit::after(timeout, L::KIND.name());
    let client = prepared.client(opts).and_then(|mut ep| {
        let sent = exchange(ep.as_mut(), &mut stream, Role::Client, &limit)?;
        let negotiated = ep.negotiated()?;
        let events = ep.trace().events.len();
        Ok(ClientSide { sample: attribute(ep.trace()), sent, events, negotiated })
    });
    // Closing our end now makes a server still waiting for us fail at once instead of at
    // its own deadline.
    drop(stream);
    // The server has its own deadline, so this wait is bounded; a fresh one lets a server
    // that failed because the client did report why.
    let server = receive(results, wait, &Limit::after(timeout, L::KIND.name()));
    match (client, server) {
        (Ok(c), Ok((server, s2c, server_events))) => Ok(Handshake {
            client: c.sample,
            server,
            client_to_server: c.sent,
            server_to_client: s2c,
            negotiated: c.negotiated,
            events: c.events + server_events,
            quic: None,
        }),
        (Err(e), Ok(_)) | (Ok(_), Err(e)) => Err(e),
        (Err(c), Err(s)) => Err(Error::Other(format!("both sides failed — client: {c}; server: {s}"))),
    }
}

/// Waits for the server's outcome of the current handshake, spinning or sleeping like the
/// transport's reads, at most until the handshake's deadline.
fn receive(results: &Receiver<ServerSide>, wait: Wait, limit: &Limit) -> ServerSide {
    let deadline = limit.deadline.unwrap_or_else(Instant::now);
    let gone = || Error::Other("the server thread ended without finishing the handshake".into());
    let late = || {
        Error::tls(
            limit.transport,
            format!("the server did not finish the handshake within the handshake timeout of {:?}", limit.timeout),
        )
    };
    match wait {
        Wait::Spin => loop {
            match results.try_recv() {
                Ok(r) => return r,
                Err(TryRecvError::Disconnected) => return Err(gone()),
                Err(TryRecvError::Empty) if Instant::now() >= deadline => return Err(late()),
                Err(TryRecvError::Empty) => std::hint::spin_loop(),
            }
        },
        Wait::Sleep => match results.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(r) => r,
            Err(RecvTimeoutError::Disconnected) => Err(gone()),
            Err(RecvTimeoutError::Timeout) => Err(late()),
        },
    }
}

/// The server thread: one endpoint per connection until the client closes the channel.
/// Returns whether pinning worked (`None`: not asked to pin).
fn serve<S: Read + Write>(
    prepared: &dyn Prepared,
    streams: Receiver<S>,
    results: mpsc::Sender<ServerSide>,
    opts: &EndpointOptions,
    cpu: Option<usize>,
    timeout: Duration,
    transport: &'static str,
) -> Option<std::result::Result<(), String>> {
    let pin = cpu.map(Pinned::current_thread);
    for mut stream in streams.iter() {
        // Twice the client's: when both sides wait for each other, the client, whose view
        // the run reports, gives up first and says what it waited for.
        let limit = Limit::after(timeout * 2, transport);
        let outcome = prepared.server(opts).and_then(|mut ep| {
            let sent = exchange(ep.as_mut(), &mut stream, Role::Server, &limit)?;
            Ok((attribute(ep.trace()), sent, ep.trace().events.len()))
        });
        drop(stream);
        let failed = outcome.is_err();
        if results.send(outcome).is_err() || failed {
            break;
        }
    }
    pin.map(|p| p.map(drop))
}
