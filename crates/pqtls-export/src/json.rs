//! JSON: the records as one array (the schema of docs/results-schema.md).

use crate::ResultSet;
use pqtls_core::{Error, Result};

/// The records as a pretty-printed JSON array.
pub fn render(set: &ResultSet) -> Result<String> {
    serde_json::to_string_pretty(&set.records).map_err(|e| Error::Other(format!("encoding records as JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::record::ConfigRecord;

    #[test]
    fn round_trips() {
        let set = crate::csv::tests::sample_set();
        let back: Vec<ConfigRecord> = serde_json::from_str(&render(&set).unwrap()).unwrap();
        assert_eq!(back.len(), set.records.len());
        for (a, b) in back.iter().zip(&set.records) {
            assert_eq!(a.config, b.config);
            assert_eq!(a.bytes, b.bytes);
            assert!((a.total_cpu_ns.median - b.total_cpu_ns.median).abs() <= 1e-9 * b.total_cpu_ns.median);
        }
    }
}
