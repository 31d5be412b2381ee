//! Valgrind client requests (the FFI edge: inline assembly valgrind recognises).
//!
//! A request is a block of six words `[request, arg1 … arg5]`; its address goes in `rax`, a
//! default result in `rdx`, and the "special instruction preamble" (rotations of `rdi` by 3,
//! 13, 61 and 51 bits — 128 in all, so `rdi` is unchanged — then `xchg rbx, rbx`) tells
//! valgrind's translator to hand the block to the core or the tool; the result comes back in
//! `rdx`. Natively the sequence does nothing and `rdx` keeps the default.
#![allow(unsafe_code)]

use std::ffi::CStr;

/// `VG_USERREQ__RUNNING_ON_VALGRIND`.
const RUNNING_ON_VALGRIND: u64 = 0x1001;
/// Callgrind's requests start at `VG_USERREQ_TOOL_BASE('C','T')`.
const CALLGRIND_BASE: u64 = ((b'C' as u64) << 24) | ((b'T' as u64) << 16);
/// `CALLGRIND_DUMP_STATS_AT(label)`: dump the calling thread's costs, then zero them.
const DUMP_STATS_AT: u64 = CALLGRIND_BASE + 3;
/// `CALLGRIND_START_INSTRUMENTATION`.
const START_INSTRUMENTATION: u64 = CALLGRIND_BASE + 4;

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn request(default: u64, args: [u64; 6]) -> u64 {
    let result: u64;
    // SAFETY: the sequence only rotates rdi by 128 bits in all (it is left as it was, and is
    // declared clobbered anyway) and exchanges rbx with itself; rax points at `args`, which
    // lives across the block and which valgrind only reads. Natively nothing else happens;
    // under valgrind the request is served and its result written to rdx.
    unsafe {
        std::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") default => result,
            in("rax") args.as_ptr(),
            inout("rdi") 0u64 => _,
            options(nostack),
        );
    }
    result
}

#[cfg(not(target_arch = "x86_64"))]
fn request(default: u64, _args: [u64; 6]) -> u64 {
    default
}

/// Whether this process runs under valgrind (any tool): the nesting depth, 0 natively.
pub fn running_on_valgrind() -> u64 {
    request(0, [RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0])
}

/// Callgrind: writes the calling thread's costs since its last dump to a new file whose
/// trigger reads `label`, then zeroes them. A no-op natively and under other tools.
pub fn dump_stats_at(label: &CStr) {
    request(0, [DUMP_STATS_AT, label.as_ptr() as u64, 0, 0, 0, 0]);
}

/// Callgrind: starts instrumenting (a run started with `--instr-atstart=no` counts nothing
/// before this).
pub fn start_instrumentation() {
    request(0, [START_INSTRUMENTATION, 0, 0, 0, 0, 0]);
}

#[cfg(test)]
mod tests {
    #[test]
    fn requests_are_harmless_natively() {
        // The test binary does not run under valgrind: the default comes back.
        assert_eq!(super::running_on_valgrind(), 0);
        super::dump_stats_at(c"pqtls 1");
        super::start_instrumentation();
    }
}
