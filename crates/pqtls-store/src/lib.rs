//! pqtls experiments, results store and runner.
//!
//! - [`experiment`]: experiment files (TOML): a matrix of factors, exclusions, extra points
//!   and measurement settings; validated with `file:line:column` errors; expanded into
//!   [`HandshakeConfig`](pqtls_core::config::HandshakeConfig)s in a deterministic order.
//! - [`store`]: one append-only directory per experiment (`records.ndjson`, `samples/`,
//!   `manifest.json`), resume after a crash, shards and merge.
//! - [`synthetic`]: made-up records for tests and demos of the exporters (never results).
//! - [`runner`]: [`runner::run`] measures what the store lacks through a closure the CLI
//!   supplies, with a progress bar and a clean stop on an interrupt flag.
//!
//! The CLI wires it like this (the measurement itself lives in `pqtls-lab`):
//!
//! ```no_run
//! use pqtls_store::{Experiment, Store, StoreOptions, RunOptions, Measured, run};
//! # fn measure_with_lab(_: &pqtls_core::config::HandshakeConfig, _: &pqtls_store::Settings)
//! #     -> pqtls_core::Result<Measured> { Err(pqtls_core::Error::Other("not in this example".into())) }
//! # fn main() -> pqtls_core::Result<()> {
//! let exp = Experiment::load("experiments/default.toml".as_ref())?;
//! let opts = RunOptions::default();
//! let dir = Store::dir_for("results".as_ref(), &exp, opts.shard);
//! let mut store = Store::open(&dir, &exp, &StoreOptions { fresh: false, shard: opts.shard, env: None })?;
//! let summary = run(&exp, &mut store, &opts, &mut |cfg, settings| measure_with_lab(cfg, settings))?;
//! eprintln!("{} measured, {} already there", summary.measured, summary.already_done);
//! # Ok(()) }
//! ```

pub mod experiment;
pub mod runner;
pub mod store;
pub mod synthetic;

pub use experiment::{BaselineRule, Diagnostic, Diagnostics, Experiment, Mode, Settings, Skipped, FACTORS};
pub use runner::{run, MeasureFn, Measured, Progress, RunOptions, RunSummary};
pub use store::{
    merge, read_manifest, read_records, read_samples, Manifest, MergeSummary, SampleLine, Shard, Store, StoreOptions,
};
