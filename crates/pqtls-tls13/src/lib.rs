//! The TLS 1.3 wire, written once for every pqtls crate that reads it.
//!
//! - [`wire`]: the codec — record framing (the 5-byte header, content types, lengths,
//!   records cut short, record boundaries across writes), handshake messages (the 4-byte
//!   header, reassembly across records, several per record), message types and names
//!   (HelloRetryRequest told apart by its random), and the small readers of what pqtls takes
//!   from a ClientHello or ServerHello (extensions, key shares, random, cipher suite). No
//!   dependencies: pqtls-core uses it with `default-features = false`.
//! - with the default `protect` feature, record protection on aws-lc-rs: HKDF-Expand-Label,
//!   traffic keys (`Suite`, `expand_label`, `next_traffic_secret`), record openers (`Opener`),
//!   and the sizes of the handshake messages a side wrote, decrypted with its own traffic
//!   secrets (`WireScan`, for the rustls and s2n-tls backends).
//!
//! Users: pqtls-core (message types for traces, record counts, the plaintext hello readers),
//! the rustls backend (sizes of the messages it wrote, the transcript's message marks) and
//! the capture analyser (both directions of a captured connection).

#![forbid(unsafe_code)]

pub mod wire;

#[cfg(feature = "protect")]
mod protect;
#[cfg(feature = "protect")]
mod scan;
#[cfg(feature = "protect")]
pub use protect::{expand_label, next_traffic_secret, Opener, Suite, SUITES};
#[cfg(feature = "protect")]
pub use scan::WireScan;
