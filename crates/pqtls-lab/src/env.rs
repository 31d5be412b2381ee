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
