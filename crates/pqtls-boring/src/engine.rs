//! The BoringSSL engine: a shared object holding BoringSSL (crates/pqtls-boring/engine),
//! embedded in this crate and loaded from memory.
//!
//! BoringSSL and OpenSSL export the same C symbols, so they cannot both be linked into one
//! binary. The engine links BoringSSL into a `cdylib` that exports only its `pqb_*`
//! functions; every BoringSSL symbol is local to it, so its calls bind inside it, never to
//! OpenSSL's functions in the pqtls binary (and OpenSSL's never to it). The object is written
//! to an anonymous memory file (`memfd_create`) and opened with `dlopen(RTLD_NOW |
//! RTLD_LOCAL)`, once per process: the pqtls binary stays one file, and nothing is written
//! to disk.

use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The engine, built by build.rs.
static ENGINE_SO: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpqtls_boring_engine.so"));

/// The engine's ABI revision this crate speaks (engine/src/lib.rs `ABI_VERSION`).
const ABI_VERSION: u32 = 2;

pub const OP_VERIFY: c_int = 1;
pub const OP_SIGN: c_int = 2;

/// The engine's callbacks into an endpoint (engine/src/lib.rs `Hooks`, same layout).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Hooks {
    pub user: *mut c_void,
    pub message: unsafe extern "C" fn(user: *mut c_void, write: c_int, msg: *const u8, len: usize),
    pub boundary: unsafe extern "C" fn(user: *mut c_void),
    pub op: unsafe extern "C" fn(user: *mut c_void, op: c_int),
    pub key_log: unsafe extern "C" fn(user: *mut c_void, line: *const c_char, len: usize),
}

/// What a handshake negotiated (engine/src/lib.rs `NegotiatedRaw`, same layout).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct NegotiatedRaw {
    pub group: u16,
    pub peer_sigalg: u16,
    pub cipher: u16,
    pub hrr: c_int,
    pub resumed: c_int,
    pub tls13: c_int,
}

/// Opaque engine objects.
pub enum PreparedC {}
pub enum EndpointC {}

/// The engine's functions (engine/src/lib.rs documents each).
pub struct Api {
    pub version: unsafe extern "C" fn(*mut u8, usize) -> usize,
    pub prepare: unsafe extern "C" fn(*const u8, usize, *mut u8, usize, *mut usize) -> *mut PreparedC,
    pub prepared_free: unsafe extern "C" fn(*mut PreparedC),
    pub endpoint_new:
        unsafe extern "C" fn(*const PreparedC, c_int, c_int, Hooks, *mut u8, usize, *mut usize) -> *mut EndpointC,
    pub endpoint_free: unsafe extern "C" fn(*mut EndpointC),
    pub error: unsafe extern "C" fn(*const EndpointC, *mut u8, usize) -> usize,
    pub receive: unsafe extern "C" fn(*mut EndpointC, *const u8, usize) -> c_int,
    pub drive: unsafe extern "C" fn(*mut EndpointC) -> c_int,
    pub pending: unsafe extern "C" fn(*const EndpointC) -> usize,
    pub take: unsafe extern "C" fn(*mut EndpointC, *mut u8, usize) -> usize,
    pub write: unsafe extern "C" fn(*mut EndpointC, *const u8, usize) -> c_int,
    pub read: unsafe extern "C" fn(*mut EndpointC, *mut u8, usize) -> isize,
    pub peer_closed: unsafe extern "C" fn(*const EndpointC) -> c_int,
    pub close: unsafe extern "C" fn(*mut EndpointC) -> c_int,
    pub negotiated: unsafe extern "C" fn(*const EndpointC) -> NegotiatedRaw,
    pub count_allocations: unsafe extern "C" fn(extern "C" fn(usize), extern "C" fn(usize)),
}

/// BoringSSL allocated `bytes` on this thread: counted by pqtls' memory counters (a no-op
/// when no memory measurement is counting).
extern "C" fn on_boringssl_alloc(bytes: usize) {
    pqtls_core::memory::on_alloc(bytes);
}

/// BoringSSL freed a block of `bytes` on this thread.
extern "C" fn on_boringssl_free(bytes: usize) {
    pqtls_core::memory::on_free(bytes);
}

/// The loaded engine. Loaded once per process and never unloaded: BoringSSL registers
/// thread-exit destructors (`pthread_key_create`, its per-thread error queue), which must stay
/// mapped until every thread that used it has exited; `dlclose` would unmap them.
pub struct Engine {
    pub api: Api,
}

/// The one engine of the process (see [`Engine`] for why it is process-wide).
static ENGINE: std::sync::OnceLock<Result<Engine, String>> = std::sync::OnceLock::new();

impl Engine {
    /// The process' engine, loaded on first use.
    pub fn get() -> Result<&'static Engine, String> {
        ENGINE.get_or_init(Engine::load).as_ref().map_err(Clone::clone)
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl* call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null, NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Engine {
    /// Loads the embedded engine.
    fn load() -> Result<Engine, String> {
        // SAFETY: memfd_create with a static name; we own the returned descriptor.
        let fd = unsafe { libc::memfd_create(c"pqtls-boringssl-engine".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!("memfd_create failed: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut file = std::fs::File::from(fd);
        file.write_all(ENGINE_SO).map_err(|e| format!("writing the BoringSSL engine to memory: {e}"))?;
        let path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a path of digits");
        // SAFETY: dlopen of a complete ELF object; RTLD_LOCAL keeps its (few) exported symbols
        // out of the global namespace. The mapping outlives the descriptor.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        drop(file);
        if handle.is_null() {
            return Err(format!("loading the BoringSSL engine: {}", dlerror()));
        }
        let sym = |name: &str| -> Result<*mut c_void, String> {
            let c = CString::new(name).expect("symbol names have no NUL");
            // SAFETY: handle is a live dlopen handle.
            let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
            if p.is_null() {
                Err(format!("the BoringSSL engine lacks {name}: {}", dlerror()))
            } else {
                Ok(p)
            }
        };
        // Each transmute's target is the `Api` field's declared type.
        #[allow(clippy::missing_transmute_annotations)]
        let load = || -> Result<Api, String> {
            // SAFETY (every transmute): each symbol is the engine's `extern "C"` function of
            // that name, with the signature declared in `Api` (engine/src/lib.rs, same ABI
            // revision, checked below).
            unsafe {
                let abi: unsafe extern "C" fn() -> u32 = std::mem::transmute(sym("pqb_abi_version")?);
                if abi() != ABI_VERSION {
                    return Err(format!("BoringSSL engine ABI {} (expected {ABI_VERSION})", abi()));
                }
                Ok(Api {
                    version: std::mem::transmute(sym("pqb_version")?),
                    prepare: std::mem::transmute(sym("pqb_prepare")?),
                    prepared_free: std::mem::transmute(sym("pqb_prepared_free")?),
                    endpoint_new: std::mem::transmute(sym("pqb_endpoint_new")?),
                    endpoint_free: std::mem::transmute(sym("pqb_endpoint_free")?),
                    error: std::mem::transmute(sym("pqb_error")?),
                    receive: std::mem::transmute(sym("pqb_receive")?),
                    drive: std::mem::transmute(sym("pqb_drive")?),
                    pending: std::mem::transmute(sym("pqb_pending")?),
                    take: std::mem::transmute(sym("pqb_take")?),
                    write: std::mem::transmute(sym("pqb_write")?),
                    read: std::mem::transmute(sym("pqb_read")?),
                    peer_closed: std::mem::transmute(sym("pqb_peer_closed")?),
                    close: std::mem::transmute(sym("pqb_close")?),
                    negotiated: std::mem::transmute(sym("pqb_negotiated")?),
                    count_allocations: std::mem::transmute(sym("pqb_count_allocations")?),
                })
            }
        };
        match load() {
            Ok(api) => {
                // Every BoringSSL block goes through the engine's allocator hooks from the
                // first; from now on they report to pqtls' memory counters.
                // SAFETY: both functions live as long as the process and allocate nothing.
                unsafe { (api.count_allocations)(on_boringssl_alloc, on_boringssl_free) };
                Ok(Engine { api })
            }
            Err(e) => {
                // SAFETY: nothing of the engine is in use yet.
                unsafe { libc::dlclose(handle) };
                Err(e)
            }
        }
    }

    /// `BoringSSL (API n)`: what the library inside the engine reports.
    pub fn version(&self) -> String {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer has buf.len() writable bytes.
        let n = unsafe { (self.api.version)(buf.as_mut_ptr(), buf.len()) };
        String::from_utf8_lossy(&buf[..n.min(buf.len())]).into_owned()
    }
}

/// Calls `f` with an error buffer, and turns a null result into the message written there.
pub fn with_error<T>(f: impl FnOnce(*mut u8, usize, *mut usize) -> *mut T) -> Result<*mut T, String> {
    let mut buf = vec![0u8; 4096];
    let mut len = 0usize;
    let p = f(buf.as_mut_ptr(), buf.len(), &mut len);
    if p.is_null() {
        Err(String::from_utf8_lossy(&buf[..len.min(buf.len())]).into_owned())
    } else {
        Ok(p)
    }
}
