//! How the bytes of a scenario move between client and server (a factor value; the
//! transports themselves live in pqtls-lab).

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// Client and server in one thread over memory buffers.
    #[default]
    Memory,
    /// Two pinned threads over a UNIX socketpair.
    Socketpair,
    /// Two pinned threads over a TCP connection on loopback.
    Tcp,
}

impl TransportKind {
    pub const ALL: [TransportKind; 3] = [TransportKind::Memory, TransportKind::Socketpair, TransportKind::Tcp];

    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Memory => "memory",
            TransportKind::Socketpair => "socketpair",
            TransportKind::Tcp => "tcp",
        }
    }

    /// Reads a name; `threads` (the mode of stores written before transports) is a socketpair.
    pub fn parse(s: &str) -> Result<TransportKind> {
        match s.trim().to_ascii_lowercase().as_str() {
            "memory" | "in-memory" | "mem" => Ok(TransportKind::Memory),
            "socketpair" | "threads" | "thread" | "unix" => Ok(TransportKind::Socketpair),
            "tcp" | "loopback" => Ok(TransportKind::Tcp),
            _ => Err(Error::unknown("transport", s, TransportKind::ALL.map(|t| t.name()))),
        }
    }
}

impl std::fmt::Display for TransportKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
