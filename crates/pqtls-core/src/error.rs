//! One error type for the lab. Every variant says what was wrong and, where there is a
//! finite set of valid answers, what would work.

use std::fmt;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A name that is not in the catalogue.
    #[error("unknown {what} '{given}'{}; known: {}", did_you_mean(given, known), known.join(", "))]
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
    /// The peer's certificate chain did not verify against what this side trusts.
    #[error("{stack}: certificate verification failed: {message}")]
    Verification { stack: &'static str, message: String },
    /// The message says the I/O error already: it is not also the error's `source()` (a
    /// reader of the chain, like `anyhow`'s `{:#}`, would print it twice).
    #[error("{context}: {error}")]
    Io { context: String, error: std::io::Error },
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
        Error::Io { context: context.into(), error: source }
    }

    pub fn tls(stack: &'static str, message: impl Into<String>) -> Error {
        Error::Tls { stack, message: message.into() }
    }

    /// Prefixes the message with where it happened (a configuration, a file).
    pub fn context(self, ctx: impl fmt::Display) -> Error {
        Error::Other(format!("{ctx}: {self}"))
    }
}

/// ` (did you mean 'x25519'?)` when one known name is close to what was given (by
/// Jaro-Winkler similarity, ignoring case, `-` and `_`), else nothing.
fn did_you_mean(given: &str, known: &[String]) -> String {
    suggestion(given, known).map_or(String::new(), |s| format!(" (did you mean '{s}'?)"))
}

/// The known name closest to `given`, when it is close enough to be a likely misspelling.
pub fn suggestion<'a>(given: &str, known: &'a [String]) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
    let g = norm(given);
    if g.is_empty() {
        return None;
    }
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(&g, &norm(k)), k))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misspelt_names_get_a_suggestion() {
        let known = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let groups = known(&["x25519", "secp256r1", "X25519MLKEM768", "MLKEM768"]);
        assert_eq!(suggestion("x25520", &groups), Some("x25519"));
        let sigs = known(&["p256", "p384", "mldsa44", "mldsa65", "mldsa87", "ed25519"]);
        assert_eq!(suggestion("p265", &sigs), Some("p256"));
        assert!(matches!(suggestion("mldsa66", &sigs), Some("mldsa65") | Some("mldsa87")));
        assert_eq!(suggestion("opensll", &known(&["openssl", "rustls"])), Some("openssl"));
        assert_eq!(suggestion("zzzz", &sigs), None);
        let e = Error::unknown("group", "x25520", ["x25519", "secp256r1"]).to_string();
        assert_eq!(e, "unknown group 'x25520' (did you mean 'x25519'?); known: x25519, secp256r1");
    }
}
