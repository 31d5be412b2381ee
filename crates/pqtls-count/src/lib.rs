//! Instruction counters for `clock = "instructions"` ([`pqtls_core::trace::Clock::Instructions`]).
//!
//! Two sources, one trait ([`InstructionCounter`]):
//! - [`Perf`]: the CPU's instructions-retired counter, opened per thread with
//!   `perf_event_open` (user-space instructions only) — bare metal and VMs with a virtual PMU;
//! - [`Callgrind`]: valgrind's callgrind, for machines without hardware counters (most
//!   shared VMs and CI runners). The process runs under `valgrind --tool=callgrind`; each
//!   reading asks callgrind to dump the calling thread's count since its last dump (a client
//!   request, [`valgrind`]), and the dumps are read back and summed per thread when a trace is
//!   attributed.
//!
//! Why client requests written here rather than a C shim over `valgrind.h` or a crate: the
//! request is a documented, fixed instruction sequence (x86-64: four rotations of `rdi` and
//! `xchg rbx, rbx`, with the request's arguments in memory at `rax`), so a dozen lines of
//! inline assembly need neither valgrind's headers at build time nor a C compiler step; every
//! binary can count, and one that is not under valgrind runs the sequence as no-ops.
//!
//! Which source a run uses and how the command re-executes itself under valgrind is the
//! CLI's (`crates/pqtls-cli/src/count.rs`); docs/instructions.md explains the method.

pub mod callgrind;
pub mod perf;
pub mod valgrind;

pub use callgrind::Callgrind;
pub use perf::Perf;
pub use pqtls_core::trace::InstructionCounter;
