//! A key-log file: the secrets endpoints derive, in the NSS `SSLKEYLOGFILE` format that
//! Wireshark reads (`LABEL <client random hex> <secret hex>`, one line per secret).

use pqtls_core::backend::KeyLog;
use pqtls_core::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Appends each secret to a file, one line at a time (flushed per line), from any number of
/// endpoints and threads. The file holds secrets: it is created readable by its owner only
/// (0600), and an existing one that others may read is refused.
#[derive(Debug)]
pub struct KeyLogFile {
    path: PathBuf,
    file: Mutex<File>,
    /// Lines that could not be written (the first error is kept).
    failed: Mutex<Option<String>>,
}

impl KeyLogFile {
    /// Opens `path` for appending (created 0600 if missing) and writes a comment line to it, so
    /// that a file that cannot be written (a full disk, `/dev/full`) is an error now rather
    /// than secrets silently lost later. An existing regular file that its group or others may
    /// read or write is refused (the secrets decrypt every connection).
    pub fn open(path: &Path) -> Result<KeyLogFile> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io(format!("opening the key-log file {}", path.display()), e))?;
        let meta = file.metadata().map_err(|e| Error::io(format!("reading the key-log file {}", path.display()), e))?;
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_file() && mode & 0o077 != 0 {
            return Err(Error::Invalid(format!(
                "the key-log file {} can be read by other users (mode {mode:04o}); TLS secrets must not be: \
                 chmod 600 {} or give a new file",
                path.display(),
                path.display()
            )));
        }
        // NSS key-log readers (Wireshark, tshark, pqtls capture) skip lines starting with '#'.
        file.write_all(b"# SSLKEYLOGFILE: TLS secrets written by pqtls\n")
            .and_then(|_| file.flush())
            .map_err(|e| Error::io(format!("writing the key-log file {}", path.display()), e))?;
        Ok(KeyLogFile { path: path.to_path_buf(), file: Mutex::new(file), failed: Mutex::new(None) })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The first write error, if any line could not be written (a key log cannot return
    /// errors to the TLS stack that calls it, so they are kept for the caller).
    pub fn error(&self) -> Option<String> {
        self.failed.lock().ok().and_then(|f| f.clone())
    }
}

/// One key-log line, newline included.
pub fn line(label: &str, client_random: &[u8], secret: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(label.len() + 2 * (client_random.len() + secret.len()) + 3);
    s.push_str(label);
    s.push(' ');
    for b in client_random {
        let _ = write!(s, "{b:02x}");
    }
    s.push(' ');
    for b in secret {
        let _ = write!(s, "{b:02x}");
    }
    s.push('\n');
    s
}

impl KeyLog for KeyLogFile {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let text = line(label, client_random, secret);
        let result = match self.file.lock() {
            Ok(mut f) => f.write_all(text.as_bytes()).and_then(|_| f.flush()),
            Err(_) => Err(std::io::Error::other("the key-log file lock is poisoned")),
        };
        if let Err(e) = result {
            if let Ok(mut failed) = self.failed.lock() {
                failed.get_or_insert_with(|| format!("writing the key-log file {}: {e}", self.path.display()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn lines_are_in_the_nss_format_and_appended() {
        let dir = std::env::temp_dir().join(format!("pqtls-keylog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("keys.log");
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, "# existing\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let log = KeyLogFile::open(&path).unwrap();
        log.log("CLIENT_TRAFFIC_SECRET_0", &[0x01, 0xab], &[0xff, 0x00, 0x10]);
        std::thread::scope(|s| {
            s.spawn(|| log.log("SERVER_TRAFFIC_SECRET_0", &[0x02], &[0x03]));
        });
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# existing\n# SSLKEYLOGFILE: TLS secrets written by pqtls\n\
             CLIENT_TRAFFIC_SECRET_0 01ab ff0010\nSERVER_TRAFFIC_SECRET_0 02 03\n"
        );
        assert!(log.error().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_key_log_is_readable_by_its_owner_only_and_a_shared_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys.log");
        KeyLogFile::open(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let shared = dir.path().join("shared.log");
        std::fs::write(&shared, "").unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = KeyLogFile::open(&shared).unwrap_err().to_string();
        assert!(e.contains("shared.log") && e.contains("0644") && e.contains("chmod 600"), "{e}");
    }

    #[test]
    fn a_key_log_that_cannot_be_written_is_an_error_naming_it() {
        let e = KeyLogFile::open(Path::new("/dev/full")).unwrap_err().to_string();
        assert!(e.contains("/dev/full"), "{e}");
        // /dev/full is left as it was (a device's mode is not the key log's business).
        assert_eq!(std::fs::metadata("/dev/full").unwrap().permissions().mode() & 0o777, 0o666);
    }
}
