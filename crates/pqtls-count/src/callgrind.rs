//! Instruction counts from valgrind's callgrind.
//!
//! Callgrind keeps no counter a program can read, but it dumps on request: a reading
//! ([`InstructionCounter::read`]) asks for a dump of the calling thread's count since its
//! previous dump, labelled with a token, and returns the token. With `--separate-threads=yes`
//! each dump goes to its own file, `<out>.<part>-<thread>`, whose header names the trigger
//! (our label), the thread and the `summary:` of its events. [`InstructionCounter::resolve`]
//! reads the new files in part order (the dumps' global order), adds each to its thread's
//! running count, and replaces tokens by those running counts: differences between two
//! readings of one thread are then exactly the instructions it retired between them — the
//! reading's own few instructions included, the same number every time. Files are deleted
//! once read.

use pqtls_core::record::Counting;
use pqtls_core::trace::InstructionCounter;
use pqtls_core::{Error, Result};
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The label prefix of our dumps (`pqtls <token>`).
const LABEL: &[u8] = b"pqtls ";

/// Counts under `valgrind --tool=callgrind --separate-threads=yes
/// --callgrind-out-file=<dir>/cg.%p` (see the CLI's `count.rs` for the whole command line).
#[derive(Debug)]
pub struct Callgrind {
    dir: PathBuf,
    /// `cg.<pid>.`: the dumps' file names continue with `<part>-<thread>`.
    prefix: String,
    version: String,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Instrumentation starts at the first reading (`--instr-atstart=no` keeps the set-up fast).
    started: bool,
    /// The last token handed out.
    token: u64,
    /// The highest dump part read back.
    part: u64,
    /// Per callgrind thread: instructions dumped so far.
    running: HashMap<u32, u64>,
    /// Tokens read back and not yet taken: the running count of their thread at their dump.
    resolved: HashMap<u64, u64>,
    error: Option<String>,
}

/// What a dump's header says.
#[derive(Debug, PartialEq, Eq)]
struct Dump {
    thread: u32,
    token: Option<u64>,
    instructions: u64,
}

impl Callgrind {
    /// The counter of a process that runs under callgrind and dumps into `dir` (the file
    /// prefix is `cg.<our pid>`); `version` is valgrind's (`valgrind --version`).
    pub fn new(dir: &Path, version: &str) -> Result<Callgrind> {
        if crate::valgrind::running_on_valgrind() == 0 {
            return Err(Error::Unsupported(
                "counting instructions with callgrind needs the process to run under valgrind: pqtls re-executes \
                 itself so (valgrind --tool=callgrind …) when --clock instructions is asked and the machine has no \
                 hardware counter"
                    .into(),
            ));
        }
        Callgrind::in_dir(dir, version)
    }

    fn in_dir(dir: &Path, version: &str) -> Result<Callgrind> {
        if !dir.is_dir() {
            return Err(Error::Invalid(format!("callgrind's dump directory {} does not exist", dir.display())));
        }
        Ok(Callgrind {
            dir: dir.to_path_buf(),
            prefix: format!("cg.{}.", std::process::id()),
            version: version.to_string(),
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the dumps written since the last call, in part order, and deletes them.
    fn ingest(&self, st: &mut State) -> Result<()> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| Error::io(format!("reading {}", self.dir.display()), e))?;
        let mut new: Vec<(u64, PathBuf)> = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&self.prefix)) else { continue };
            let Some((part, _thread)) = rest.split_once('-') else {
                return Err(Error::Invalid(format!(
                    "callgrind dump {} has no thread suffix: valgrind must run with --separate-threads=yes",
                    entry.path().display()
                )));
            };
            match part.parse::<u64>() {
                Ok(p) if p > st.part => new.push((p, entry.path())),
                _ => {}
            }
        }
        new.sort();
        for (part, path) in new {
            let dump = read_dump(&path)?;
            let running = st.running.entry(dump.thread).or_insert(0);
            *running += dump.instructions;
            if let Some(token) = dump.token {
                st.resolved.insert(token, *running);
            }
            st.part = part;
            std::fs::remove_file(&path).map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        }
        Ok(())
    }
}

impl InstructionCounter for Callgrind {
    fn read(&self) -> u64 {
        let mut st = self.state();
        if !st.started {
            crate::valgrind::start_instrumentation();
            st.started = true;
        }
        st.token += 1;
        // The label is written into a stack buffer: no allocation between the dump and the
        // return, so what a reading costs after its dump is the same every time.
        let mut buf = [0u8; 32];
        let label = label(st.token, &mut buf);
        crate::valgrind::dump_stats_at(label);
        st.token
    }

    fn resolve(&self, readings: &mut [u64]) {
        let mut st = self.state();
        for r in readings.iter_mut() {
            let token = *r;
            if !st.resolved.contains_key(&token) {
                if let Err(e) = self.ingest(&mut st) {
                    st.error.get_or_insert(e.to_string());
                }
            }
            *r = match st.resolved.remove(&token) {
                Some(n) => n,
                None => {
                    st.error.get_or_insert(format!(
                        "callgrind wrote no dump for reading {token} in {}: is pqtls running under valgrind \
                         --tool=callgrind with --callgrind-out-file={}/cg.%p?",
                        self.dir.display(),
                        self.dir.display()
                    ));
                    0
                }
            };
        }
    }

    fn counting(&self) -> Counting {
        Counting {
            source: "callgrind".into(),
            version: self.version.clone(),
            note: "instructions retired in user space as valgrind executes them (its CPU model exposes no AVX-512: \
                   libraries take their AVX2 paths); the kernel's work in system calls is not counted"
                .into(),
        }
    }

    fn error(&self) -> Option<String> {
        self.state().error.clone()
    }
}

/// `pqtls <token>` NUL-terminated in `buf`.
fn label(token: u64, buf: &mut [u8; 32]) -> &std::ffi::CStr {
    buf[..LABEL.len()].copy_from_slice(LABEL);
    let mut digits = [0u8; 20];
    let (mut n, mut k) = (token, digits.len());
    loop {
        k -= 1;
        digits[k] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let end = LABEL.len() + digits.len() - k;
    buf[LABEL.len()..end].copy_from_slice(&digits[k..]);
    buf[end] = 0;
    std::ffi::CStr::from_bytes_until_nul(&buf[..=end]).unwrap_or(c"pqtls")
}

/// The header of one dump: its thread, our token (from the trigger's label) and the
/// instructions (`Ir`) of its summary.
fn read_dump(path: &Path) -> Result<Dump> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let bad = |what: &str| Error::Invalid(format!("callgrind dump {}: {what}", path.display()));
    let (mut thread, mut token, mut events) = (None, None, None::<Vec<String>>);
    for line in BufReader::new(file).lines() {
        let line = line.map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if let Some(t) = line.strip_prefix("thread: ") {
            thread = Some(t.trim().parse::<u32>().map_err(|_| bad("unreadable thread"))?);
        } else if let Some(d) = line.strip_prefix("desc: Trigger: Client Request: ") {
            token = d.trim().strip_prefix("pqtls ").and_then(|t| t.parse::<u64>().ok());
        } else if let Some(e) = line.strip_prefix("events: ") {
            events = Some(e.split_whitespace().map(str::to_string).collect());
        } else if let Some(s) = line.strip_prefix("summary: ") {
            let names = events.ok_or_else(|| bad("no 'events:' line before its summary"))?;
            let at = names.iter().position(|n| n == "Ir").ok_or_else(|| bad("its events do not include Ir"))?;
            let instructions = s
                .split_whitespace()
                .nth(at)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| bad("unreadable summary"))?;
            let thread =
                thread.ok_or_else(|| bad("no 'thread:' line: valgrind must run with --separate-threads=yes"))?;
            return Ok(Dump { thread, token, instructions });
        }
    }
    Err(bad("no summary line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(dir: &Path, part: u64, thread: u32, token: u64, ir: u64) {
        let body = format!(
            "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 1\ncmd: pqtls\npart: {part}\n\n\
             thread: {thread}\n\ndesc: Trigger: Client Request: pqtls {token}\n\npositions: line\nevents: Ir\n\
             summary: {ir}\n\nfn=(1) main\n0 {ir}\n\ntotals: {ir}\n"
        );
        std::fs::write(dir.join(format!("cg.{}.{part}-{thread:02}", std::process::id())), body).unwrap();
    }

    #[test]
    fn labels_count_up_without_allocating() {
        let mut buf = [0u8; 32];
        assert_eq!(label(7, &mut buf).to_str().unwrap(), "pqtls 7");
        assert_eq!(label(1234567890123, &mut buf).to_str().unwrap(), "pqtls 1234567890123");
    }

    #[test]
    fn dumps_are_summed_per_thread_in_part_order_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let c = Callgrind::in_dir(dir.path(), "valgrind-3.19.0").unwrap();
        // Thread 1 reads at tokens 1, 3; thread 2 at 2, 4 (dumps zero only their thread).
        dump(dir.path(), 1, 1, 1, 1000);
        dump(dir.path(), 2, 2, 2, 50);
        dump(dir.path(), 3, 1, 3, 700);
        dump(dir.path(), 4, 2, 4, 25);
        let mut t1 = [1, 3];
        c.resolve(&mut t1);
        assert_eq!(t1, [1000, 1700]);
        let mut t2 = [2, 4];
        c.resolve(&mut t2);
        assert_eq!(t2, [50, 75]);
        assert!(c.error().is_none());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "read dumps are deleted");
        // Later dumps go on from the running counts.
        dump(dir.path(), 5, 1, 5, 10);
        let mut t = [5];
        c.resolve(&mut t);
        assert_eq!(t, [1710]);
    }

    #[test]
    fn a_missing_dump_is_an_error_not_a_count() {
        let dir = tempfile::tempdir().unwrap();
        let c = Callgrind::in_dir(dir.path(), "valgrind-3.19.0").unwrap();
        let mut t = [9];
        c.resolve(&mut t);
        assert_eq!(t, [0]);
        let e = c.error().unwrap();
        assert!(e.contains("no dump for reading 9") && e.contains("--tool=callgrind"), "{e}");
    }

    #[test]
    fn a_dump_without_thread_suffix_names_the_option() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(format!("cg.{}.1", std::process::id())), "summary: 1\n").unwrap();
        let c = Callgrind::in_dir(dir.path(), "v").unwrap();
        let mut t = [1];
        c.resolve(&mut t);
        assert!(c.error().unwrap().contains("--separate-threads=yes"));
    }

    #[test]
    fn outside_valgrind_the_counter_refuses_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let e = Callgrind::new(dir.path(), "v").unwrap_err().to_string();
        assert!(e.contains("run under valgrind"), "{e}");
    }
}
