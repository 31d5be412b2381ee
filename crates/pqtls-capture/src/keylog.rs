//! A key log in the NSS `SSLKEYLOGFILE` format (`LABEL <client random hex> <secret hex>`),
//! as written by `pqtls serve --keylog`, `pqtls load --keylog`, OpenSSL's and rustls'
//! key-log callbacks, browsers and curl: the TLS 1.3 traffic secrets per connection, found
//! by the ClientHello's random.

use pqtls_core::backend::LoggedSecret;
use pqtls_core::{Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// The TLS 1.3 traffic secrets of one connection that this crate uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Secrets {
    pub client_handshake: Option<Vec<u8>>,
    pub server_handshake: Option<Vec<u8>>,
    pub client_traffic_0: Option<Vec<u8>>,
    pub server_traffic_0: Option<Vec<u8>>,
}

/// The secrets of a key log, by client random.
#[derive(Clone, Debug, Default)]
pub struct KeyLog {
    by_random: HashMap<[u8; 32], Secrets>,
}

fn hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// A client random in hex, shortened for messages (`3f2a…91c0`).
pub fn short_hex(bytes: &[u8]) -> String {
    let h: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if h.len() > 12 {
        format!("{}…{}", &h[..6], &h[h.len() - 6..])
    } else {
        h
    }
}

impl KeyLog {
    pub fn new() -> KeyLog {
        KeyLog::default()
    }

    /// Reads a key-log file.
    pub fn read(path: &Path) -> Result<KeyLog> {
        let text = std::fs::read(path).map_err(|e| Error::io(format!("reading the key log {}", path.display()), e))?;
        let text = String::from_utf8(text)
            .map_err(|_| Error::Invalid(format!("{}: not a key log (not text)", path.display())))?;
        KeyLog::parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
    }

    /// Parses key-log text. Comment (`#`) and blank lines are skipped, as are the labels
    /// this crate does not use (TLS 1.2's `CLIENT_RANDOM`, early and exporter secrets); a
    /// line that is not `LABEL <hex> <hex>` is an error naming its number.
    pub fn parse(text: &str) -> std::result::Result<KeyLog, String> {
        let mut log = KeyLog::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            let bad = |why: &str| {
                format!("line {}: {why} (a key-log line is `LABEL <client random, 64 hex digits> <secret hex>`)", n + 1)
            };
            let [label, random, secret] = fields[..] else {
                return Err(bad(&format!("{} fields", fields.len())));
            };
            let random: [u8; 32] = hex(random)
                .and_then(|r| r.try_into().ok())
                .ok_or_else(|| bad("the client random is not 32 bytes of hex"))?;
            let secret = hex(secret).filter(|s| !s.is_empty()).ok_or_else(|| bad("the secret is not hex"))?;
            log.insert(label, random, secret);
        }
        Ok(log)
    }

    /// The secrets an endpoint logged in memory (a [`pqtls_core::backend::MemoryKeyLog`]).
    pub fn from_logged(secrets: &[LoggedSecret]) -> KeyLog {
        let mut log = KeyLog::new();
        for s in secrets {
            if let Ok(random) = <[u8; 32]>::try_from(s.client_random.as_slice()) {
                log.insert(&s.label, random, s.secret.clone());
            }
        }
        log
    }

    /// Adds one secret; labels other than the four TLS 1.3 traffic secrets are ignored.
    pub fn insert(&mut self, label: &str, client_random: [u8; 32], secret: Vec<u8>) {
        const LABELS: [&str; 4] = [
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
        ];
        let Some(i) = LABELS.iter().position(|l| *l == label) else {
            return;
        };
        let s = self.by_random.entry(client_random).or_default();
        let slot = [&mut s.client_handshake, &mut s.server_handshake, &mut s.client_traffic_0, &mut s.server_traffic_0];
        if let Some(slot) = slot.into_iter().nth(i) {
            *slot = Some(secret);
        }
    }

    /// The secrets of the connection whose ClientHello had `client_random`.
    pub fn get(&self, client_random: &[u8; 32]) -> Option<&Secrets> {
        self.by_random.get(client_random)
    }

    /// Connections with at least one secret.
    pub fn len(&self) -> usize {
        self.by_random.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_random.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nss_lines_by_client_random() {
        let r = "01".repeat(32);
        let text = format!(
            "# a comment\n\nCLIENT_HANDSHAKE_TRAFFIC_SECRET {r} aabb\nSERVER_TRAFFIC_SECRET_0 {r} ccdd\n\
             CLIENT_RANDOM {r} eeff\nEXPORTER_SECRET {r} 0011\n"
        );
        let log = KeyLog::parse(&text).unwrap();
        let s = log.get(&[1; 32]).unwrap();
        assert_eq!(s.client_handshake.as_deref(), Some(&[0xaa, 0xbb][..]));
        assert_eq!(s.server_traffic_0.as_deref(), Some(&[0xcc, 0xdd][..]));
        assert_eq!((s.server_handshake.is_none(), log.len()), (true, 1));
        assert!(log.get(&[2; 32]).is_none());
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = KeyLog::parse("CLIENT_HANDSHAKE_TRAFFIC_SECRET 0102 aabb\n").unwrap_err();
        assert!(e.starts_with("line 1: the client random"), "{e}");
        let e = KeyLog::parse("\nGET / HTTP/1.1\n").unwrap_err();
        assert!(e.starts_with("line 2: 3 fields") || e.starts_with("line 2: the client random"), "{e}");
        let e = KeyLog::parse(&format!("X {} zz\n", "00".repeat(32))).unwrap_err();
        assert!(e.contains("the secret is not hex"), "{e}");
    }
}
