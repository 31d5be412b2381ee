//! Values with units, as users write them: durations (`50ms`), rates (`100mbit`), sizes
//! (`1KiB`), percentages (`0.5%`), request rates (`100/s`). Each parser returns the value in
//! the base unit and rejects what it cannot read exactly (no silent truncation), naming what
//! would work.

use crate::error::{Error, Result};

/// `--rate --duration 1s`: a flag where the value should be (numeric flags take values that
/// start with `-`, so that a negative number gets a clear answer; this is the other case).
fn not_a_flag(s: &str, what: &str, example: &str) -> Result<()> {
    if s.trim().starts_with("--") {
        return Err(Error::Invalid(format!("{what} '{s}' is a flag, not a value; give a value first, e.g. {example}")));
    }
    Ok(())
}

fn number(s: &str, what: &str, example: &str) -> Result<f64> {
    not_a_flag(s, what, example)?;
    let x: f64 =
        s.trim().parse().map_err(|_| Error::Invalid(format!("{what} '{s}' is not a number; e.g. {example}")))?;
    if !x.is_finite() || x < 0.0 {
        return Err(Error::Invalid(format!("{what} '{s}' must be a finite number ≥ 0; e.g. {example}")));
    }
    Ok(x)
}

/// Splits `50ms` into (`50`, `ms`).
fn split_unit(s: &str) -> (&str, &str) {
    let s = s.trim();
    let at = s.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(s.len());
    (s[..at].trim(), s[at..].trim())
}

/// The longest duration [`duration_ns`] reads: 7 days (a soak test of `serve` or `load`;
/// far inside u64 nanoseconds, which hold 584 years).
pub const MAX_DURATION_NS: u64 = 7 * 24 * 3600 * 1_000_000_000;

/// A duration in nanoseconds: `150ms`, `0.5ms`, `200us`, `1s`, `10min` (or `10m`), `2h`, `1d`,
/// `0`; at most [`MAX_DURATION_NS`] (7 days).
pub fn duration_ns(s: &str) -> Result<u64> {
    not_a_flag(s, "duration", "50ms")?;
    let (n, unit) = split_unit(s);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        "" if n.parse::<f64>() == Ok(0.0) => 1.0,
        other => {
            return Err(Error::Invalid(format!(
                "duration '{s}' has unit '{other}'; use ns, us, ms, s, min, h or d, e.g. 50ms or 2h"
            )))
        }
    };
    let ns = number(n, "duration", "50ms")? * scale;
    if ns > MAX_DURATION_NS as f64 {
        return Err(Error::Invalid(format!("duration '{s}' is over 7 days (7d), the longest pqtls takes; e.g. 2h")));
    }
    Ok(ns.round() as u64)
}

/// A link rate in bits per second: `100mbit`, `1gbit`, `10Mbit/s`, `500kbit`.
pub fn bits_per_s(s: &str) -> Result<u64> {
    not_a_flag(s, "rate", "100mbit")?;
    let (n, unit) = split_unit(s);
    let unit = unit.to_ascii_lowercase();
    let unit = unit.trim_end_matches("/s").trim_end_matches("ps");
    let scale = match unit {
        "bit" | "b" => 1.0,
        "kbit" | "k" => 1e3,
        "mbit" | "m" => 1e6,
        "gbit" | "g" => 1e9,
        other => {
            return Err(Error::Invalid(format!("rate '{s}' has unit '{other}'; use kbit, mbit or gbit, e.g. 100mbit")))
        }
    };
    let bps = number(n, "rate", "100mbit")? * scale;
    if !(1e3..=1e12).contains(&bps) {
        return Err(Error::Invalid(format!("rate '{s}' is outside 1kbit … 1000gbit; e.g. 100mbit")));
    }
    Ok(bps.round() as u64)
}

/// A size in bytes: `0`, `1024`, `1KiB`, `64KiB`, `1MiB`, `50kB` (SI: 1000).
pub fn bytes(s: &str) -> Result<u64> {
    not_a_flag(s, "size", "64KiB")?;
    let (n, unit) = split_unit(s);
    let scale: u64 = match unit {
        "" | "B" | "b" => 1,
        "KiB" | "kib" | "K" | "k" => 1 << 10,
        "MiB" | "mib" | "M" => 1 << 20,
        "GiB" | "gib" | "G" => 1 << 30,
        "kB" | "KB" => 1000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        other => {
            return Err(Error::Invalid(format!(
                "size '{s}' has unit '{other}'; use B, KiB, MiB, GiB, kB or MB, e.g. 64KiB"
            )))
        }
    };
    let x = number(n, "size", "64KiB")? * scale as f64;
    if x.fract() != 0.0 {
        return Err(Error::Invalid(format!("size '{s}' is not a whole number of bytes")));
    }
    if x > (1u64 << 40) as f64 {
        return Err(Error::Invalid(format!("size '{s}' is over 1 TiB")));
    }
    Ok(x as u64)
}

/// A fraction from a percentage: `0.5%` → 0.005. Written without `%` it is still percent
/// (`0.5` = 0.5 %), as every percentage in pqtls.
pub fn percent(s: &str) -> Result<f64> {
    let t = s.trim();
    let n = t.strip_suffix('%').unwrap_or(t);
    let x = number(n, "percentage", "0.5%")?;
    if x > 100.0 {
        return Err(Error::Invalid(format!("percentage '{s}' is over 100 %")));
    }
    Ok(x / 100.0)
}

/// A request rate per second: `100/s`, `5000`, `max` (closed loop: as fast as it goes) → None.
pub fn rate_per_s(s: &str) -> Result<Option<f64>> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("max") || t.eq_ignore_ascii_case("closed") {
        return Ok(None);
    }
    let n = t.strip_suffix("/s").unwrap_or(t);
    if n.trim().starts_with('-') && !n.trim().starts_with("--") {
        return Err(Error::Invalid(format!("rate '{s}' must be positive, e.g. 100/s (or max: a closed loop)")));
    }
    let x = number(n, "rate", "100/s or max")?;
    if x == 0.0 || x > 10_000_000.0 {
        return Err(Error::Invalid(format!("rate '{s}' must be between 0 and 10 000 000/s, or max")));
    }
    Ok(Some(x))
}

/// A positive count: `1`, `64`.
pub fn count(s: &str, what: &str, max: u64) -> Result<u64> {
    not_a_flag(s, what, "4")?;
    let n: u64 =
        s.trim().parse().map_err(|_| Error::Invalid(format!("{what} '{s}' must be a whole number from 1 to {max}")))?;
    if n == 0 || n > max {
        return Err(Error::Invalid(format!("{what} '{s}' must be a whole number from 1 to {max}")));
    }
    Ok(n)
}

/// `50ms`-style text of a duration (exact).
pub fn format_duration(ns: u64) -> String {
    if ns == 0 {
        "0ms".into()
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1000) {
        format!("{}us", ns / 1000)
    } else {
        format!("{ns}ns")
    }
}

/// `100mbit`-style text of a rate (exact).
pub fn format_bits(bps: u64) -> String {
    if bps.is_multiple_of(1_000_000_000) {
        format!("{}gbit", bps / 1_000_000_000)
    } else if bps.is_multiple_of(1_000_000) {
        format!("{}mbit", bps / 1_000_000)
    } else if bps.is_multiple_of(1000) {
        format!("{}kbit", bps / 1000)
    } else {
        format!("{bps}bit")
    }
}

/// `64KiB`-style text of a size (exact).
pub fn format_bytes(b: u64) -> String {
    if b != 0 && b.is_multiple_of(1 << 20) {
        format!("{}MiB", b >> 20)
    } else if b != 0 && b.is_multiple_of(1 << 10) {
        format!("{}KiB", b >> 10)
    } else {
        b.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_exactly_or_say_why() {
        assert_eq!(duration_ns("50ms").unwrap(), 50_000_000);
        assert_eq!(duration_ns("0.5ms").unwrap(), 500_000);
        assert_eq!(duration_ns("0").unwrap(), 0);
        assert!(duration_ns("50").unwrap_err().to_string().contains("unit"));
        assert!(duration_ns("-5ms").unwrap_err().to_string().contains("≥ 0"));
        assert!(duration_ns("50 parsecs").is_err());
        assert_eq!(duration_ns("2h").unwrap(), 7_200_000_000_000);
        assert_eq!(duration_ns("10min").unwrap(), duration_ns("10m").unwrap());
        assert_eq!(duration_ns("7d").unwrap(), MAX_DURATION_NS);
        assert!(duration_ns("8d").unwrap_err().to_string().contains("over 7 days"));
        assert!(duration_ns("1000000s").unwrap_err().to_string().contains("over 7 days"));
        assert!(duration_ns("--timeout").unwrap_err().to_string().contains("is a flag, not a value"));
        assert!(rate_per_s("-1/s").unwrap_err().to_string().contains("must be positive, e.g. 100/s"));
        assert_eq!(bits_per_s("100mbit").unwrap(), 100_000_000);
        assert_eq!(bits_per_s("1Gbit/s").unwrap(), 1_000_000_000);
        assert!(bits_per_s("100").is_err());
        assert_eq!(bytes("64KiB").unwrap(), 65536);
        assert_eq!(bytes("50kB").unwrap(), 50_000);
        assert!(bytes("1.5").is_err());
        assert_eq!(percent("0.5%").unwrap(), 0.005);
        assert_eq!(percent("1").unwrap(), 0.01);
        assert!(percent("101%").is_err());
        assert_eq!(rate_per_s("100/s").unwrap(), Some(100.0));
        assert_eq!(rate_per_s("max").unwrap(), None);
        assert!(rate_per_s("0/s").is_err());
        assert!(count("0", "threads", 256).is_err());
        assert_eq!(format_duration(duration_ns("150ms").unwrap()), "150ms");
        assert_eq!(format_bits(bits_per_s("1gbit").unwrap()), "1gbit");
        assert_eq!(format_bytes(bytes("150KiB").unwrap()), "150KiB");
    }
}
