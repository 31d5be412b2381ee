//! Where a command's output goes: its output files (`--json`, `--csv`, `--html`, …) and its
//! terminal text (tables), by one set of rules for every command.
//!
//! - An output file is opened at once, so that a path that cannot be written fails before any
//!   work, naming the path — but **not truncated until the command writes it**, so a command
//!   that fails leaves a user's existing file as it was; a file the command made and never
//!   wrote is removed again (also when the command fails or panics).
//! - `-` is standard output, as in every Unix tool (a file named `-` is `./-`). At most one
//!   output of a command may be `-`; then standard output holds exactly that output and the
//!   terminal table is not printed (as with `--quiet`); progress and notes stay on stderr.
//! - Results are written **before** the terminal table. A reader that went away
//!   (`pqtls insitu … | head -3`) loses the table, nothing else: SIGPIPE is ignored for every
//!   command (main), a broken pipe on the terminal text is not an error (the command finishes
//!   and exits as it would have: 0 when all went well), and a server keeps serving. A result
//!   written to `-` whose reader went away is an error (exit 1) naming standard output: that
//!   result was not delivered.
//! - Terminal text goes through [`print`] / [`Terminal::print`] only (no `println!` in this
//!   crate: a closed stdout made it panic); lines on stderr through `progress::line`.

use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The spelling of standard output in an output flag.
pub const STDOUT: &str = "-";

/// Whether an output path means standard output.
pub fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == STDOUT
}

pub struct Output {
    dest: Dest,
    written: bool,
}

enum Dest {
    File {
        path: PathBuf,
        file: std::fs::File,
        /// The command made this file (it did not exist before): only such a file may be removed
        /// again when the command fails (never `/dev/null` or a user's existing file).
        made: bool,
    },
    Stdout,
}

/// Opens (creating when missing) the output at `path`, without touching its content yet; `-`
/// is standard output.
pub fn create(path: Option<&Path>) -> Result<Option<Output>> {
    path.map(|p| {
        if is_stdout(p) {
            return Ok(Output { dest: Dest::Stdout, written: false });
        }
        let made = std::fs::symlink_metadata(p).is_err();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .with_context(|| format!("cannot write {}", p.display()))?;
        Ok(Output { dest: Dest::File { path: p.to_path_buf(), file, made }, written: false })
    })
    .transpose()
}

impl Output {
    /// Removes this output when the command made it and it is still an empty regular file at
    /// its path (the same file: not one another process put there since).
    fn remove_if_unwritten(&self) {
        use std::os::unix::fs::MetadataExt;
        let Dest::File { path, file, made: true } = &self.dest else { return };
        let (Ok(ours), Ok(there)) = (file.metadata(), std::fs::symlink_metadata(path)) else { return };
        if ours.is_file() && ours.len() == 0 && ours.dev() == there.dev() && ours.ino() == there.ino() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for Output {
    /// An output the command never wrote (it failed, or panicked, first) leaves no empty file.
    fn drop(&mut self) {
        if !self.written {
            self.remove_if_unwritten();
        }
    }
}

/// Removes the outputs this command made (still empty regular files) when it failed before it
/// could write them, so that a failed command leaves no empty report behind. (Dropping an
/// unwritten output does the same.)
pub fn discard<'a>(outputs: impl IntoIterator<Item = &'a Option<Output>>) {
    for o in outputs.into_iter().flatten() {
        o.remove_if_unwritten();
    }
}

/// Replaces the output's content with `data` (a regular file is truncated first; a pipe or a
/// device such as `/dev/stdout` is just written to; `-` is standard output).
pub fn write(mut out: Output, data: &[u8]) -> Result<()> {
    out.written = true;
    match &mut out.dest {
        Dest::Stdout => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(data).and_then(|()| stdout.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    bail!("standard output (-) was closed before all of it was written: its reader went away")
                }
                r => r.context("writing standard output (-)"),
            }
        }
        Dest::File { path, file, .. } => {
            if file.metadata().is_ok_and(|m| m.is_file()) {
                file.set_len(0).with_context(|| format!("writing {}", path.display()))?;
            }
            // Flushed, not synced: a pipe or a device is a fine output too.
            file.write_all(data).and_then(|()| file.flush()).with_context(|| format!("writing {}", path.display()))?;
            crate::progress::line(&format!("wrote {}", path.display()));
            Ok(())
        }
    }
}

/// Where a command's terminal text goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// Standard output.
    Stdout,
    /// Nowhere: `--quiet`, or standard output holds an output given as `-`.
    Off,
}

/// Whether two paths name one file: the same inode when both exist, else the same absolute
/// path once their directories are resolved (symbolic links, `..`).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return x.dev() == y.dev() && x.ino() == y.ino();
    }
    // Paths whose directory does not exist name no file yet: equal only when spelled alike.
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// A path with its directory resolved (the file itself may not exist yet).
fn resolved(p: &Path) -> Option<PathBuf> {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.canonicalize().ok()?,
        _ => std::env::current_dir().ok()?,
    };
    Some(dir.join(p.file_name()?))
}

/// Refuses an output that is also one of the command's inputs — a file it reads, or a file
/// inside a directory it reads (a results store) — before anything is opened: writing it would
/// destroy what the command reads (`pqtls report STORE --json STORE/records.ndjson`).
pub fn not_an_input(outputs: &[(&str, Option<&Path>)], inputs: &[&Path]) -> Result<()> {
    for (flag, path) in outputs {
        let Some(path) = path.filter(|p| !is_stdout(p)) else { continue };
        for input in inputs {
            let inside = input.is_dir()
                && resolved(path).zip(input.canonicalize().ok()).is_some_and(|(p, d)| p.starts_with(&d))
                && path.exists();
            if same_file(path, input) || inside {
                bail!(
                    "{flag} {}: that is {} this command reads; writing it would destroy it. Give another file, \
                     e.g. {flag} {}",
                    path.display(),
                    if inside { format!("a file of {}, which", input.display()) } else { "an input".to_string() },
                    example_file(flag)
                );
            }
        }
    }
    Ok(())
}

/// Checks a command's output flags (`("--json", path)`, …): no two may name one file (the
/// first would be lost), and at most one may be `-`, which then takes standard output from
/// the terminal text (`quiet`: no terminal text anyway).
pub fn terminal(outputs: &[(&str, Option<&Path>)], quiet: bool) -> Result<Terminal> {
    let files: Vec<(&str, &Path)> =
        outputs.iter().filter_map(|(f, p)| Some((*f, (*p)?))).filter(|(_, p)| !is_stdout(p)).collect();
    for (i, (a, pa)) in files.iter().enumerate() {
        if let Some((b, _)) = files[..i].iter().find(|(_, pb)| same_file(pa, pb)) {
            bail!(
                "{b} and {a} both name {}: one file cannot hold two outputs (the first would be lost); give {a} a \
                 file of its own",
                pa.display()
            );
        }
    }
    let dashes: Vec<&str> = outputs.iter().filter(|(_, p)| p.is_some_and(is_stdout)).map(|(f, _)| *f).collect();
    if dashes.len() > 1 {
        bail!(
            "{} all ask for standard output (-): at most one output may go there; give the others a file, e.g. {} {}",
            dashes.join(" and "),
            dashes[1],
            example_file(dashes[1])
        );
    }
    Ok(if quiet || !dashes.is_empty() { Terminal::Off } else { Terminal::Stdout })
}

/// A file name for an output flag, for error messages.
fn example_file(flag: &str) -> &'static str {
    match flag {
        "--json" => "out.json",
        "--csv" | "--summary-csv" | "--load-csv" | "--transfer-csv" | "--resident-csv" => "out.csv",
        "--ndjson" | "--timelines" => "out.ndjson",
        "--html" => "report.html",
        "--markdown" => "report.md",
        _ => "FILE",
    }
}

/// Refuses `-` for a flag whose file is written as the command goes (key logs, captures) or is
/// a directory: those cannot be standard output.
pub fn not_stdout(flag: &str, path: Option<&Path>, what: &str, example: &str) -> Result<()> {
    if path.is_some_and(is_stdout) {
        bail!("{flag} -: {what} cannot go to standard output; give a path, e.g. {flag} {example}");
    }
    Ok(())
}

impl Terminal {
    /// Prints terminal text. A reader that went away is not an error (the text is lost, and
    /// only the text: results are written before it); another failure (`/dev/full`) is.
    pub fn print(self, text: &str) -> Result<()> {
        if self == Terminal::Off {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            r => r.context("writing to standard output"),
        }
    }
}

/// Prints terminal text on standard output (see [`Terminal::print`]).
pub fn print(text: &str) -> Result<()> {
    Terminal::Stdout.print(text)
}

/// A key log that failed to take a secret during the run is an error naming it (after the
/// results were written): connections whose secrets are missing would not decrypt later.
pub fn key_log_written(key_log: Option<&pqtls_lab::keylog::KeyLogFile>) -> Result<()> {
    match key_log.and_then(|k| k.error()) {
        Some(e) => anyhow::bail!("{e}; the results are kept, but TLS secrets are missing from the key log"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rule, kept: terminal text goes through `print`, never through the std macros (they
    /// panic on a closed stdout: `pqtls serve | true` exited 101).
    #[test]
    fn no_print_macro_writes_to_stdout() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let macros = [concat!("print", "ln!("), concat!("print", "!(")];
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&src).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                // `eprintln!(` contains `println!(`: only stdout's macros count here.
                let code = code.replace(concat!("ep", "rintln!("), "").replace(concat!("ep", "rint!("), "");
                if macros.iter().any(|m| code.contains(m)) {
                    found.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(found.is_empty(), "use output::print (a closed stdout must not panic):\n{}", found.join("\n"));
    }

    #[test]
    fn an_output_may_not_be_an_input_nor_another_output() {
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let records = store.join("records.ndjson");
        std::fs::write(&records, "{}\n").unwrap();
        // Another spelling of the same file: through `..`.
        let other = store.join("../store/records.ndjson");
        let e = not_an_input(&[("--json", Some(&other))], &[&store]).unwrap_err().to_string();
        assert!(e.contains("--json") && e.contains("destroy"), "{e}");
        let pcap = tmp.path().join("cap.pcap");
        std::fs::write(&pcap, "x").unwrap();
        let e = not_an_input(&[("--csv", Some(&pcap))], &[&pcap]).unwrap_err().to_string();
        assert!(e.contains("an input"), "{e}");
        // A new file in the store's directory is not an input; elsewhere neither.
        assert!(not_an_input(&[("--json", Some(&store.join("new.json")))], &[&store]).is_ok());
        assert!(not_an_input(&[("--json", Some(&tmp.path().join("out.json")))], &[&store, &pcap]).is_ok());
        let e = terminal(&[("--json", Some(&tmp.path().join("a"))), ("--csv", Some(&tmp.path().join("a")))], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--json and --csv both name") && e.contains("a file of its own"), "{e}");
    }

    #[test]
    fn at_most_one_output_is_standard_output() {
        let dash = Path::new("-");
        let file = Path::new("x.json");
        assert_eq!(terminal(&[("--json", Some(file)), ("--csv", None)], false).unwrap(), Terminal::Stdout);
        assert_eq!(terminal(&[("--json", Some(file))], true).unwrap(), Terminal::Off);
        assert_eq!(terminal(&[("--json", Some(dash)), ("--csv", Some(file))], false).unwrap(), Terminal::Off);
        let e = terminal(&[("--json", Some(dash)), ("--csv", Some(dash))], false).unwrap_err().to_string();
        assert!(e.contains("--json and --csv") && e.contains("--csv out.csv"), "{e}");
    }

    #[test]
    fn an_unwritten_output_the_command_made_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.json");
        drop(create(Some(&p)).unwrap());
        assert!(!p.exists());
        std::fs::write(&p, "keep").unwrap();
        drop(create(Some(&p)).unwrap());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "keep");
        let q = dir.path().join("w.json");
        write(create(Some(&q)).unwrap().unwrap(), b"[]").unwrap();
        assert_eq!(std::fs::read_to_string(&q).unwrap(), "[]");
    }
}

/// One exporter's output for a result set.
pub fn render(name: &str, set: &pqtls_export::ResultSet, opts: &pqtls_export::ReportOptions) -> Result<String> {
    let e = pqtls_export::exporter(name).with_context(|| format!("no exporter named {name}"))?;
    Ok(e.render(set, opts)?)
}
