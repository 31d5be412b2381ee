//! The Debian trixie root that scripts/trixie-root.sh makes (OpenSSL 3.5, nginx, HAProxy,
//! curl, h2load; scripts/oqs-peer.sh adds oqs-provider): commands run in it with chroot, and
//! files are staged into it.

use pqtls_core::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where scripts/trixie-root.sh keeps the root unless `PQTLS_TRIXIE_ROOT` says otherwise
/// (the script prints the path it used).
pub const DEFAULT_ROOT: &str = "/var/cache/pqtls/trixie";

/// A Debian trixie root on this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    path: PathBuf,
}

impl Root {
    /// The root at `path`; an error naming scripts/trixie-root.sh if it is not one.
    pub fn open(path: impl Into<PathBuf>) -> Result<Root> {
        let path = path.into();
        if !path.join("usr/bin/openssl").is_file() {
            return Err(Error::Unsupported(format!(
                "{} is not a Debian trixie root with OpenSSL 3.5 (no usr/bin/openssl): make it with \
                 scripts/trixie-root.sh (as root; it prints the root's path)",
                path.display()
            )));
        }
        Ok(Root { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `chroot <root> <program>`: add the arguments, stdio and environment.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("chroot");
        c.arg(&self.path).arg(program);
        c
    }

    /// The path on this machine of `inside` (a path as the root sees it).
    pub fn host_path(&self, inside: &str) -> PathBuf {
        self.path.join(inside.trim_start_matches('/'))
    }

    /// A new, empty directory under the root's /tmp (`/tmp/pqtls-<tag>-<pid>-<n>`), removed
    /// when the returned value is dropped.
    pub fn stage(&self, tag: &str) -> Result<Staged> {
        Staged::new_under(&self.path.join("tmp"), "/tmp", tag)
    }
}

/// A directory a peer reads its files from: `host` here, `inside` as the peer sees it (the
/// same path when no chroot is involved). Removed when dropped.
#[derive(Debug)]
pub struct Staged {
    pub host: PathBuf,
    pub inside: String,
}

impl Staged {
    /// A new directory `pqtls-<tag>-<pid>-<n>` under `host_parent` (seen by the peer as
    /// under `inside_parent`); `n` is the first number not taken. Directories of that form
    /// whose process is gone (left by a pqtls that was SIGKILLed) are removed first.
    pub fn new_under(host_parent: &Path, inside_parent: &str, tag: &str) -> Result<Staged> {
        if tag.is_empty() || !tag.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(Error::Invalid(format!("staging tag {tag:?}: use letters, digits, '-', '_', '.'")));
        }
        std::fs::create_dir_all(host_parent)
            .map_err(|e| Error::io(format!("creating {}", host_parent.display()), e))?;
        sweep(host_parent);
        let pid = std::process::id();
        for n in 0..10_000 {
            let name = format!("pqtls-{tag}-{pid}-{n}");
            let host = host_parent.join(&name);
            match std::fs::create_dir(&host) {
                Ok(()) => {
                    let inside = format!("{}/{name}", inside_parent.trim_end_matches('/'));
                    let staged = Staged { host, inside };
                    staged.write(MARKER, pid.to_string().as_bytes())?;
                    return Ok(staged);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", host.display()), e)),
            }
        }
        Err(Error::Other(format!("no free staging directory name under {}", host_parent.display())))
    }

    /// Copies `from` (a file here) to `name` in the directory; returns its path as the peer sees it.
    pub fn copy(&self, from: &Path, name: &str) -> Result<String> {
        std::fs::copy(from, self.host.join(name))
            .map_err(|e| Error::io(format!("copying {} to {}", from.display(), self.host.join(name).display()), e))?;
        Ok(self.inside(name))
    }

    /// Writes `name` in the directory; returns its path as the peer sees it.
    pub fn write(&self, name: &str, contents: &[u8]) -> Result<String> {
        std::fs::write(self.host.join(name), contents)
            .map_err(|e| Error::io(format!("writing {}", self.host.join(name).display()), e))?;
        Ok(self.inside(name))
    }

    /// `name` in the directory as the peer sees it.
    pub fn inside(&self, name: &str) -> String {
        format!("{}/{name}", self.inside)
    }
}

/// The file that marks a staged directory (it holds the owner's pid): only directories with
/// it are ever swept.
const MARKER: &str = ".pqtls-staged";

/// Removes the staged directories under `dir` (`pqtls-*` with a [`MARKER`]) whose owner
/// process is not alive.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        if !e.file_name().to_str().is_some_and(|n| n.starts_with("pqtls-")) {
            continue;
        }
        let Ok(owner) = std::fs::read_to_string(e.path().join(MARKER)) else { continue };
        let Ok(pid) = owner.trim().parse::<u32>() else { continue };
        if pid != std::process::id() && !crate::process::is_alive(pid) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_directories_are_distinct_and_removed() {
        let base = std::env::temp_dir().join(format!("pqtls-peers-stage-{}", std::process::id()));
        let a = Staged::new_under(&base, "/x", "t").unwrap();
        let b = Staged::new_under(&base, "/x", "t").unwrap();
        assert_ne!(a.host, b.host);
        assert!(a.inside.starts_with("/x/pqtls-t-"), "{}", a.inside);
        assert_eq!(a.write("f", b"1").unwrap(), format!("{}/f", a.inside));
        let host = a.host.clone();
        drop(a);
        assert!(!host.exists());
        drop(b);
        assert!(Staged::new_under(&base, "/x", "a b").is_err());
        // Left by a process that is gone (pid 0 is never a live process's): swept; a
        // directory without the marker is never touched.
        let stale = base.join("pqtls-via-nginx-0-3");
        std::fs::create_dir_all(stale.join("sub")).unwrap();
        std::fs::write(stale.join(MARKER), "0").unwrap();
        let foreign = base.join("pqtls-results-2024-01");
        std::fs::create_dir_all(&foreign).unwrap();
        let c = Staged::new_under(&base, "/x", "t").unwrap();
        assert!(!stale.exists());
        assert!(foreign.exists());
        drop(c);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_directory_that_is_not_a_root_names_the_script() {
        let e = Root::open("/nonexistent-root").unwrap_err().to_string();
        assert!(e.contains("scripts/trixie-root.sh") && e.contains("/nonexistent-root"), "{e}");
    }
}
