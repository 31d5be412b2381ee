//! Where the runner puts what it measured: a results store on disk, or memory (`insitu`).

use crate::error::Result;
use crate::record::{Measured, Record};

pub trait Sink {
    /// A record for this scenario id is already kept (it is not measured again).
    fn contains(&self, id: &str) -> bool;
    /// Keeps one result; `keep_samples`: its per-handshake samples too. Done (durably, for a
    /// store) before it returns.
    fn append(&mut self, measured: &Measured, keep_samples: bool) -> Result<()>;
    /// Every record kept so far (for baselines).
    fn records(&self) -> Result<Vec<Record>>;
}

/// Results kept in memory, in the order measured.
#[derive(Debug, Default)]
pub struct MemorySink {
    pub measured: Vec<Measured>,
}

impl Sink for MemorySink {
    fn contains(&self, id: &str) -> bool {
        self.measured.iter().any(|m| m.record.id == id)
    }

    fn append(&mut self, measured: &Measured, keep_samples: bool) -> Result<()> {
        let mut m = measured.clone();
        if !keep_samples {
            m.samples.clear();
        }
        self.measured.push(m);
        Ok(())
    }

    fn records(&self) -> Result<Vec<Record>> {
        Ok(self.measured.iter().map(|m| m.record.clone()).collect())
    }
}
