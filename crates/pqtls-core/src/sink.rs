//! Where the runner puts what it measured: a results store on disk, or memory (`insitu`).

use crate::error::Result;
use crate::record::{Measured, Record};

pub trait Sink {
    /// A complete record for this scenario id is already kept (it is not measured again). A
    /// record marked interrupted ([`Record::is_interrupted`]) does not count: its scenario is
    /// measured again.
    fn contains(&self, id: &str) -> bool;
    /// Keeps one result; `keep_samples`: its per-handshake samples too. Done (durably, for a
    /// store) before it returns. A result for an id held only as an interrupted record
    /// supersedes it.
    fn append(&mut self, measured: &Measured, keep_samples: bool) -> Result<()>;
    /// Every record kept so far, the last of each id (for baselines).
    fn records(&self) -> Result<Vec<Record>>;
}

/// Results kept in memory, in the order measured (a result that supersedes an interrupted
/// one of its id takes its place at the end).
#[derive(Debug, Default)]
pub struct MemorySink {
    pub measured: Vec<Measured>,
}

impl Sink for MemorySink {
    fn contains(&self, id: &str) -> bool {
        self.measured.iter().any(|m| m.record.id == id && !m.record.is_interrupted())
    }

    fn append(&mut self, measured: &Measured, keep_samples: bool) -> Result<()> {
        let mut m = measured.clone();
        if !keep_samples {
            m.samples.clear();
        }
        self.measured.retain(|x| x.record.id != m.record.id);
        self.measured.push(m);
        Ok(())
    }

    fn records(&self) -> Result<Vec<Record>> {
        Ok(self.measured.iter().map(|m| m.record.clone()).collect())
    }
}
