//! What a result records about how it was obtained: tool, libraries, machine.

use indexmap::IndexMap;
use pqtls_core::record::Env;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Collects the environment. `libraries` maps each stack to the library version it runs.
pub fn collect(tool_version: &str, tool_commit: &str, libraries: IndexMap<String, String>) -> Env {
    let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into());
    let kernel = match (read("/proc/sys/kernel/ostype"), read("/proc/sys/kernel/osrelease")) {
        (Some(o), Some(r)) => format!("{o} {r}"),
        _ => "unknown".into(),
    };
    Env {
        tool_version: tool_version.to_string(),
        tool_commit: tool_commit.to_string(),
        libraries,
        cpu_model,
        cpus: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        kernel,
        hostname: read("/proc/sys/kernel/hostname").unwrap_or_default(),
        governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        smt: read("/sys/devices/system/cpu/smt/control"),
        rustc: option_env!("PQTLS_RUSTC").unwrap_or("unknown").to_string(),
        profile: if cfg!(debug_assertions) { "debug" } else { "release" }.to_string(),
    }
}

/// What the machine was doing at one moment, from `/proc` (each part `None` when unreadable).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LoadSnapshot {
    /// 1-minute load average.
    pub loadavg: Option<f64>,
    /// Aggregate CPU time counters of `/proc/stat`, in clock ticks: (total, idle + iowait, steal).
    pub cpu_ticks: Option<(u64, u64, u64)>,
    /// This process's CPU time (user + system, all threads: `/proc/self/stat`), in the same
    /// clock ticks.
    pub own_ticks: Option<u64>,
}

impl LoadSnapshot {
    pub fn now() -> LoadSnapshot {
        LoadSnapshot {
            loadavg: read("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
            cpu_ticks: read("/proc/stat").and_then(|s| parse_stat(&s)),
            own_ticks: read("/proc/self/stat").and_then(|s| parse_self_stat(&s)),
        }
    }

    /// Shares of the machine's CPU time between `self` and `later`: (stolen, busy with
    /// something other than idle, iowait or steal).
    pub fn fractions_until(&self, later: &LoadSnapshot) -> (Option<f64>, Option<f64>) {
        match self.ticks_until(later) {
            Some((total, idle, steal)) => (Some(steal / total), Some(((total - idle - steal) / total).max(0.0))),
            None => (None, None),
        }
    }

    /// Share of the machine's CPU time between `self` and `later` that went to other
    /// processes than this one: busy time minus this process's own. What the 1-minute load
    /// average cannot say (it trails by a minute: a build that just finished still shows).
    pub fn others_until(&self, later: &LoadSnapshot) -> Option<f64> {
        let (total, idle, steal) = self.ticks_until(later)?;
        let own = later.own_ticks?.saturating_sub(self.own_ticks?) as f64;
        Some(((total - idle - steal - own) / total).clamp(0.0, 1.0))
    }

    /// `/proc/stat` ticks between `self` and `later`: (total, idle + iowait, steal).
    fn ticks_until(&self, later: &LoadSnapshot) -> Option<(f64, f64, f64)> {
        let ((t0, i0, s0), (t1, i1, s1)) = (self.cpu_ticks?, later.cpu_ticks?);
        (t1 > t0).then(|| ((t1 - t0) as f64, i1.saturating_sub(i0) as f64, s1.saturating_sub(s0) as f64))
    }
}

/// The 1-minute figure of `/proc/loadavg` (`0.52 0.58 0.59 1/467 12345`).
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// utime + stime of `/proc/<pid>/stat` (fields 14 and 15, counted after the command name's
/// closing parenthesis, which may itself hold spaces), in clock ticks.
pub fn parse_self_stat(text: &str) -> Option<u64> {
    let after = &text[text.rfind(')')? + 1..];
    let v: Vec<&str> = after.split_whitespace().collect();
    Some(v.get(11)?.parse::<u64>().ok()? + v.get(12)?.parse::<u64>().ok()?)
}

/// (total, idle + iowait, steal) ticks of the `cpu` line of `/proc/stat`
/// (`cpu user nice system idle iowait irq softirq steal guest guest_nice`; guest time is
/// already counted in user time).
pub fn parse_stat(text: &str) -> Option<(u64, u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap_or(0)).collect();
    if v.len() < 8 {
        return None;
    }
    let total: u64 = v[..8].iter().sum();
    Some((total, v[3] + v[4], v[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_parsed_and_fractions_computed() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        let a = parse_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n").unwrap();
        assert_eq!(a, (1000, 850, 0));
        let b = parse_stat("cpu  300 0 100 1500 50 0 0 50 0 0\n").unwrap();
        let before = LoadSnapshot { loadavg: None, cpu_ticks: Some(a), own_ticks: Some(40) };
        let after = LoadSnapshot { loadavg: None, cpu_ticks: Some(b), own_ticks: Some(240) };
        let (steal, busy) = before.fractions_until(&after);
        // 1000 ticks: 50 stolen, 700 idle, 250 busy — 200 of them this process's.
        assert_eq!(steal, Some(0.05));
        assert_eq!(busy, Some(0.25));
        assert_eq!(before.others_until(&after), Some(0.05));
        assert_eq!(before.others_until(&LoadSnapshot { own_ticks: None, ..after }), None);
        // A command name with spaces and parentheses; utime 7, stime 5.
        let me = "4242 (pqtls (x) y) R 1 4242 4242 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0 99 0 0\n";
        assert_eq!(parse_self_stat(me), Some(12));
        assert_eq!(parse_self_stat("4242 (pqtls) R 1"), None);
        assert_eq!(parse_stat("intr 1 2 3\n"), None);
    }
}
