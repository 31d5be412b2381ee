//! Terminal tables: export's tables of a record kind ([`pqtls_export::tables`]) drawn with
//! comfy_table, and the CLI's own tables drawn the same way.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};
use pqtls_export::tables::insitu::{self, Substeps};
use pqtls_export::InsituView;

/// Export's number formats, for the CLI's own tables.
pub use pqtls_export::tables::{signed_us, us};

pub fn new(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    t
}

/// Right-aligns every column from `from` on (numbers).
pub fn numeric_from(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// One of export's tables drawn, its columns from `numbers_from` on right-aligned.
pub fn draw((head, rows): &pqtls_export::tables::Table, numbers_from: usize) -> String {
    let mut t = new(&head.iter().map(String::as_str).collect::<Vec<_>>());
    for row in rows {
        t.add_row(row.clone());
    }
    numeric_from(&mut t, numbers_from);
    t.to_string()
}

/// Lines under a table, each as `note: …`.
pub fn notes(lines: &[String]) -> String {
    lines.iter().map(|n| format!("note: {n}\n")).collect()
}

/// One configuration's result as text: what was negotiated, the per-step table with
/// quantiles, and the lines under it (noise, warnings, bytes, baseline).
pub fn record(rec: &pqtls_core::record::Record) -> String {
    let heading = format!("== {} · {} ==", rec.factor("stack"), rec.label);
    let Some(r) = InsituView::of(rec) else {
        return format!("\n{heading} ({} record)\n", rec.kind().name());
    };
    let what = match &r.loops.counter {
        Some(c) => format!("Instructions per step ({} {}; k instr = thousands)", c.source, c.version),
        None => "CPU time per step (thread CPU clock)".to_string(),
    };
    let mut s =
        format!("\n{heading}\n{}\n{what}\n{}\n", insitu::negotiated(&r), draw(&insitu::steps(&r, Substeps::Left), 2));
    for line in insitu::notes(&r) {
        s.push_str(&line);
        s.push('\n');
    }
    if let (Some(t), Some(note)) = (insitu::memory(&r), insitu::memory_note(&r)) {
        s.push_str(&format!("Heap per step (means per handshake)\n{}\n{note}\n", draw(&t, 2)));
    }
    s
}
