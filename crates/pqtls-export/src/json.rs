//! JSON: the records as one array (the schema of docs/results-schema.md), every kind,
//! schema-1 records upgraded to schema 2.

use crate::{Exporter, ReportOptions, ResultSet};
use pqtls_core::factor::Kind;
use pqtls_core::{Error, Result};

/// The `json` exporter: [`render`].
pub struct Json;

impl Exporter for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn describe(&self) -> &'static str {
        "JSON, the records as one array (schema 2, every record kind)"
    }
    fn kinds(&self) -> &'static [Kind] {
        &Kind::ALL
    }
    fn render(&self, set: &ResultSet, _opts: &ReportOptions) -> Result<String> {
        render(set)
    }
}

/// The records as a pretty-printed JSON array.
pub fn render(set: &ResultSet) -> Result<String> {
    serde_json::to_string_pretty(&set.records).map_err(|e| Error::Other(format!("encoding records as JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::record::Record;

    #[test]
    fn round_trips() {
        let set = crate::csv::tests::sample_set();
        let back: Vec<Record> = serde_json::from_str(&render(&set).unwrap()).unwrap();
        assert_eq!(back.len(), set.records.len());
        for (a, b) in back.iter().zip(&set.records) {
            assert_eq!(a.scenario, b.scenario);
            let (a, b) = (a.insitu().unwrap(), b.insitu().unwrap());
            assert_eq!(a.bytes, b.bytes);
            assert!((a.total_cpu_ns.median - b.total_cpu_ns.median).abs() <= 1e-9 * b.total_cpu_ns.median);
        }
    }
}
