//! Records as tables, each made in one place: a [`Table`] is a header and rows of cells
//! already formatted, which the Markdown and HTML reports and the `pqtls` terminal draw each in
//! their own way. One module per record kind — [`insitu`], [`load`], [`transfer`] — and the
//! layered study's ([`layers`]); here the number formats every cell is written with ([`us`],
//! [`signed_us`], [`delta_us`], [`ms`], [`rate`], [`pct`]) and the table of the points a run
//! could not measure (`failures`).

pub mod assessment;
pub mod insitu;
pub mod layers;
pub mod load;
pub mod resident;
pub mod transfer;

use pqtls_core::stats::Delta;
use pqtls_core::trace::CostUnit;
use pqtls_store::Failure;

/// A table: header and rows.
pub type Table = (Vec<String>, Vec<Vec<String>>);

/// A library's or server's version as a table names it: the name and version, without the
/// build line, the release date or the parenthesised details (`OpenSSL 3.5.5 27 Jan 2026
/// (pqtls build: ./Configure …)` → `OpenSSL 3.5.5 (pqtls build)`, `rustls 0.23.46 (aws-lc-rs
/// …)` → `rustls 0.23.46`). The environment section shows the whole text once.
pub fn short_version(text: &str) -> String {
    // Parenthesised details go when they are a build line or a list (`pqtls build: …`,
    // `aws-lc-rs 1.19.0, aws-lc-sys 0.47.0`); a short one that names a library stays
    // (`HAProxy 3.0.11 (OpenSSL 3.5.1)`).
    let mut out = String::new();
    let mut group = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                if depth == 1 {
                    group.clear();
                    continue;
                }
            }
            ')' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if group.len() <= 24 && !group.contains([':', ',', '(']) {
                        out += &format!("({group})");
                    }
                    continue;
                }
            }
            _ => {}
        }
        if depth == 0 {
            out.push(c);
        } else {
            group.push(c);
        }
    }
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let words: Vec<&str> = out.split_whitespace().collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let date = i + 2 < words.len()
            && words[i].len() <= 2
            && words[i].chars().all(|c| c.is_ascii_digit())
            && MONTHS.contains(&words[i + 1])
            && words[i + 2].len() == 4
            && words[i + 2].chars().all(|c| c.is_ascii_digit());
        if date {
            i += 3;
            continue;
        }
        kept.push(words[i]);
        i += 1;
    }
    let mut short = kept.join(" ");
    if text.contains("pqtls build") {
        short += " (pqtls build)";
    }
    short
}

/// The unit of an in-situ record's figures as its cells are written: thousands of
/// instructions are formatted as microseconds are (both are the raw value / 1000).
pub fn cost_unit(unit: CostUnit) -> &'static str {
    match unit {
        CostUnit::Ns => "µs",
        CostUnit::Instructions => "k instr",
    }
}

/// The in-situ sections of a report are written for CPU time; a set of instruction counts
/// gets the same sections with their words changed (`µs` → `k instr`, CPU time →
/// instructions): the numbers are formatted alike ([`cost_unit`]).
pub fn in_counts(text: &str) -> String {
    text.replace("µs", "k instr")
        .replace("handshake CPU time", "handshake instructions")
        .replace("CPU time", "Instructions")
        .replace("CPU per step", "Instructions per step")
        .replace("handshake CPU", "handshake instructions")
        .replace("median CPU", "median instructions")
}

/// Nanoseconds as microseconds with a sensible number of digits: none from 100 µs, 1 from
/// 10 µs, else 2; `–` when not finite.
pub fn us(ns: f64) -> String {
    decimals(ns / 1e3, &[(100.0, 0), (10.0, 1), (0.0, 2)])
}

/// A signed difference in µs ([`us`] with its sign): `+12.3`, `−4.56` (a minus sign, not a
/// hyphen).
pub fn signed_us(ns: f64) -> String {
    if !ns.is_finite() {
        us(ns)
    } else if ns < 0.0 {
        format!("−{}", us(-ns))
    } else {
        format!("+{}", us(ns))
    }
}

/// A difference with the half-width of its interval, µs: `+12.3 ± 4.56`.
pub fn delta_us(d: &Delta) -> String {
    format!("{} ± {}", signed_us(d.delta), us(d.half_width))
}

/// Nanoseconds as milliseconds: 3 decimals below 1 ms (sub-millisecond layers on loopback),
/// 2 below 100 ms, 1 from 100 ms; zero as `0.00`, `–` when not finite.
pub fn ms(ns: f64) -> String {
    if ns == 0.0 {
        return "0.00".into();
    }
    decimals(ns / 1e6, &[(100.0, 1), (1.0, 2), (0.0, 3)])
}

/// `x` with the decimals of the first `(from, decimals)` of `rule` whose `from` its magnitude
/// reaches (`rule` in decreasing `from`, the last from 0); `–` when not finite.
fn decimals(x: f64, rule: &[(f64, usize)]) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let d = rule.iter().find(|(from, _)| x.abs() >= *from).map_or(0, |(_, d)| *d);
    format!("{x:.d$}")
}

/// A relative change as a signed percentage, `–` when undefined (baseline 0).
pub fn pct(relative: f64) -> String {
    if relative.is_finite() {
        format!("{:+.1} %", relative * 100.0)
    } else {
        "–".into()
    }
}

/// A rate with thousands separated by a space (or `∞`).
pub fn rate(x: f64) -> String {
    if !x.is_finite() {
        return "∞".into();
    }
    thousands(&(x.round() as u64).to_string(), ' ')
}

/// A string of digits with `sep` between its thousands (`9454` → `9 454`).
pub fn thousands(digits: &str, sep: char) -> String {
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// The points the run could not measure (`failures.ndjson`), with the reason.
pub(crate) fn failures(list: &[Failure]) -> Table {
    let head = ["point", "measurement", "why not measured"].map(String::from).to_vec();
    let rows = list.iter().map(|f| vec![f.label.clone(), f.kind.clone(), f.error.clone()]).collect();
    (head, rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_version_is_named_without_its_build_line() {
        let openssl = "OpenSSL 3.5.5 27 Jan 2026 (pqtls build: ./Configure linux-x86_64 enable-ec_nistp_64_gcc_128 \
                       no-shared; compiler: gcc -O3; platform: linux-x86_64)";
        assert_eq!(super::short_version(openssl), "OpenSSL 3.5.5 (pqtls build)");
        assert_eq!(super::short_version("rustls 0.23.46 (aws-lc-rs 1.19.0, aws-lc-sys 0.47.0)"), "rustls 0.23.46");
        assert_eq!(super::short_version("HAProxy 3.0.11 (OpenSSL 3.5.1)"), "HAProxy 3.0.11 (OpenSSL 3.5.1)");
        assert_eq!(super::short_version("nginx 1.26.3"), "nginx 1.26.3");
    }

    use super::*;

    #[test]
    fn numbers_keep_three_significant_digits_or_more() {
        assert_eq!([us(1234.0), us(12_345.0), us(123_456.0), us(f64::NAN)], ["1.23", "12.3", "123", "–"]);
        assert_eq!([signed_us(-4560.0), signed_us(12_300.0), signed_us(0.0)], ["−4.56", "+12.3", "+0.00"]);
        let ms_of = |v: [f64; 5]| v.map(ms);
        assert_eq!(
            ms_of([352_000.0, 12_345_678.0, 150_340_000.0, 0.0, -2_000_000.0]),
            ["0.352", "12.35", "150.3", "0.00", "-2.00"]
        );
        assert_eq!(
            [rate(1_234_567.4), rate(f64::INFINITY), pct(0.123), pct(f64::NAN)],
            ["1 234 567", "∞", "+12.3 %", "–"]
        );
    }
}
