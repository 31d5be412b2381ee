//! The QUIC transport settings pqtls changes from quinn's defaults, on either side: the
//! congestion controller's initial window (what `initcwnd` maps to over QUIC: N × the initial
//! datagram size) and the initial MTU (the size of the client's Initial datagrams, and so of
//! the server's 3× anti-amplification budget). `None`: quinn's default
//! ([`pqtls_core::roundtrip_quic`] states them).

use pqtls_core::roundtrip_quic::{MIN_INITIAL_DATAGRAM_BYTES, QUINN_INITIAL_WINDOW_BYTES};
use pqtls_core::{Error, Result};
use std::sync::Arc;

/// UDP payload of the largest datagram the lab's links carry (1,500 MTU − 20 IPv4 − 8 UDP).
pub const MAX_LAB_DATAGRAM_BYTES: u64 = 1472;

/// quinn settings of one side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Cubic's initial window, bytes.
    pub initial_window_bytes: Option<u64>,
    /// `TransportConfig::initial_mtu`, bytes of UDP payload (at least 1,200).
    pub initial_mtu_bytes: Option<u16>,
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
}
