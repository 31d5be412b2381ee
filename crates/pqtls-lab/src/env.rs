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
}

impl LoadSnapshot {
    pub fn now() -> LoadSnapshot {
        LoadSnapshot {
            loadavg: read("/proc/loadavg").and_then(|s| parse_loadavg(&s)),
            cpu_ticks: read("/proc/stat").and_then(|s| parse_stat(&s)),
        }
    }

    /// Shares of the machine's CPU time between `self` and `later`: (stolen, busy with
    /// something other than idle, iowait or steal).
    pub fn fractions_until(&self, later: &LoadSnapshot) -> (Option<f64>, Option<f64>) {
        match (self.cpu_ticks, later.cpu_ticks) {
            (Some((t0, i0, s0)), Some((t1, i1, s1))) if t1 > t0 => {
                let total = (t1 - t0) as f64;
                let steal = s1.saturating_sub(s0) as f64;
                let idle = i1.saturating_sub(i0) as f64;
                (Some(steal / total), Some(((total - idle - steal) / total).max(0.0)))
            }
            _ => (None, None),
        }
    }
}

/// The 1-minute figure of `/proc/loadavg` (`0.52 0.58 0.59 1/467 12345`).
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
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
        let (steal, busy) = LoadSnapshot { loadavg: None, cpu_ticks: Some(a) }
            .fractions_until(&LoadSnapshot { loadavg: None, cpu_ticks: Some(b) });
        // 1000 ticks: 50 stolen, 700 idle, 250 busy.
        assert_eq!(steal, Some(0.05));
        assert_eq!(busy, Some(0.25));
        assert_eq!(parse_stat("intr 1 2 3\n"), None);
    }
}
