//! The network lab's errors: each says what failed and, where it can, what would work.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command of the lab (`ip`, `tc`, `iptables`, …) failed: its command line and stderr.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command { command: String, status: String, stderr: String },
    /// The lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN: namespaces, qdiscs, iptables).
    #[error("{0}")]
    Privilege(String),
    /// A link or option the lab does not accept, with what would work.
    #[error("{0}")]
    Invalid(String),
    /// The link was built and measured but is not what was asked for (see the report).
    #[error("the link was refused: {}", .0.refusal())]
    Refused(Box<crate::verify::LinkReport>),
    /// Verification stopped by the caller's interrupt flag (Ctrl-C).
    #[error("interrupted")]
    Interrupted,
    /// The message says the I/O error already (not also its `source()`: printed once).
    #[error("{context}: {error}")]
    Io { context: String, error: std::io::Error },
}

impl Error {
    pub fn io(context: impl fmt::Display, source: std::io::Error) -> Error {
        Error::Io { context: context.to_string(), error: source }
    }

    pub(crate) fn nix(context: impl fmt::Display, errno: nix::errno::Errno) -> Error {
        Error::io(context, std::io::Error::from(errno))
    }
}
