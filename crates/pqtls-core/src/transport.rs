//! How the bytes of a handshake travel between the client and the server endpoint: the
//! transport is a value chosen separately from the stack and the configuration (the drivers
//! that implement each one live in `pqtls-lab`).
//!
//! - `memory`: both endpoints in one thread, buffers in memory. The per-step CPU times are
//!   the stacks' own: the reference for per-step costs.
//! - `socketpair`: two threads pinned to two CPUs over a UNIX socketpair (real kernel I/O,
//!   no network stack). Stores written before this module say `threads` for it.
//! - `tcp`: the same two threads over a TCP connection on loopback (`127.0.0.1`), one new
//!   connection per handshake: the first step towards real sockets.
//! - `quic`: QUIC in memory in one thread (quinn-proto driven sans-IO on a virtual clock, rustls
//!   inside), datagram by datagram: the same steps as `memory`, plus datagrams and QUIC packets
//!   per type (`crate::quic`).

use crate::backend::Negotiated;
use crate::error::{Error, Result};
use crate::trace::{RecordCount, SideSample};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// One handshake's outcome over a transport: each side's attributed sample and the bytes per
/// direction (over QUIC: datagram bytes, and datagrams as `records`).
#[derive(Clone, Debug)]
pub struct Handshake {
    pub client: SideSample,
    pub server: SideSample,
    pub client_to_server: RecordCount,
    pub server_to_client: RecordCount,
    pub negotiated: Negotiated,
    /// Trace events recorded (client + server).
    pub events: usize,
    /// Over QUIC: datagrams, packets per type, amplification, rounds.
    pub quic: Option<crate::quic::QuicWire>,
}

/// Which transport moves the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum TransportKind {
    /// Client and server in one thread over memory buffers.
    #[default]
    Memory,
    /// Two threads pinned to two CPUs over a UNIX socketpair.
    Socketpair,
    /// Two threads pinned to two CPUs over TCP on loopback, one connection per handshake.
    Tcp,
    /// QUIC (quinn-proto, sans-IO) in memory in one thread: UDP datagrams handed over on a
    /// virtual clock, one connection per handshake (rustls only).
    Quic,
}

impl TransportKind {
    /// Every transport over a byte stream (TLS records), in the order a cross-check shows them.
    pub const ALL: [TransportKind; 3] = [TransportKind::Memory, TransportKind::Socketpair, TransportKind::Tcp];
    /// Every transport: the byte-stream ones and QUIC.
    pub const EVERY: [TransportKind; 4] =
        [TransportKind::Memory, TransportKind::Socketpair, TransportKind::Tcp, TransportKind::Quic];

    /// Parses a name, case-insensitively. `threads`/`thread` (the old name of the
    /// two-thread mode, still found in stores) mean `socketpair`.
    pub fn parse(s: &str) -> Result<TransportKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "memory" | "in-memory" | "mem" => Ok(TransportKind::Memory),
            "socketpair" | "threads" | "thread" | "unix" => Ok(TransportKind::Socketpair),
            "tcp" | "tcp-loopback" | "loopback" => Ok(TransportKind::Tcp),
            "quic" => Ok(TransportKind::Quic),
            _ => Err(Error::unknown("transport", s, TransportKind::EVERY.iter().map(|k| k.name()))),
        }
    }

    /// Parses a comma-separated list such as `memory,socketpair,tcp` (no duplicates).
    pub fn parse_list(s: &str) -> Result<Vec<TransportKind>> {
        let mut kinds = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let k = TransportKind::parse(part)?;
            if kinds.contains(&k) {
                return Err(Error::Invalid(format!("transport {} is listed twice in '{s}'", k.name())));
            }
            kinds.push(k);
        }
        if kinds.is_empty() {
            return Err(Error::Invalid(format!(
                "no transport in '{s}'; give a comma-separated list of {}",
                TransportKind::EVERY.map(|k| k.name()).join(", ")
            )));
        }
        Ok(kinds)
    }

    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Memory => "memory",
            TransportKind::Socketpair => "socketpair",
            TransportKind::Tcp => "tcp",
            TransportKind::Quic => "quic",
        }
    }

    /// True when client and server run in two threads (and so on two CPUs).
    pub fn threaded(self) -> bool {
        !matches!(self, TransportKind::Memory | TransportKind::Quic)
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TransportKind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        TransportKind::parse(s)
    }
}

impl Serialize for TransportKind {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for TransportKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        TransportKind::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// How a thread waits for its peer's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Wait {
    /// Spin on a non-blocking socket: the waiting side keeps its CPU busy, as a loaded
    /// server's would, instead of sleeping and coming back to cold caches (on the 2-vCPU VMs
    /// we measure on, sleeping made cheap handshakes ~50 % slower; see docs/benchmarks.md §2).
    #[default]
    Spin,
    /// Sleep in a blocking `read()`.
    Sleep,
}

impl Wait {
    pub const ALL: [Wait; 2] = [Wait::Spin, Wait::Sleep];

    pub fn parse(s: &str) -> Result<Wait> {
        match s.trim().to_ascii_lowercase().as_str() {
            "spin" | "busy" => Ok(Wait::Spin),
            "sleep" | "block" | "blocking" => Ok(Wait::Sleep),
            _ => Err(Error::unknown("wait policy", s, Wait::ALL.iter().map(|w| w.name()))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Wait::Spin => "spin",
            Wait::Sleep => "sleep",
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Wait {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Wait {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Wait::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// What the two-thread transports need to know besides the kind. Explicit values only:
/// nothing is read from the environment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransportOptions {
    /// CPUs for the client and the server thread; `None` chooses two from the machine's
    /// topology (two different cores when there are).
    #[serde(default)]
    pub cpus: Option<(usize, usize)>,
    #[serde(default)]
    pub wait: Wait,
    /// The longest one handshake may take before the transport gives up with an error (a
    /// peer that never answers must not hang the run).
    #[serde(default = "default_handshake_timeout", with = "millis")]
    pub handshake_timeout: Duration,
}

/// 10 s: a handshake takes well under 100 ms here even for the largest chains in a debug
/// build, so only a peer that is stuck reaches it.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

fn default_handshake_timeout() -> Duration {
    DEFAULT_HANDSHAKE_TIMEOUT
}

impl Default for TransportOptions {
    fn default() -> Self {
        TransportOptions { cpus: None, wait: Wait::Spin, handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT }
    }
}

impl TransportOptions {
    /// Parses `--cpus 2,3` (client CPU, server CPU).
    pub fn parse_cpus(s: &str) -> Result<(usize, usize)> {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        let nums: Vec<usize> = parts.iter().filter_map(|p| p.parse().ok()).collect();
        match nums.as_slice() {
            [a, b] if parts.len() == 2 && a != b => Ok((*a, *b)),
            [a, b] if parts.len() == 2 && a == b => {
                Err(Error::Invalid(format!("CPUs '{s}' name CPU {a} twice; give two different CPUs, e.g. 0,1")))
            }
            _ => Err(Error::Invalid(format!(
                "CPUs '{s}' must be two CPU numbers for the client and the server thread, e.g. 0,1"
            ))),
        }
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_old_store_names_still_work() {
        for k in TransportKind::EVERY {
            assert_eq!(TransportKind::parse(k.name()).unwrap(), k);
            assert_eq!(k.to_string().parse::<TransportKind>().unwrap(), k);
        }
        assert_eq!(TransportKind::parse("threads").unwrap(), TransportKind::Socketpair);
        assert_eq!(TransportKind::parse("Thread").unwrap(), TransportKind::Socketpair);
        assert_eq!(TransportKind::parse("in-memory").unwrap(), TransportKind::Memory);
        let e = TransportKind::parse("xyz").unwrap_err().to_string();
        assert_eq!(e, "unknown transport 'xyz'; known: memory, socketpair, tcp, quic");
    }

    #[test]
    fn serde_uses_lowercase_names_and_reads_the_old_mode_name() {
        assert_eq!(serde_json::to_string(&TransportKind::Socketpair).unwrap(), "\"socketpair\"");
        assert_eq!(serde_json::from_str::<TransportKind>("\"threads\"").unwrap(), TransportKind::Socketpair);
        assert_eq!(serde_json::from_str::<TransportKind>("\"tcp\"").unwrap(), TransportKind::Tcp);
        assert_eq!(serde_json::from_str::<TransportKind>("\"quic\"").unwrap(), TransportKind::Quic);
        let e = serde_json::from_str::<TransportKind>("\"sctp\"").unwrap_err().to_string();
        assert!(e.contains("known: memory, socketpair, tcp, quic"), "{e}");
        assert_eq!(serde_json::to_string(&Wait::Sleep).unwrap(), "\"sleep\"");
        let o: TransportOptions = serde_json::from_str("{}").unwrap();
        assert_eq!(o, TransportOptions::default());
        let back: TransportOptions = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(back, o);
    }

    #[test]
    fn lists_and_cpus_parse_with_clear_errors() {
        assert_eq!(TransportKind::parse_list("memory, tcp").unwrap(), vec![TransportKind::Memory, TransportKind::Tcp]);
        assert!(TransportKind::parse_list("tcp,tcp").unwrap_err().to_string().contains("listed twice"));
        assert!(TransportKind::parse_list(" , ").unwrap_err().to_string().contains("memory, socketpair, tcp"));
        assert_eq!(TransportOptions::parse_cpus("2, 3").unwrap(), (2, 3));
        assert!(TransportOptions::parse_cpus("1,1").unwrap_err().to_string().contains("twice"));
        assert!(TransportOptions::parse_cpus("1").unwrap_err().to_string().contains("e.g. 0,1"));
        assert!(TransportOptions::parse_cpus("a,b").unwrap_err().to_string().contains("e.g. 0,1"));
        let e = Wait::parse("yield").unwrap_err().to_string();
        assert!(e.contains("spin, sleep"), "{e}");
    }
}
