//! The drivers' former home: everything moved to [`crate::transport`]. These names stay so
//! that callers can move at their own pace.

pub use crate::transport::{handshake, in_memory, over_stream, Exchange, Handshake};
