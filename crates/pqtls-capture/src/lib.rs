//! Packet captures of pqtls' transactions and what they show, independently of the client's
//! own clock: [`Capture`] runs tcpdump around a run; [`analyse`] follows every TCP connection
//! of a pcap/pcapng file from its SYN, reassembles both directions, opens the TLS 1.3 records
//! with a key log (`SSLKEYLOGFILE` format) and gives each HTTP transaction's moments as a
//! [`pqtls_core::timeline::Timeline`], whose `layers()` is the one layer split
//! (docs/layers.md). [`handshake_messages`] measures the handshake messages of any TLS 1.3
//! connection from the bytes each side sent and its secrets.

#![forbid(unsafe_code)]

pub mod analyse;
pub mod capture;
pub mod crosscheck;
mod http;
pub mod keylog;
pub mod pcap;
pub mod tcp;
pub mod tls;

pub use analyse::{analyse, analyse_with, Analysis, Anomalies, Connection, LayerSummary, Transaction};
pub use capture::{disable_offloads, Capture, CaptureStats};
pub use keylog::{KeyLog, Secrets};
pub use tls::handshake_messages;
