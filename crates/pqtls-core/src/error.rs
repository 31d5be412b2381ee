//! One error type for the lab. Every variant says what was wrong and, where there is a
//! finite set of valid answers, what would work.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name that is not in the catalogue.
    #[error("unknown {what} '{given}'; known: {}", known.join(", "))]
    Unknown { what: &'static str, given: String, known: Vec<String> },
    /// A valid name that the chosen stack (or combination) cannot do.
    #[error("{0}")]
    Unsupported(String),
    /// A malformed value (a bad number, an empty list, ...).
    #[error("{0}")]
    Invalid(String),
    /// The handshake did not negotiate what was asked.
    #[error("negotiated {what} '{got}' but '{wanted}' was requested ({context})")]
    Mismatch { what: &'static str, wanted: String, got: String, context: String },
    /// The TLS stack reported an error (handshake failure, verification failure, ...).
    #[error("{stack}: {message}")]
    Tls { stack: &'static str, message: String },
    #[error("{context}: {source}")]
    Io { context: String, source: std::io::Error },
    #[error("{0}")]
    Other(String),
}

impl Error {
    pub fn unknown<I, S>(what: &'static str, given: &str, known: I) -> Error
    where
        I: IntoIterator<Item = S>,
        S: fmt::Display,
    {
        Error::Unknown { what, given: given.to_string(), known: known.into_iter().map(|s| s.to_string()).collect() }
    }

    pub fn io(context: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { context: context.into(), source }
    }

    pub fn tls(stack: &'static str, message: impl Into<String>) -> Error {
        Error::Tls { stack, message: message.into() }
    }

    /// Prefixes the message with where it happened (a configuration, a file).
    pub fn context(self, ctx: impl fmt::Display) -> Error {
        Error::Other(format!("{ctx}: {self}"))
    }
}
