//! Loading a host-compiled image (an x86_64 shared object) from memory: a memfd, never a temporary file.

use crate::plugin::error::PluginError;
use crate::plugin::interface::{DevicePtr, Global, Kernel, LoadedImageOps};
use crate::registry::Image;
use std::ffi::{c_void, CStr, CString};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};

/// A loaded shared object, never unloaded (its kernels stay valid for the life of the process).
pub struct SharedObject {
    handle: *mut c_void,
}

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for SharedObject {}
unsafe impl Sync for SharedObject {}

impl SharedObject {
    /// The address of the exported symbol `name`, or null.
    pub fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: `handle` is a live dlopen handle (RTLD_NODELETE: never unloaded).
        unsafe { libc::dlsym(self.handle, name.as_ptr()) }
    }
}

impl LoadedImageOps for SharedObject {
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError> {
        let p = self.symbol(symbol);
        Ok((!p.is_null()).then_some(Kernel(p as usize)))
    }

    fn global(&self, symbol: &CStr) -> Result<Option<Global>, PluginError> {
        let p = self.symbol(symbol);
        if p.is_null() {
            return Ok(None);
        }
        Ok(Some(Global {
            address: p as DevicePtr,
            size: symbol_size(p),
        }))
    }
}

/// The size of the symbol at `p` (its ELF `st_size`), as the dynamic linker knows it.
fn symbol_size(p: *mut c_void) -> Option<usize> {
    // glibc's `RTLD_DL_SYMENT`: `dladdr1` also returns the symbol's `ElfW(Sym)`.
    const RTLD_DL_SYMENT: i32 = 1;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut sym: *mut c_void = std::ptr::null_mut();
    // SAFETY: `p` is an address in a loaded object; `dladdr1` writes `info` and a pointer to the symbol entry.
    let found = unsafe { libc::dladdr1(p, info.as_mut_ptr(), &mut sym, RTLD_DL_SYMENT) };
    if found == 0 || sym.is_null() {
        return None;
    }
    // SAFETY: with `RTLD_DL_SYMENT`, `sym` points at the symbol's entry in the object's symbol table, which lives as
    // long as the object (never unloaded).
    let size = unsafe { (*(sym as *const libc::Elf64_Sym)).st_size };
    usize::try_from(size).ok()
}

/// Loads an image's shared object.
pub fn load(image: &Image) -> Result<SharedObject, PluginError> {
    let load = |reason: String| PluginError::Load { reason };
    if image.bytes.get(..4) != Some(b"\x7fELF") {
        return Err(load("not an ELF shared object".into()));
    }
    let name = CString::new(format!("offload-image-{}", image.package)).unwrap_or_default();
    // SAFETY: memfd_create returns a new descriptor that we own.
    let mut file = unsafe {
        let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Err(load(format!(
                "memfd_create: {}",
                std::io::Error::last_os_error()
            )));
        }
        std::fs::File::from_raw_fd(fd)
    };
    file.write_all(image.bytes)
        .map_err(|e| load(format!("writing the image to a memfd: {e}")))?;
    let path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or_default();
    // SAFETY: loads our own image; RTLD_NODELETE keeps it (and its kernels) for the life of the process.
    let handle = unsafe {
        libc::dlopen(
            path.as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE,
        )
    };
    if handle.is_null() {
        return Err(load(dlerror()));
    }
    // The memfd stays open too: glibc finds an already-loaded object by its path, so a closed descriptor's
    // number reused for the next image's `/proc/self/fd/N` would hand back this image instead.
    let _ = file.into_raw_fd();
    Ok(SharedObject { handle })
}

fn dlerror() -> String {
    // SAFETY: dlerror returns a thread-local message or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null dlerror results are NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}
