//! The QUIC transport settings pqtls changes from quinn's defaults, on either side: the
//! congestion controller's initial window (what `initcwnd` maps to over QUIC: N × the initial
//! datagram size) and the initial MTU (the size of the client's Initial datagrams, and so of
//! the server's 3× anti-amplification budget). `None`: quinn's default
//! ([`pqtls_core::roundtrip_quic`] states them). And address-validation tokens (RFC 9000
//! §8.1.3): the server sends NEW_TOKEN frames and the client offers one on its next connection,
//! whose address is then valid from its first packet — no 3× limit ([`UsedTokens`]).

use pqtls_core::roundtrip_quic::{MIN_INITIAL_DATAGRAM_BYTES, QUINN_INITIAL_WINDOW_BYTES};
use pqtls_core::{Error, Result};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// UDP payload of the largest datagram the lab's links carry (1,500 MTU − 20 IPv4 − 8 UDP).
pub const MAX_LAB_DATAGRAM_BYTES: u64 = 1472;

/// quinn settings of one side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Cubic's initial window, bytes.
    pub initial_window_bytes: Option<u64>,
    /// `TransportConfig::initial_mtu`, bytes of UDP payload (at least 1,200).
    pub initial_mtu_bytes: Option<u16>,
    /// Address-validation tokens: the server sends [`TOKENS_SENT`] per connection
    /// ([`Tuning::validation_tokens`]); the client keeps them across its connections (the load
    /// generator's shared token store). `false`: quinn's default without its `bloom` feature —
    /// no tokens, every connection a first contact.
    pub address_tokens: bool,
}

/// NEW_TOKEN frames a server with `address_tokens` sends per connection (quinn's default with
/// its `bloom` feature): one for the client's next connection, one to spare.
pub const TOKENS_SENT: u32 = 2;

/// The server's record of the tokens used, exact: a token is valid once. (quinn's
/// `BloomTokenLog` may refuse a token never used — a false positive — and so put a connection
/// back under the 3× limit at random: a lab measuring that limit must not.) It holds one nonce
/// per connection of the server's life.
#[derive(Default)]
pub struct UsedTokens(Mutex<HashSet<u128>>);

impl quinn::TokenLog for UsedTokens {
    fn check_and_insert(
        &self,
        nonce: u128,
        _issued: SystemTime,
        _lifetime: Duration,
    ) -> std::result::Result<(), quinn::TokenReuseError> {
        let mut used = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if used.insert(nonce) {
            Ok(())
        } else {
            Err(quinn::TokenReuseError)
        }
    }
}

impl Tuning {
    /// `initcwnd` (segments, the TCP factor) as quinn's initial window: N × the initial datagram
    /// size (1,200 bytes unless `initial_mtu_bytes` says otherwise). `None` keeps quinn's default
    /// (12,000 bytes).
    pub fn with_initcwnd(self, initcwnd: Option<u64>) -> Result<Tuning> {
        match initcwnd {
            None => Ok(self),
            Some(0) => {
                Err(Error::Invalid("initcwnd 0 would never send; e.g. 10 (quinn's default is 10 × 1,200 bytes)".into()))
            }
            Some(n) => Ok(Tuning { initial_window_bytes: Some(n.saturating_mul(self.datagram_bytes())), ..self }),
        }
    }

    /// The datagram size the windows count in.
    pub fn datagram_bytes(&self) -> u64 {
        self.initial_mtu_bytes.map_or(MIN_INITIAL_DATAGRAM_BYTES, u64::from)
    }

    /// The initial window in effect, bytes.
    pub fn window_bytes(&self) -> u64 {
        self.initial_window_bytes.unwrap_or(QUINN_INITIAL_WINDOW_BYTES)
    }

    /// Refuses what quinn would change silently (an MTU below 1,200 is raised to it) or the
    /// lab cannot carry.
    pub fn validate(&self) -> Result<()> {
        if let Some(m) = self.initial_mtu_bytes {
            if u64::from(m) < MIN_INITIAL_DATAGRAM_BYTES || u64::from(m) > MAX_LAB_DATAGRAM_BYTES {
                return Err(Error::Invalid(format!(
                    "a QUIC initial MTU of {m} bytes: give {MIN_INITIAL_DATAGRAM_BYTES} (RFC 9000's minimum, quinn's \
                     default) to {MAX_LAB_DATAGRAM_BYTES} (a 1,500-byte link's UDP payload)"
                )));
            }
        }
        Ok(())
    }

    /// The server's address-validation token settings: [`TOKENS_SENT`] tokens per connection,
    /// checked against [`UsedTokens`], with `address_tokens`; none otherwise.
    pub fn validation_tokens(&self) -> quinn::ValidationTokenConfig {
        let mut v = quinn::ValidationTokenConfig::default();
        if self.address_tokens {
            v.log(Arc::new(UsedTokens::default())).sent(TOKENS_SENT);
        } else {
            v.sent(0);
        }
        v
    }

    /// The client's token store for a run with `address_tokens`: one for all its connections
    /// (quinn's `TokenMemoryCache`: the last two tokens per server name); `None` otherwise.
    pub fn token_store(&self) -> Option<Arc<dyn quinn::TokenStore>> {
        self.address_tokens.then(|| Arc::new(quinn::TokenMemoryCache::default()) as Arc<dyn quinn::TokenStore>)
    }

    /// quinn's transport configuration with these settings.
    pub fn transport(&self) -> quinn::TransportConfig {
        let mut t = quinn::TransportConfig::default();
        if let Some(w) = self.initial_window_bytes {
            let mut cubic = quinn::congestion::CubicConfig::default();
            cubic.initial_window(w);
            t.congestion_controller_factory(Arc::new(cubic));
        }
        if let Some(m) = self.initial_mtu_bytes {
            t.initial_mtu(m);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initcwnd_is_counted_in_initial_datagrams() {
        let t = Tuning::default().with_initcwnd(Some(4)).unwrap();
        assert_eq!(t.initial_window_bytes, Some(4_800));
        let big = Tuning { initial_mtu_bytes: Some(1452), ..Tuning::default() }.with_initcwnd(Some(10)).unwrap();
        assert_eq!(big.window_bytes(), 14_520);
        assert_eq!(Tuning::default().with_initcwnd(None).unwrap().window_bytes(), QUINN_INITIAL_WINDOW_BYTES);
        let e = Tuning::default().with_initcwnd(Some(0)).unwrap_err().to_string();
        assert!(e.contains("initcwnd 0") && e.contains("e.g. 10"), "{e}");
        let e = Tuning { initial_mtu_bytes: Some(1000), ..Tuning::default() }.validate().unwrap_err().to_string();
        assert!(e.contains("1000 bytes") && e.contains("1200"), "{e}");
    }

    #[test]
    fn a_token_is_valid_once() {
        use quinn::TokenLog;
        let log = UsedTokens::default();
        let (now, life) = (SystemTime::now(), Duration::from_secs(60));
        assert!(log.check_and_insert(7, now, life).is_ok());
        assert!(log.check_and_insert(8, now, life).is_ok());
        assert!(log.check_and_insert(7, now, life).is_err(), "a token used twice");
    }
}
