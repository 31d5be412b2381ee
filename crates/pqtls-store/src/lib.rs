//! pqtls experiments and the results store.
//!
//! - [`experiment`]: experiment files (TOML): a matrix of factors, exclusions, extra points
//!   and measurement settings; validated with `file:line:column` errors; expanded into
//!   [`HandshakeConfig`](pqtls_core::config::HandshakeConfig)s in a deterministic order.
//! - [`store`]: one append-only directory per experiment (`records.ndjson`, `samples/`,
//!   `manifest.json`), resume after a crash, shards and merge.
//! - [`failures`]: the points a run could not measure, with the reason (`failures.ndjson`).
//!
//! The runner that fills a store is `pqtls_lab::run` (the store is its [`Sink`](pqtls_core::sink::Sink)).

#![forbid(unsafe_code)]

pub mod check;
pub mod experiment;
pub mod failures;
pub mod input;
pub mod merge;
pub mod shards;
pub mod store;

pub use experiment::{BaselineRule, Diagnostic, Diagnostics, Experiment, FactorLists, Matrix, Settings, Skipped};
pub use failures::{append_failure, read_failures, Failure, FAILURES};
pub use shards::merge_load_shards;
pub use store::{
    check, merge, read_manifest, read_records, read_samples, record_line, CheckReport, Manifest, MergeSummary,
    SampleLine, Shard, Store, StoreOptions, QUARANTINE,
};
