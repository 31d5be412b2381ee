//! Reading an input file whatever the user points at: only a regular file (or a symbolic link
//! to one) is read — a FIFO would block every reader forever, `/dev/zero` never ends, a
//! directory is not text — and only up to a size limit that says what it is for, so a 2 GB
//! sparse file is an error naming its size, not a 15 GB allocation. The kind is checked before
//! the file is opened (opening a FIFO blocks).

use pqtls_core::{Error, Result};
use std::io::Read;
use std::path::Path;

/// At most this many bytes in an experiment file (the largest shipped one is ~6 KB).
pub const EXPERIMENT_LIMIT_BYTES: u64 = 1 << 20;
/// At most this many bytes in a small store file (manifest, copy of the experiment).
pub const SMALL_LIMIT_BYTES: u64 = 16 << 20;
/// At most this many bytes in a store's records, failures or raw samples (read whole).
pub const RECORDS_LIMIT_BYTES: u64 = 4 << 30;

/// The file's bytes, when it is a regular file of at most `limit_bytes`; `Ok(None)` when it
/// does not exist. `what` names it in errors (e.g. "the experiment file").
pub fn read_bounded(path: &Path, what: &str, limit_bytes: u64) -> Result<Option<Vec<u8>>> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {what} {}", path.display()), e)),
    };
    if !meta.is_file() {
        return Err(Error::Invalid(format!(
            "{what} {} is {}, not a regular file: give a file (a FIFO, a device or a directory cannot be read as one)",
            path.display(),
            kind(&meta)
        )));
    }
    if meta.len() > limit_bytes {
        return Err(Error::Invalid(format!(
            "{what} {} is {} bytes, more than the {} bytes such a file can be: is it the right file?",
            path.display(),
            meta.len(),
            limit_bytes
        )));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(format!("reading {what} {}", path.display()), e))?;
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(limit_bytes + 1)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(format!("reading {what} {}", path.display()), e))?;
    if data.len() as u64 > limit_bytes {
        return Err(Error::Invalid(format!(
            "{what} {} grew past {limit_bytes} bytes while it was read",
            path.display()
        )));
    }
    Ok(Some(data))
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text(path: &Path, what: &str, limit_bytes: u64) -> Result<Option<String>> {
    read_bounded(path, what, limit_bytes)?
        .map(|d| {
            String::from_utf8(d)
                .map_err(|e| Error::Invalid(format!("{what} {} is not UTF-8 text: {e}", path.display())))
        })
        .transpose()
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_within_their_limit_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let f = tmp.path().join("a.toml");
        std::fs::write(&f, "name = \"a\"\n").unwrap();
        assert_eq!(read_text(&f, "the experiment file", 100).unwrap().unwrap(), "name = \"a\"\n");
        assert!(read_text(&tmp.path().join("missing"), "x", 100).unwrap().is_none());
        let e = read_text(&f, "the experiment file", 4).unwrap_err().to_string();
        assert!(e.contains("11 bytes, more than the 4"), "{e}");
        let e = read_text(Path::new("/dev/zero"), "the experiment file", 100).unwrap_err().to_string();
        assert!(e.contains("is a device, not a regular file"), "{e}");
        let e = read_text(tmp.path(), "the experiment file", 100).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let fifo = tmp.path().join("fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let e = read_text(&fifo, "records", 100).unwrap_err().to_string();
        assert!(e.contains("is a FIFO"), "{e}");
    }
}
