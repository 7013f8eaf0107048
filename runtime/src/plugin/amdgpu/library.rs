//! Loading the HSA runtime: `libhsa-runtime64.so.1` is opened at run time (libloading), so a binary built here
//! runs where ROCm is not installed; every entry point is resolved before anything is called, then the runtime is
//! initialised and the plugin's system event handler registered. Done once per process: the library stays mapped
//! and initialised for the life of the process, as the devices and their kernels do.

use super::failure::on_system_event;
use super::safe::{self, HsaError};
use super::sys::Hsa;
use std::sync::OnceLock;

/// Where the HSA runtime is looked for, in order: the loader's search path (the versioned name ROCm installs, then
/// the development symlink), then ROCm's default prefix, which is often not on the search path.
pub const LIBRARY_NAMES: &[&str] = &[
    "libhsa-runtime64.so.1",
    "libhsa-runtime64.so",
    "/opt/rocm/lib/libhsa-runtime64.so.1",
];

/// The loaded, resolved and initialised runtime.
pub struct Runtime {
    pub hsa: Hsa,
    /// Why the system event handler could not be registered (not fatal: a GPU memory fault then ends the process,
    /// as ROCm does by default).
    pub no_event_handler: Option<HsaError>,
}

static RUNTIME: OnceLock<Result<Runtime, HsaError>> = OnceLock::new();

/// The runtime, or why there is none (the same answer every time).
pub fn runtime() -> Result<&'static Runtime, HsaError> {
    RUNTIME.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Runtime, HsaError> {
    let library = open_library()?;
    // SAFETY: the library is an HSA runtime (found by its name); resolving runs no code.
    let hsa = unsafe { Hsa::resolve(library) }.map_err(HsaError::MissingEntryPoints)?;
    let no_event_handler = initialise(&hsa)?;
    Ok(Runtime {
        hsa,
        no_event_handler,
    })
}

/// `hsa_init`, then the system event handler; `Ok` carries why there is no handler, if there is none.
pub fn initialise(hsa: &Hsa) -> Result<Option<HsaError>, HsaError> {
    safe::init(hsa)?;
    Ok(safe::register_system_event_handler(hsa, on_system_event).err())
}

/// Opens the first of [`LIBRARY_NAMES`] that loads. A library that exists but fails to load (a missing dependency)
/// is reported as such, not as ROCm being absent.
fn open_library() -> Result<libloading::Library, HsaError> {
    let mut broken = None;
    for &name in LIBRARY_NAMES {
        // SAFETY: loading the HSA runtime runs only its initialisers; `hsa_init` does the real work later.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return Ok(library),
            Err(e) => {
                let message = std::error::Error::source(&e)
                    .map(ToString::to_string)
                    .unwrap_or_else(|| e.to_string());
                if !is_missing(name, &message) && broken.is_none() {
                    broken = Some(message);
                }
            }
        }
    }
    Err(broken.map_or(HsaError::NotInstalled, HsaError::Unloadable))
}

/// Whether the loader's message says `name` itself does not exist (rather than failing to load).
fn is_missing(name: &str, message: &str) -> bool {
    message
        .strip_prefix(name)
        .is_some_and(|rest| rest.starts_with(": cannot open shared object file"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_told_from_one_that_fails_to_load() {
        assert!(is_missing(
            "libhsa-runtime64.so.1",
            "libhsa-runtime64.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(is_missing(
            "/opt/rocm/lib/libhsa-runtime64.so.1",
            "/opt/rocm/lib/libhsa-runtime64.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_missing(
            "libhsa-runtime64.so.1",
            "libhsakmt.so.1: cannot open shared object file: No such file or directory"
        ));
        assert!(!is_missing(
            "libhsa-runtime64.so.1",
            "libhsa-runtime64.so.1: undefined symbol: hsaKmtOpenKFD"
        ));
    }
}
