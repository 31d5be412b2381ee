//! The one place that runs the system's network tools (`ip`, `tc`, `iptables`, `ethtool`,
//! `sysctl`) as processes: every error names the whole command line and its stderr.

use crate::error::{Error, Result};
use std::process::{Command, Stdio};

/// Runs `program args…` and returns its stdout; a failure (or a missing program) is an error
/// naming the command and what it printed on stderr.
pub fn run(program: &str, args: &[&str]) -> Result<String> {
    let line = || std::iter::once(program).chain(args.iter().copied()).collect::<Vec<_>>().join(" ");
    let out = Command::new(program).args(args).stdin(Stdio::null()).output().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            " (not installed? scripts/setup.sh installs iproute2, iptables and ethtool)"
        } else {
            ""
        };
        Error::Command { command: line(), status: "could not start".into(), stderr: format!("{e}{hint}") }
    })?;
    if !out.status.success() {
        let status = match out.status.code() {
            Some(c) => format!("exit code {c}"),
            None => "killed by a signal".into(),
        };
        return Err(Error::Command {
            command: line(),
            status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a tool inside network namespace `ns` (`ip netns exec ns program args…`).
pub fn run_in(ns: &str, program: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// `ip -n ns args…`.
pub fn ip(ns: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("ip", &all)
}

/// `tc -n ns args…`.
pub fn tc(ns: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    run("tc", &all)
}

/// `iptables -w args…` in `ns` (`-w`: wait for the xtables lock rather than fail).
pub fn iptables(ns: &str, args: &[&str]) -> Result<String> {
    let mut all = vec!["-w"];
    all.extend_from_slice(args);
    run_in(ns, "iptables", &all)
}

/// Sets a sysctl in `ns` and reads back the value in effect.
pub fn sysctl(ns: &str, key: &str, value: &str) -> Result<String> {
    run_in(ns, "sysctl", &["-q", "-w", &format!("{key}={value}")])?;
    Ok(run_in(ns, "sysctl", &["-n", key])?.split_whitespace().collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_name_the_command_and_its_stderr() {
        let e = super::run("sh", &["-c", "echo nope >&2; exit 3"]).unwrap_err().to_string();
        assert!(e.contains("sh -c echo nope >&2; exit 3"), "{e}");
        assert!(e.contains("exit code 3") && e.contains("nope"), "{e}");
        let e = super::run("pqtls-no-such-tool", &[]).unwrap_err().to_string();
        assert!(e.contains("pqtls-no-such-tool") && e.contains("could not start"), "{e}");
    }
}
