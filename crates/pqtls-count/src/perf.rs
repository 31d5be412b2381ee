//! Instruction counts from the CPU's instructions-retired counter (`perf_event_open`), one
//! counter per thread, user space only. Machines without a PMU (most VMs, this project's CI)
//! refuse it at [`Perf::open`]; the command then counts under callgrind instead.
#![allow(unsafe_code)]

use pqtls_core::record::Counting;
use pqtls_core::trace::InstructionCounter;
use pqtls_core::{Error, Result};
use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::thread::ThreadId;

/// `perf_event_attr` as of its first version (`PERF_ATTR_SIZE_VER0`, 64 bytes): the kernel
/// takes a shorter attribute and zero-fills what later versions added.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit field: 5 = exclude_kernel, 6 = exclude_hv (0 = disabled stays clear: counting
    /// starts at open).
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// One instructions-retired counter per thread that reads, opened at its first reading.
#[derive(Debug)]
pub struct Perf {
    counters: Mutex<HashMap<ThreadId, File>>,
    error: Mutex<Option<String>>,
    kernel: String,
}

/// Opens the calling thread's counter.
fn open_for_this_thread() -> std::io::Result<File> {
    let attr = Attr {
        kind: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<Attr>() as u32,
        config: PERF_COUNT_HW_INSTRUCTIONS,
        flags: EXCLUDE_KERNEL | EXCLUDE_HV,
        ..Attr::default()
    };
    // SAFETY: perf_event_open reads `size` bytes of the attribute we own for the call;
    // pid 0 / cpu -1 is "the calling thread, on any CPU", group -1 none.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const Attr,
            0 as libc::pid_t,
            -1i32,
            -1i32,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
}

fn read_counter(counter: &File) -> std::io::Result<u64> {
    let mut buf = [0u8; 8];
    // A counter's read gives its value as one u64 (no read_format bits set).
    (&mut &*counter).read_exact(&mut buf)?;
    Ok(u64::from_ne_bytes(buf))
}

impl Perf {
    /// The counter, checked by opening the calling thread's: an error says why the machine
    /// cannot count (no PMU in a VM, `perf_event_paranoid`) and what counts instead.
    pub fn open() -> Result<Perf> {
        let fd = open_for_this_thread().map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV) => {
                    "this machine has no hardware instruction counter (a VM without a virtual PMU)".to_string()
                }
                Some(libc::EACCES) | Some(libc::EPERM) => {
                    "perf_event_open is not allowed (run as root or lower kernel.perf_event_paranoid to 2 or less)"
                        .to_string()
                }
                _ => format!("perf_event_open failed: {e}"),
            };
            Error::Unsupported(format!("{why}; --counter callgrind counts under valgrind instead"))
        })?;
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let counters = Mutex::new(HashMap::from([(std::thread::current().id(), fd)]));
        Ok(Perf { counters, error: Mutex::new(None), kernel })
    }

    fn fail(&self, e: String) -> u64 {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        0
    }
}

impl InstructionCounter for Perf {
    fn read(&self) -> u64 {
        let mut counters = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        let id = std::thread::current().id();
        if !counters.contains_key(&id) {
            match open_for_this_thread() {
                Ok(fd) => {
                    counters.insert(id, fd);
                }
                Err(e) => return self.fail(format!("opening a thread's instruction counter: {e}")),
            }
        }
        match counters.get(&id).map(read_counter) {
            Some(Ok(n)) => n,
            Some(Err(e)) => self.fail(format!("reading the instruction counter: {e}")),
            None => self.fail("the thread's instruction counter vanished".into()),
        }
    }

    /// Readings are counts already.
    fn resolve(&self, _readings: &mut [u64]) {}

    fn counting(&self) -> Counting {
        Counting {
            source: "perf".into(),
            version: format!("linux-{}", self.kernel),
            note: "the CPU's instructions-retired counter per thread (perf_event_open), user space only".into(),
        }
    }

    fn error(&self) -> Option<String> {
        self.error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_is_the_first_version_of_the_abi() {
        assert_eq!(std::mem::size_of::<Attr>(), 64);
    }

    /// Where the machine has a counter, two readings around work differ; where it has none
    /// (this project's VMs), opening says why and names the fallback.
    #[test]
    fn counts_where_there_is_a_counter_or_says_what_instead() {
        match Perf::open() {
            Ok(p) => {
                let a = p.read();
                let mut x = 0u64;
                for i in 0..10_000u64 {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                let b = p.read();
                assert!(b > a + 10_000, "{a} → {b}");
                assert!(p.error().is_none());
                assert_eq!(p.counting().source, "perf");
            }
            Err(e) => assert!(e.to_string().contains("--counter callgrind"), "{e}"),
        }
    }
}
