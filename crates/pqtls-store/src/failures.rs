//! Points of a run that were not measured, with the reason (`failures.ndjson` beside
//! `records.ndjson`): e.g. a link the machine cannot emulate faithfully (1 Gbit/s on 2 cores),
//! refused with its measured values. The runner skips such a point with `keep_going` and never
//! stores a record for it, so without this file a report could not say it is missing.
//!
//! One JSON object a line ([`Failure`]); appended by whoever runs the plan (e.g. on
//! `pqtls_lab::Event::Failed`), read by the reports ([`read_failures`]). A point measured
//! later (a resumed run) has a record: readers leave out failures whose id has one.

use indexmap::IndexMap;
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::Path;

/// The file of a results directory that lists its failed points.
pub const FAILURES: &str = "failures.ndjson";

/// A point that was not measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The scenario's id and label (as its record would have had them).
    pub id: String,
    pub label: String,
    /// The measurement (`transfer`, `load`, …).
    pub kind: String,
    /// The scenario's canonical factor values.
    #[serde(default)]
    pub scenario: IndexMap<String, String>,
    /// Why: the error as the run reported it (a refused link: each failed check with its
    /// measured value and what would work).
    pub error: String,
    /// Unix time, seconds.
    #[serde(default)]
    pub at: u64,
}

/// Appends one failure to `dir/failures.ndjson` (created when missing).
pub fn append_failure(dir: &Path, failure: &Failure) -> Result<()> {
    let path = dir.join(FAILURES);
    let mut line =
        serde_json::to_vec(failure).map_err(|e| Error::Other(format!("encoding a failure of {}: {e}", failure.id)))?;
    line.push(b'\n');
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    f.write_all(&line).map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// The failures of a results directory (none when it has no `failures.ndjson`), the last one
/// of each id only, and notices for lines that could not be read (skipped, not fatal: a
/// report is still made).
pub fn read_failures(dir: &Path) -> Result<(Vec<Failure>, Vec<String>)> {
    let path = dir.join(FAILURES);
    let Some(text) = crate::input::read_text(&path, "the failures file", crate::input::RECORDS_LIMIT_BYTES)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let mut out: Vec<Failure> = Vec::new();
    let mut notices = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Failure>(line) {
            Ok(f) => match out.iter_mut().find(|x| x.id == f.id) {
                Some(x) => *x = f,
                None => out.push(f),
            },
            Err(e) => notices.push(format!("{}:{}: ignored a line that is not a failure: {e}", path.display(), i + 1)),
        }
    }
    Ok((out, notices))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_append_and_read_back_the_last_of_each_id() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_failures(dir.path()).unwrap(), (Vec::new(), Vec::new()));
        let f = |id: &str, error: &str| Failure {
            id: id.into(),
            label: format!("label of {id}"),
            kind: "transfer".into(),
            scenario: IndexMap::new(),
            error: error.into(),
            at: 1,
        };
        append_failure(dir.path(), &f("a", "first")).unwrap();
        append_failure(dir.path(), &f("b", "rate asked 1000.00 Mbit/s measured 310.00 Mbit/s")).unwrap();
        append_failure(dir.path(), &f("a", "second")).unwrap();
        let mut file = fs::OpenOptions::new().append(true).open(dir.path().join(FAILURES)).unwrap();
        file.write_all(b"{not json\n").unwrap();
        let (got, notices) = read_failures(dir.path()).unwrap();
        assert_eq!(got, vec![f("a", "second"), f("b", "rate asked 1000.00 Mbit/s measured 310.00 Mbit/s")]);
        assert_eq!(notices.len(), 1);
        assert!(notices[0].contains("failures.ndjson:4"), "{notices:?}");
    }
}
