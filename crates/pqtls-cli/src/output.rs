//! Output files of a command (`--json`, `--csv`, `--html`, …): opened at once, so that a path
//! that cannot be written fails before any work, naming the path — but **not truncated until
//! the command writes them**, so a command that fails leaves a user's existing file as it was.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub struct Output {
    path: PathBuf,
    file: std::fs::File,
    /// The command made this file (it did not exist before): only such a file may be removed
    /// again when the command fails (never `/dev/null` or a user's existing file).
    made: bool,
}

/// Opens (creating when missing) the output at `path`, without touching its content yet.
pub fn create(path: Option<&Path>) -> Result<Option<Output>> {
    path.map(|p| {
        let made = std::fs::symlink_metadata(p).is_err();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(p)
            .with_context(|| format!("cannot write {}", p.display()))?;
        Ok(Output { path: p.to_path_buf(), file, made })
    })
    .transpose()
}

/// Removes the outputs this command made (still empty regular files) when it failed before it
/// could write them, so that a failed command leaves no empty report behind.
pub fn discard<'a>(outputs: impl IntoIterator<Item = &'a Option<Output>>) {
    for o in outputs.into_iter().flatten() {
        if o.made && o.file.metadata().is_ok_and(|m| m.is_file() && m.len() == 0) {
            let _ = std::fs::remove_file(&o.path);
        }
    }
}

/// Replaces the output's content with `data` (a regular file is truncated first; a pipe or a
/// device such as `/dev/stdout` is just written to).
pub fn write(out: Output, data: &[u8]) -> Result<()> {
    use std::io::Write;
    let Output { path, mut file, .. } = out;
    if file.metadata().is_ok_and(|m| m.is_file()) {
        file.set_len(0).with_context(|| format!("writing {}", path.display()))?;
    }
    // Flushed, not synced: a pipe or a device is a fine output too.
    file.write_all(data).and_then(|()| file.flush()).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
