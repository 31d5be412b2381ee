//! Values of the command's own flags that clap reads: whole numbers with their range, listen
//! addresses, URL ports. Each error names the value and what would work (clap adds the flag).
//! Numeric flags accept a leading `-` (clap would call `-1` an unexpected argument), so that
//! a negative number is answered by what the flag takes.

use anyhow::{bail, Result};
use std::net::SocketAddr;

/// A whole number from `min` to `max` (a value parser for clap), e.g. `count(1, 1_000_000, "20")`.
pub fn count(min: u64, max: u64, example: &'static str) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s: &str| {
        let why = || match max {
            u64::MAX => format!("give a whole number ≥ {min}, e.g. {example}"),
            _ => format!("give a whole number from {min} to {max}, e.g. {example}"),
        };
        match s.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            Ok(_) => Err(format!("{s} is out of range: {}", why())),
            Err(_) if s.trim().starts_with('-') && s.trim()[1..].parse::<u64>().is_ok() => {
                Err(format!("a negative number: {}", why()))
            }
            Err(_) => Err(format!("not a whole number: {}", why())),
        }
    }
}

/// Like [`count`], for `usize` flags.
pub fn count_usize(min: usize, max: usize, example: &'static str) -> impl Fn(&str) -> Result<usize, String> + Clone {
    let c = count(min as u64, max as u64, example);
    move |s: &str| c(s).map(|n| n as usize)
}

/// Like [`count`], for `u32` flags.
pub fn count_u32(min: u32, max: u32, example: &'static str) -> impl Fn(&str) -> Result<u32, String> + Clone {
    let c = count(min as u64, max as u64, example);
    move |s: &str| c(s).map(|n| n as u32)
}

/// An address to listen on: `127.0.0.1:8443`, `[::1]:0` (0: a free port).
pub fn listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.trim().parse::<SocketAddr>() {
        return Ok(a);
    }
    let example = "e.g. 127.0.0.1:8443 or [::1]:0 (port 0: a free one)";
    match s.trim().rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            if port.parse::<u64>().is_ok() {
                if host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_err() {
                    return Err(format!("'{host}' is not an IP address; {example}"));
                }
                return Err(format!("port {port} is out of range 0–65535; {example}"));
            }
            Err(format!("port '{port}' is not a number; {example}"))
        }
        _ => Err(format!("give an IP address and a port; {example}")),
    }
}

/// The port of an `http(s)://host:port/…` URL is a number from 1 to 65535 (before the host is
/// looked up: a bad port is not a name-resolution failure).
pub fn url_port(url: &str) -> Result<()> {
    // Another scheme is the URL parser's to refuse.
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else { return Ok(()) };
    let authority = rest.split('/').next().unwrap_or("");
    let port = match authority.rfind(']') {
        Some(b) => authority[b + 1..].strip_prefix(':'),
        None => authority.rsplit_once(':').map(|(_, p)| p),
    };
    let Some(port) = port else { return Ok(()) };
    match port.parse::<u64>() {
        Ok(1..=65535) => Ok(()),
        Ok(p) => bail!("URL {url}: port {p} is out of range 1–65535; e.g. https://127.0.0.1:8443/1KiB"),
        Err(_) => bail!("URL {url}: port '{port}' is not a number; e.g. https://127.0.0.1:8443/1KiB"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_listen_addresses_and_ports_say_what_works() {
        let c = count(1, 100, "20");
        assert_eq!(c("20"), Ok(20));
        assert!(c("0").unwrap_err().contains("out of range: give a whole number from 1 to 100, e.g. 20"));
        assert!(c("-1").unwrap_err().contains("negative"));
        assert!(c("x").unwrap_err().contains("not a whole number"));
        assert!(c("99999999999999999999999").unwrap_err().contains("not a whole number"));
        assert_eq!(listen("127.0.0.1:0").unwrap().port(), 0);
        assert!(listen("127.0.0.1:70000").unwrap_err().contains("port 70000 is out of range 0–65535"));
        assert!(listen("[::1]:99999").unwrap_err().contains("port 99999 is out of range"));
        assert!(listen("localhost:8443").unwrap_err().contains("'localhost' is not an IP address"));
        assert!(listen("127.0.0.1:x").unwrap_err().contains("port 'x' is not a number"));
        assert!(listen("127.0.0.1").unwrap_err().contains("an IP address and a port"));
        assert!(url_port("https://127.0.0.1:8443/1KiB").is_ok());
        assert!(url_port("https://127.0.0.1/").is_ok());
        assert!(url_port("https://[::1]/").is_ok());
        let e = url_port("https://127.0.0.1:70000/").unwrap_err().to_string();
        assert!(e.contains("port 70000 is out of range 1–65535"), "{e}");
        assert!(url_port("https://[::1]:0/").unwrap_err().to_string().contains("port 0 is out of range"));
        assert!(url_port("http://127.0.0.1:https/").unwrap_err().to_string().contains("'https' is not a number"));
    }
}
