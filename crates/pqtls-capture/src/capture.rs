//! A packet capture running while transactions happen: `tcpdump` on one interface (in a
//! network namespace if asked), writing pcap with nanosecond timestamps, packet-buffered
//! (`-U`) and in immediate mode, to a pipe that this crate copies into the file (so the file
//! is the caller's, whatever user tcpdump drops its privileges to).
//!
//! [`Capture::start`] returns once tcpdump says it is listening (its filter is installed);
//! [`Capture::stop`] lets the last packets drain, stops tcpdump with SIGINT (it flushes and
//! prints its counters), and returns the counters, including the packets the kernel dropped.
//! Dropping a [`Capture`] without `stop` (an error, a panic) stops tcpdump too: no process is
//! left behind.
//!
//! Offloads: on a veth or physical interface that the lab controls (its namespaces),
//! [`disable_offloads`] turns TSO/GSO/GRO off so that the capture sees the segments that
//! are on the wire. Loopback is left as it is (it is shared with everything else on the
//! machine): there the kernel hands whole writes of up to 64 KiB over as one "segment", which
//! changes packet counts but not the moments the analysis uses (the first segment of a write
//! is captured when the write happens).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use pqtls_core::{Error, Result};
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Snap length: whole packets — an IP packet is at most 65535 bytes (a 64 KiB loopback or
/// GSO segment), plus its link header. Not more: in immediate mode the kernel's ring holds
/// buffer / snap length packets.
pub const SNAPLEN_BYTES: u32 = 65_600;
/// The kernel capture buffer, KiB (tcpdump -B): 32 MiB hold ~500 whole 64 KiB segments, so a
/// tcpdump descheduled for a while on a busy machine does not make the kernel drop packets
/// (its default 2 MiB held 8 at the snap length above, and dropped).
pub const BUFFER_KIB: u32 = 32 * 1024;
/// How long tcpdump may take to start listening.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long tcpdump may take to exit after SIGINT before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What tcpdump counted, from its exit report.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CaptureStats {
    /// Packets written to the file.
    pub captured: u64,
    /// Packets that matched the filter.
    pub received_by_filter: u64,
    /// Packets the kernel dropped because tcpdump did not read them in time: when not 0, the
    /// capture misses packets (the analysis then finds gaps).
    pub dropped_by_kernel: u64,
    /// Bytes written to the file.
    pub file_bytes: u64,
    /// tcpdump's own words (its stderr), for the record.
    pub report: Vec<String>,
}

/// A running tcpdump.
pub struct Capture {
    child: Option<Child>,
    path: PathBuf,
    copier: Option<JoinHandle<std::io::Result<u64>>>,
    written: Arc<AtomicU64>,
    stderr: Option<JoinHandle<Vec<String>>>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("path", &self.path).field("pid", &self.child.as_ref().map(Child::id)).finish()
    }
}

fn tcpdump_command(interface: &str, netns: Option<&str>, filter: &str) -> Command {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "tcpdump"]);
            c
        }
        None => Command::new("tcpdump"),
    };
    cmd.args(["-i", interface, "-U", "--immediate-mode", "-n", "--time-stamp-precision=nano"])
        .args(["-s", &SNAPLEN_BYTES.to_string(), "-B", &BUFFER_KIB.to_string(), "-w", "-"])
        .arg(filter)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

impl Capture {
    /// Starts capturing the packets on `interface` (in network namespace `netns`, if given)
    /// that match the BPF `filter` (e.g. `tcp port 8443`) into `pcap` (created or
    /// truncated). Returns when tcpdump is listening. Errors name what went wrong: tcpdump
    /// missing (scripts/setup.sh installs it), no permission (capturing needs root or
    /// CAP_NET_RAW), an unknown interface or a bad filter (tcpdump's own message).
    pub fn start(interface: &str, netns: Option<&str>, filter: &str, pcap: &Path) -> Result<Capture> {
        let mut file =
            File::create(pcap).map_err(|e| Error::io(format!("creating the capture file {}", pcap.display()), e))?;
        let mut child = tcpdump_command(interface, netns, filter).spawn().map_err(|e| {
            let what = if netns.is_some() { "ip netns exec … tcpdump" } else { "tcpdump" };
            if e.kind() == std::io::ErrorKind::NotFound {
                Error::Unsupported(format!("{what} is not installed (scripts/setup.sh installs tcpdump): {e}"))
            } else {
                Error::io(format!("starting {what}"), e)
            }
        })?;
        let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::Other("tcpdump's output pipes are missing".into()));
        };
        let written = Arc::new(AtomicU64::new(0));
        let counter = written.clone();
        let copier = std::thread::spawn(move || -> std::io::Result<u64> {
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = match stdout.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                };
                file.write_all(&buf[..n])?;
                counter.fetch_add(n as u64, Ordering::Relaxed);
            }
            file.flush()?;
            file.sync_data()?;
            Ok(counter.load(Ordering::Relaxed))
        });
        let (tx, rx) = mpsc::channel();
        let stderr = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                let _ = tx.send(line.clone());
                lines.push(line);
            }
            lines
        });
        let mut capture = Capture {
            child: Some(child),
            path: pcap.to_path_buf(),
            copier: Some(copier),
            written,
            stderr: Some(stderr),
        };
        capture.wait_listening(&rx, interface, netns, filter)?;
        Ok(capture)
    }

    fn wait_listening(
        &mut self,
        rx: &Receiver<String>,
        interface: &str,
        netns: Option<&str>,
        filter: &str,
    ) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        let mut said = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.contains("listening on") => return Ok(()),
                Ok(line) => said.push(line),
                Err(RecvTimeoutError::Timeout) => {
                    self.shutdown();
                    return Err(Error::Other(format!(
                        "tcpdump did not start listening on {interface} within {} s{}",
                        START_TIMEOUT.as_secs(),
                        if said.is_empty() { String::new() } else { format!(": {}", said.join(" / ")) }
                    )));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.shutdown();
                    let ns = netns.map_or(String::new(), |n| format!(" in namespace {n}"));
                    let hint = if said.iter().any(|l| l.contains("ermission")) {
                        " (capturing needs root or CAP_NET_RAW)"
                    } else {
                        ""
                    };
                    return Err(Error::Invalid(format!(
                        "tcpdump could not capture on {interface}{ns} with filter '{filter}'{hint}: {} ({status})",
                        said.join(" / ")
                    )));
                }
            }
        }
    }

    /// tcpdump's process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The capture file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops the capture: waits until no packet has arrived for 100 ms (at most 2 s, so that
    /// the packets the kernel has queued reach the file), stops tcpdump with SIGINT, waits
    /// for it (it is killed after 5 s), and returns its counters.
    pub fn stop(mut self) -> Result<CaptureStats> {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut last = self.written.load(Ordering::Relaxed);
        let mut quiet = 0;
        while quiet < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.written.load(Ordering::Relaxed);
            quiet = if now == last { quiet + 1 } else { 0 };
            last = now;
        }
        let status = self.shutdown();
        let copied = self.copier.take().map(|h| h.join());
        let report = self.stderr.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let file_bytes = match copied {
            Some(Ok(Ok(n))) => n,
            Some(Ok(Err(e))) => return Err(Error::io(format!("writing the capture file {}", self.path.display()), e)),
            _ => return Err(Error::Other(format!("the copy into {} stopped", self.path.display()))),
        };
        let count = |what: &str| {
            report.iter().find_map(|l| l.strip_suffix(what).and_then(|n| n.trim().parse::<u64>().ok())).unwrap_or(0)
        };
        let stats = CaptureStats {
            captured: count("packets captured"),
            received_by_filter: count("packets received by filter"),
            dropped_by_kernel: count("packets dropped by kernel"),
            file_bytes,
            report: report.clone(),
        };
        if !report.iter().any(|l| l.ends_with("packets captured")) {
            return Err(Error::Other(format!("tcpdump ended without its report ({status}): {}", report.join(" / "))));
        }
        Ok(stats)
    }

    /// Ends tcpdump: SIGINT, then SIGKILL after [`STOP_TIMEOUT`]; returns how it ended.
    fn shutdown(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "already stopped".into();
        };
        if let Ok(Some(status)) = child.try_wait() {
            return status.to_string();
        }
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGINT);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            match child.try_wait() {
                Ok(Some(status)) => return status.to_string(),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let _ = child.kill();
        child.wait().map_or_else(|e| e.to_string(), |s| format!("killed after {} s: {s}", STOP_TIMEOUT.as_secs()))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.shutdown();
        if let Some(h) = self.copier.take() {
            let _ = h.join();
        }
        if let Some(h) = self.stderr.take() {
            let _ = h.join();
        }
    }
}

/// Turns segmentation and receive offloads (TSO, GSO, GRO) off on `interface` (in `netns`)
/// with ethtool, so that a capture there sees wire-sized segments. For interfaces the lab
/// created (veth pairs in its namespaces); never for loopback or a shared interface.
pub fn disable_offloads(interface: &str, netns: Option<&str>) -> Result<()> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ethtool"]);
            c
        }
        None => Command::new("ethtool"),
    };
    let out = cmd
        .args(["-K", interface, "tso", "off", "gso", "off", "gro", "off"])
        .output()
        .map_err(|e| Error::io("running ethtool (apt install ethtool)", e))?;
    if !out.status.success() {
        return Err(Error::Invalid(format!(
            "ethtool -K {interface} tso off gso off gro off: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}
