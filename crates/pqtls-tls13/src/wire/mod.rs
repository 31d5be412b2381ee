//! The TLS wire codec: what every pqtls crate reads of TLS 1.3 bytes, written once.
//!
//! - [`record`]: record framing — the 5-byte header, content types, whole records of a slice
//!   ([`Records`], with why a split stopped: a header or record cut short, bytes that are not
//!   TLS), record boundaries followed across writes ([`Boundaries`]);
//! - [`handshake`]: handshake messages — the 4-byte header, whole messages of a slice
//!   ([`messages`]), reassembly across records ([`Reassembler`]), the message types and their
//!   names ([`HsType`], a HelloRetryRequest told apart by [`HRR_RANDOM`]);
//! - [`hello`]: what is read from a ClientHello or ServerHello body (random, cipher suite,
//!   extensions, key shares).
//!
//! Nothing here allocates more than the messages it returns, and nothing panics on any input
//! (the store's fuzz test feeds it mutated records).

pub mod handshake;
pub mod hello;
pub mod record;

pub use handshake::{
    encode_message, handshake_messages, messages, CompressedHeader, HsType, Message, Messages, Reassembler, HRR_RANDOM,
    MESSAGE_HEADER_LEN,
};
pub use hello::{
    client_key_shares, encrypted_extensions, hello_extensions, hello_random, server_hello_suite, server_key_share,
    KEY_SHARE,
};
pub use record::{
    encode_records, looks_like_tls, Boundaries, Header, Record, Records, Stop, ALERT, APPLICATION_DATA,
    CHANGE_CIPHER_SPEC, HANDSHAKE, HEADER_LEN, HEARTBEAT, MAX_CIPHERTEXT_LEN, MAX_PLAINTEXT_LEN,
};

#[cfg(test)]
mod tests;
