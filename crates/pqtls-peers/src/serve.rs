//! `pqtls serve` as a terminator beside nginx and HAProxy: started as a child process for a
//! scenario (`pqtls serve --memory`, its heap counted), for the resident measurement
//! (`pqtls_net::shared::ResidentServers`).

use crate::process::Supervised;
use pqtls_core::factor::{Class, FACTORS};
use pqtls_core::scenario::Scenario;
use pqtls_core::{Error, Result};
use pqtls_net::shared::{ProcessReading, RunningTerminator};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Starts `pqtls serve --memory` (the `pqtls` executable at `program`) for a scenario, in a
/// process group of its own that dies with this process.
pub struct ServeChild {
    program: PathBuf,
    pki: PathBuf,
}

impl ServeChild {
    /// `program`: the `pqtls` executable (the command's own); `pki`: the PKI cache it serves from.
    pub fn new(program: PathBuf, pki: &Path) -> ServeChild {
        ServeChild { program, pki: pki.to_path_buf() }
    }
}

/// A `pqtls serve` started by [`ServeChild`]; stopped when dropped.
struct ServeProcess {
    process: Option<Supervised>,
    addr: SocketAddr,
    version: String,
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            let _ = p.stop(Duration::from_secs(5));
        }
    }
}

impl RunningTerminator for ServeProcess {
    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn describe(&self) -> pqtls_core::load::Terminator {
        pqtls_core::load::Terminator { name: "pqtls".into(), version: self.version.clone(), backend: None }
    }

    fn processes(&self) -> Option<ProcessReading> {
        let p = self.process.as_ref()?;
        let (rss_bytes, pss_bytes) = p.memory();
        Some(ProcessReading {
            processes: p.alive().len() as u32,
            cpu_ns: p.cpu_ns(),
            tick_ns: crate::process::ns_per_tick(),
            rss_bytes,
            pss_bytes,
        })
    }
}

impl pqtls_net::shared::ResidentServers for ServeChild {
    fn serve(&self, scenario: &Scenario, connections: u64) -> Result<Box<dyn RunningTerminator>> {
        let mut cmd = std::process::Command::new(&self.program);
        let hold_s = crate::forward::HOLD_IDLE_S;
        cmd.args(["serve", "--memory", "--listen", "127.0.0.1:0", "--workers", "1"])
            .arg("--max-connections")
            .arg((connections + 64).to_string())
            .arg(format!("--idle-timeout={hold_s}s"))
            .arg("--pki")
            .arg(&self.pki);
        // The scenario's handshake, as serve's factor flags (the values serve applies).
        for f in FACTORS {
            let v = &scenario.values()[f.name];
            if matches!(f.class, Class::Handshake | Class::Clock) && Some(v.as_str()) != f.default {
                cmd.arg(format!("--{}={}", f.flag(), v.replace(',', "+")));
            }
        }
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit());
        let mut process = Supervised::spawn(&mut cmd, "pqtls serve")?;
        let stdout = process.take_stdout().ok_or_else(|| Error::Other("pqtls serve: no standard output".into()))?;
        let mut line = String::new();
        // serve prints the address it bound first, once it listens.
        let read = BufReader::new(stdout).read_line(&mut line);
        let addr: SocketAddr = match read {
            Ok(n) if n > 0 => line.trim().parse().map_err(|_| {
                Error::Other(format!("pqtls serve printed {:?}, not the address it listens on", line.trim()))
            })?,
            _ => {
                let _ = process.kill();
                return Err(Error::Other("pqtls serve exited before listening (its errors are above)".into()));
            }
        };
        Ok(Box::new(ServeProcess {
            process: Some(process),
            addr,
            version: format!("pqtls serve --memory ({})", scenario.handshake.stack),
        }))
    }
}
