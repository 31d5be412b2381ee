//! Named network namespaces (`ip netns add`) and threads that run inside one.

use crate::cmd;
use crate::error::{Error, Result};
use std::fs::File;
use std::path::PathBuf;
use std::thread::JoinHandle;

/// Where `ip netns add` mounts a named namespace.
pub const NETNS_DIR: &str = "/var/run/netns";

pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// Names of every namespace `ip netns` knows.
pub fn list() -> Result<Vec<String>> {
    let out = cmd::run("ip", &["netns", "list"])?;
    // Lines are `name` or `name (id: 3)`.
    Ok(out.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect())
}

pub fn add(name: &str) -> Result<()> {
    cmd::run("ip", &["netns", "add", name]).map(|_| ())
}

/// Deletes a namespace; one that is already gone is not an error.
pub fn delete(name: &str) -> Result<()> {
    if !path(name).exists() {
        return Ok(());
    }
    cmd::run("ip", &["netns", "delete", name]).map(|_| ())
}

/// Starts `f` on a new thread inside namespace `ns`: the thread enters it (setns) before `f`
/// runs, and so do the sockets and threads `f` creates. Returns once the thread is inside, or
/// with the error that kept it out (then `f` never runs).
pub fn spawn_in<F, T>(ns: &str, thread_name: &str, f: F) -> Result<NsThread<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let p = path(ns);
    let file = File::open(&p).map_err(|e| Error::io(format!("cannot open namespace {}", p.display()), e))?;
    let (tx, rx) = std::sync::mpsc::channel::<Result<()>>();
    let what = format!("cannot enter network namespace {ns}");
    let handle = std::thread::Builder::new()
        .name(thread_name.to_string())
        .spawn(move || {
            let entered =
                nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| Error::nix(what, e));
            drop(file);
            let ok = entered.is_ok();
            let _ = tx.send(entered);
            // Not inside: the caller gets the error, and `f` must not run in the wrong namespace.
            ok.then(f)
        })
        .map_err(|e| Error::io("cannot start a thread", e))?;
    match rx.recv() {
        Ok(Ok(())) => Ok(NsThread { handle, namespace: ns.to_string() }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(Error::Invalid(format!("the thread for namespace {ns} ended before entering it")))
        }
    }
}

/// A thread running inside a lab namespace (from [`spawn_in`]).
#[derive(Debug)]
pub struct NsThread<T> {
    handle: JoinHandle<Option<T>>,
    namespace: String,
}

impl<T> NsThread<T> {
    /// Waits for the thread; `Err` carries its panic, as [`JoinHandle::join`].
    pub fn join(self) -> std::thread::Result<T> {
        let ns = self.namespace;
        self.handle.join()?.ok_or_else(|| -> Box<dyn std::any::Any + Send> {
            Box::new(format!("the thread never entered namespace {ns}"))
        })
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }
}
