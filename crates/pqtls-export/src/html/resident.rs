//! The resident records' part of the HTML report: memory per idle connection and connections
//! per GiB, the rules of thumb per chain, every reading.

use super::{escape, table};
use crate::analysis::resident::ResidentView;
use crate::tables::resident as t;
use std::fmt::Write;

/// The resident records' sections.
pub(super) fn sections(out: &mut String, all: &[ResidentView]) {
    let _ = writeln!(
        out,
        "<section id=\"resident\"><h2>Resident: memory per idle connection</h2>\n<p>{} resident records.</p>\n\
         <p class=\"note\">{}</p>",
        all.len(),
        escape(t::NOTE)
    );
    table(out, &t::summary(all));
    let rules = t::rules_of_thumb(all);
    if !rules.is_empty() {
        out.push_str("<h3>Rules of thumb per chain</h3><ul>");
        for r in rules {
            let _ = write!(out, "<li>{}</li>", escape(&r));
        }
        out.push_str("</ul>");
    }
    out.push_str("<details><summary>Every reading</summary>");
    table(out, &t::readings(all));
    out.push_str("</details>");
    let notes = t::notes(all);
    if !notes.is_empty() {
        out.push_str("<ul class=\"note\">");
        for n in notes {
            let _ = write!(out, "<li>{}</li>", escape(&n));
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>\n");
}
