//! A child process that leads its own process group and dies with pqtls: stopped with SIGTERM
//! to the whole group, then SIGKILL after a grace period; and, if pqtls itself is killed
//! (even with SIGKILL), the kernel sends it SIGTERM (`PR_SET_PDEATHSIG`).

use pqtls_core::{Error, Result};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// A supervised child process (the leader of its own process group). Stopped by
/// [`Supervised::stop`] or when dropped.
///
/// What remains possible: `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child
/// exits (not only the process), so spawn from a thread that lives as long as the child
/// should (the main thread, or the test's). It reaches the group leader only: nginx's master
/// turns the SIGTERM into a shutdown of its workers, but a leader killed by someone else with
/// SIGKILL leaves its workers running (orphans in the same process group) until they are
/// signalled; [`Supervised::stop`] signals the whole group, so while pqtls lives nothing is
/// missed.
#[derive(Debug)]
pub struct Supervised {
    child: Option<Child>,
    pid: u32,
    what: String,
}

/// How a supervised process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stopped {
    /// The leader's exit status (`None` if it could not be read).
    pub status: Option<ExitStatus>,
    /// Whether SIGKILL was needed (the group outlived the grace period after SIGTERM).
    pub killed: bool,
}

/// The signal a supervised child gets when pqtls dies.
const DEATH_SIGNAL: libc::c_int = libc::SIGTERM;

impl Supervised {
    /// Spawns `cmd` (its stdio as the caller set it) as the leader of a new process group,
    /// asking the kernel to send it SIGTERM when the calling thread dies. `what` names it
    /// in errors (e.g. `nginx`).
    pub fn spawn(cmd: &mut Command, what: &str) -> Result<Supervised> {
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the forked child before exec. It only calls prctl(2)
        // and getppid(2), which are async-signal-safe, allocates nothing, takes no lock and
        // touches no memory shared with the parent.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, DEATH_SIGNAL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died between fork and prctl: no signal would ever come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| Error::io(format!("starting {what} ({cmd:?})"), e))?;
        Ok(Supervised { pid: child.id(), child: Some(child), what: what.to_string() })
    }

    /// The leader's process id (= the process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The leader's exit status if it has exited.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        match self.child.as_mut() {
            Some(c) => c.try_wait().map_err(|e| Error::io(format!("waiting for {}", self.what), e)),
            None => Ok(None),
        }
    }

    /// The processes of its group that are still alive (zombies excluded).
    pub fn alive(&self) -> Vec<u32> {
        group_members(self.pid)
    }

    /// CPU time (user + system) its live processes have used so far, ns (from /proc, in
    /// clock ticks: 10 ms resolution; a process that already exited no longer counts).
    /// Take the difference over a run and divide by the handshakes for the terminator's
    /// CPU per handshake.
    pub fn cpu_ns(&self) -> u64 {
        group_members(self.pid).into_iter().filter_map(cpu_ticks).sum::<u64>() * ns_per_tick()
    }

    /// Σ RSS and Σ PSS of its group's live processes, bytes, from /proc/<pid>/smaps_rollup
    /// (PSS divides each shared page among the processes mapping it: the sum is what the
    /// group holds; RSS counts shared pages in every process). A process it cannot read adds 0.
    pub fn memory(&self) -> (u64, u64) {
        group_members(self.pid).into_iter().filter_map(rss_pss).fold((0, 0), |(r, p), (r1, p1)| (r + r1, p + p1))
    }

    /// SIGTERM to the group; after `grace`, SIGKILL to whatever is left. Returns once the
    /// leader is reaped and no member of the group is alive (bounded: 5 s after SIGKILL,
    /// else an error listing the survivors).
    pub fn stop(mut self, grace: Duration) -> Result<Stopped> {
        self.halt(Some(grace))
    }

    /// SIGKILL to the group at once (no SIGTERM first); returns as [`Supervised::stop`].
    pub fn kill(mut self) -> Result<Stopped> {
        self.halt(None)
    }

    /// The leader's stdout, if it was piped (once).
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut()?.stdout.take()
    }

    fn halt(&mut self, grace: Option<Duration>) -> Result<Stopped> {
        let Some(mut child) = self.child.take() else {
            return Ok(Stopped { status: None, killed: false });
        };
        let pgid = self.pid;
        let grace = match grace {
            Some(g) => {
                signal_group(pgid, libc::SIGTERM);
                g
            }
            None => Duration::ZERO,
        };
        let mut status = None;
        let gone = |status: &mut Option<ExitStatus>, child: &mut Child| {
            if status.is_none() {
                *status = child.try_wait().ok().flatten();
            }
            status.is_some() && group_members(pgid).is_empty()
        };
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if gone(&mut status, &mut child) {
                return Ok(Stopped { status, killed: false });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_group(pgid, libc::SIGKILL);
        let _ = child.kill();
        if status.is_none() {
            status = child.wait().ok();
        }
        let t1 = Instant::now();
        while t1.elapsed() < Duration::from_secs(5) {
            if group_members(pgid).is_empty() {
                return Ok(Stopped { status, killed: true });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Err(Error::Other(format!(
            "{} (process group {pgid}) survived SIGKILL: processes {:?} are still alive",
            self.what,
            group_members(pgid)
        )))
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        let _ = self.halt(Some(Duration::from_secs(2)));
    }
}

/// Sends `signal` to every process of group `pgid`.
fn signal_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else { return };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and shares no memory; a negative pid addresses
    // the process group `pgid`, which this process created (process_group(0) at spawn).
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// The live (not zombie) processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| matches!(stat(*pid), Some((state, g)) if g == pgid && state != 'Z' && state != 'X'))
        .collect()
}

/// Whether process `pid` exists and is not a zombie.
pub fn is_alive(pid: u32) -> bool {
    matches!(stat(pid), Some((state, _)) if state != 'Z' && state != 'X')
}

/// utime + stime of `pid` (all its threads), in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // After "(comm) ": state is field 3 of stat(5); utime and stime are fields 14 and 15.
    let f: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// RSS and PSS of `pid`, bytes (its smaps_rollup's `Rss:` and `Pss:`, in kB).
fn rss_pss(pid: u32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("smaps_rollup")).ok()?;
    let kib = |name: &str| -> Option<u64> {
        text.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse::<u64>().ok().map(|k| k * 1024)
    };
    Some((kib("Rss:")?, kib("Pss:")?))
}

/// The hard limit on open files of this process (what its children may raise theirs to).
pub fn fd_hard_limit() -> Option<u64> {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) writes one rlimit into the struct it is given, which lives here.
    #[allow(unsafe_code)]
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) };
    (r == 0 && l.rlim_max != libc::RLIM_INFINITY).then_some(l.rlim_max)
}

/// Nanoseconds per clock tick of /proc's CPU times.
pub fn ns_per_tick() -> u64 {
    // SAFETY: sysconf(3) takes an integer name and returns an integer; no memory is shared.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        1_000_000_000 / ticks as u64
    } else {
        10_000_000
    }
}

/// (state, process group) of `pid` from /proc/<pid>/stat.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // "pid (comm) state ppid pgrp ...": comm may contain spaces and parentheses.
    let rest = &text[text.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    let _ppid = f.next()?;
    let pgrp = f.next()?.parse().ok()?;
    Some((state, pgrp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    #[test]
    fn a_shell_and_its_child_are_stopped_together() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & sleep 30; wait"]).stdin(Stdio::null());
        let p = Supervised::spawn(&mut cmd, "sh").unwrap();
        let t0 = Instant::now();
        while p.alive().len() < 3 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let members = p.alive();
        assert_eq!(members.len(), 3, "sh and two sleeps: {members:?}");
        let stopped = p.stop(Duration::from_secs(2)).unwrap();
        assert!(!stopped.killed, "SIGTERM was enough");
        for pid in members {
            assert!(!is_alive(pid), "{pid} survived");
        }
    }

    #[test]
    fn cpu_time_of_the_group_is_counted() {
        // A busy loop in the shell: its CPU time grows from 0.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done; sleep 30"]).stdin(Stdio::null());
        let p = Supervised::spawn(&mut cmd, "sh").unwrap();
        let t0 = Instant::now();
        while p.cpu_ns() == 0 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(p.cpu_ns() > 0);
        // Its memory: resident, and PSS no more than RSS.
        let (rss, pss) = p.memory();
        assert!(rss > 0 && pss > 0 && pss <= rss, "rss {rss} pss {pss}");
        assert_eq!(ns_per_tick() * 100, 1_000_000_000, "USER_HZ is 100 on Linux x86-64");
        p.stop(Duration::from_secs(2)).unwrap();
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "trap '' TERM; sleep 30 & trap '' TERM; wait"]).stdin(Stdio::null());
        let p = Supervised::spawn(&mut cmd, "sh").unwrap();
        // The sleep started: the shell has run its trap (a fixed pause may come before it).
        let t0 = Instant::now();
        while p.alive().len() < 2 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let members = p.alive();
        assert_eq!(members.len(), 2, "sh and its sleep: {members:?}");
        let stopped = p.stop(Duration::from_millis(300)).unwrap();
        assert!(stopped.killed);
        for pid in members {
            assert!(!is_alive(pid), "{pid} survived");
        }
    }

    #[test]
    fn a_program_that_does_not_exist_is_named() {
        let e = Supervised::spawn(&mut Command::new("/nonexistent/nginx"), "nginx").unwrap_err().to_string();
        assert!(e.contains("starting nginx") && e.contains("/nonexistent/nginx"), "{e}");
    }
}
