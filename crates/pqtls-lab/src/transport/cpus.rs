//! Which two CPUs the client and the server thread run on.
//!
//! Among the CPUs this process may run on (its affinity mask: `taskset`, cgroups), two that
//! are not SMT siblings of each other are preferred: siblings share a core's execution units
//! and caches, so each thread's timing would carry the other's load. The topology comes from
//! sysfs (`cpuN/topology/{thread_siblings_list,core_id,physical_package_id}`), read from a
//! root given as a parameter so that the choice is tested on synthetic trees.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use pqtls_core::{Error, Result};
use std::path::Path;

/// Where Linux describes the CPUs.
pub const SYSFS_CPU_ROOT: &str = "/sys/devices/system/cpu";

/// What sysfs says about one CPU (`None`: the file is missing or unreadable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuTopology {
    pub cpu: usize,
    pub core_id: Option<u64>,
    pub package_id: Option<u64>,
    /// The CPUs sharing this CPU's core, itself included.
    pub thread_siblings: Option<Vec<usize>>,
}

/// The topology of a set of CPUs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    pub cpus: Vec<CpuTopology>,
}

impl Topology {
    /// Reads `root/cpuN/topology/…` for each CPU in `cpus` (`root` is normally
    /// [`SYSFS_CPU_ROOT`]). Missing files leave the fields unknown; they are not errors.
    pub fn read(root: &Path, cpus: &[usize]) -> Topology {
        let file = |cpu: usize, name: &str| {
            std::fs::read_to_string(root.join(format!("cpu{cpu}/topology/{name}"))).ok().map(|s| s.trim().to_string())
        };
        let cpus = cpus
            .iter()
            .map(|&cpu| CpuTopology {
                cpu,
                core_id: file(cpu, "core_id").and_then(|s| s.parse().ok()),
                package_id: file(cpu, "physical_package_id").and_then(|s| s.parse().ok()),
                thread_siblings: file(cpu, "thread_siblings_list").and_then(|s| parse_cpu_list(&s)),
            })
            .collect();
        Topology { cpus }
    }

    fn get(&self, cpu: usize) -> Option<&CpuTopology> {
        self.cpus.iter().find(|c| c.cpu == cpu)
    }

    /// Whether two CPUs share a core: from the siblings list, else from core and package
    /// ids; `None` when sysfs does not say.
    pub fn same_core(&self, a: usize, b: usize) -> Option<bool> {
        let (ta, tb) = (self.get(a)?, self.get(b)?);
        if let Some(s) = ta.thread_siblings.as_ref().or(tb.thread_siblings.as_ref()) {
            let other = if ta.thread_siblings.is_some() { b } else { a };
            return Some(s.contains(&other));
        }
        match (ta.core_id, tb.core_id, ta.package_id, tb.package_id) {
            (Some(ca), Some(cb), Some(pa), Some(pb)) => Some(ca == cb && pa == pb),
            _ => None,
        }
    }

    pub fn same_package(&self, a: usize, b: usize) -> Option<bool> {
        Some(self.get(a)?.package_id? == self.get(b)?.package_id?)
    }
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    Some(cpus)
}

/// Writes CPUs as a kernel CPU list (`0-3,8`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { sorted[i].to_string() } else { format!("{}-{}", sorted[i], sorted[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// Where the two threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Pinned {
        client: usize,
        server: usize,
    },
    /// Left to the scheduler (one CPU allowed, or pinning was refused).
    Unpinned,
}

/// A placement and what to tell the reader about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub placement: Placement,
    pub notes: Vec<String>,
}

/// Chooses the client's and the server's CPU among `allowed` (the affinity mask), or checks
/// the `requested` pair against it. Prefers two CPUs on different cores of one package, then
/// different cores anywhere, then CPUs of unknown topology, and takes SMT siblings only when
/// nothing else is allowed (the notes say so). With one CPU allowed, the threads run unpinned.
pub fn plan(allowed: &[usize], requested: Option<(usize, usize)>, topology: &Topology) -> Result<Plan> {
    let mut allowed = allowed.to_vec();
    allowed.sort_unstable();
    allowed.dedup();
    let (client, server) = match requested {
        Some((a, b)) => {
            if a == b {
                return Err(Error::Invalid(format!(
                    "the client and the server thread were both asked to run on CPU {a}; give two different CPUs, e.g. {}",
                    example_pair(&allowed)
                )));
            }
            for cpu in [a, b] {
                if !allowed.contains(&cpu) {
                    return Err(Error::Invalid(format!(
                        "CPU {cpu} is not in this process's affinity mask; CPUs allowed: {} (e.g. {})",
                        format_cpu_list(&allowed),
                        example_pair(&allowed)
                    )));
                }
            }
            (a, b)
        }
        None => match allowed.as_slice() {
            [] => return Err(Error::Other("this process's affinity mask allows no CPU".into())),
            [only] => {
                return Ok(Plan {
                    placement: Placement::Unpinned,
                    notes: vec![format!(
                        "only CPU {only} is in this process's affinity mask: the client and the server thread ran unpinned, taking turns on it"
                    )],
                })
            }
            _ => best_pair(&allowed, topology),
        },
    };
    let relation = match topology.same_core(client, server) {
        Some(true) => format!(
            "CPUs {client} and {server} are SMT siblings: they share a core, so each thread's timing carries the other's load"
        ),
        Some(false) => match topology.same_package(client, server) {
            Some(false) => "different cores, different packages".to_string(),
            _ => "different cores".to_string(),
        },
        None => format!("sysfs does not say whether CPUs {client} and {server} share a core"),
    };
    Ok(Plan {
        placement: Placement::Pinned { client, server },
        notes: vec![format!("client thread on CPU {client}, server thread on CPU {server} ({relation})")],
    })
}

fn best_pair(allowed: &[usize], topology: &Topology) -> (usize, usize) {
    let score = |a: usize, b: usize| {
        let core = match topology.same_core(a, b) {
            Some(false) => 4,
            None => 2,
            Some(true) => 0,
        };
        core + u8::from(topology.same_package(a, b) == Some(true))
    };
    let mut best = ((allowed[0], allowed[1]), score(allowed[0], allowed[1]));
    for (i, &a) in allowed.iter().enumerate() {
        for &b in &allowed[i + 1..] {
            let s = score(a, b);
            if s > best.1 {
                best = ((a, b), s);
            }
        }
    }
    best.0
}

fn example_pair(allowed: &[usize]) -> String {
    match allowed {
        [a, b, ..] => format!("{a},{b}"),
        _ => "0,1".into(),
    }
}

/// The CPUs the calling thread may run on (its affinity mask).
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| Error::io("reading this thread's CPU affinity mask", std::io::Error::from(e)))?;
    Ok((0..CpuSet::count()).filter(|&cpu| set.is_set(cpu).unwrap_or(false)).collect())
}

/// Plans the placement for this process from its affinity mask and the sysfs tree at `root`.
pub fn plan_here(requested: Option<(usize, usize)>, root: &Path) -> Result<Plan> {
    let allowed = allowed_cpus()?;
    plan(&allowed, requested, &Topology::read(root, &allowed))
}

/// The calling thread pinned to one CPU; its previous affinity mask comes back on drop, so a
/// caller's thread lent to a transport is left as it was.
pub struct Pinned {
    previous: CpuSet,
}

impl Pinned {
    /// Pins the calling thread to `cpu`, or says why not.
    pub fn current_thread(cpu: usize) -> std::result::Result<Pinned, String> {
        let previous = sched_getaffinity(Pid::from_raw(0)).map_err(|e| format!("reading the affinity mask: {e}"))?;
        let mut only = CpuSet::new();
        only.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
        sched_setaffinity(Pid::from_raw(0), &only).map_err(|e| format!("pinning to CPU {cpu}: {e}"))?;
        Ok(Pinned { previous })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // Restoring a mask this thread had a moment ago; should it be refused (a cgroup
        // changed meanwhile), the thread stays pinned, which only narrows where it runs.
        let _ = sched_setaffinity(Pid::from_raw(0), &self.previous);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(format_cpu_list(&[11, 0, 1, 2, 3, 8, 10]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(format_cpu_list(&[5]), "5");
    }

    #[test]
    fn requested_cpus_are_checked_against_the_mask() {
        let topo = Topology::default();
        let e = plan(&[0, 1], Some((0, 4)), &topo).unwrap_err().to_string();
        assert!(e.contains("CPU 4 is not in this process's affinity mask; CPUs allowed: 0-1 (e.g. 0,1)"), "{e}");
        let e = plan(&[0, 1], Some((1, 1)), &topo).unwrap_err().to_string();
        assert!(e.contains("both asked to run on CPU 1"), "{e}");
        let p = plan(&[0, 1, 2], Some((2, 0)), &topo).unwrap();
        assert_eq!(p.placement, Placement::Pinned { client: 2, server: 0 });
        assert!(p.notes[0].contains("sysfs does not say"), "{:?}", p.notes);
    }
}
