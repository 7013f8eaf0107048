//! Mapped pinned host memory a device's images point at (the panic record, the print buffer: [`crate::plugin::gpu`]'s
//! protocols, whose host sides read it through [`HostBlock`]), and finding the image's global that points at it: the host reads
//! it without the context, which a trap leaves unusable.

use super::error::fail;
use crate::plugin::gpu::host_block::{HostBlock, Protocol};
use cudarc::driver::result::{self};
use cudarc::driver::sys::{self, CUresult};
use std::ffi::CString;
use std::ptr::NonNull;

/// A protocol's block in mapped pinned host memory (portable, so any context may map it), and its address on the
/// device, which each loaded image's global for it holds ([`point_global`]). The host reads it without the context,
/// so a kernel that killed the context leaves it readable.
pub(super) struct HostSlot {
    pub(super) host: NonNull<u8>,
    pub(super) device: sys::CUdeviceptr,
}

impl HostSlot {
    /// Allocates `protocol`'s block, mapped into the current context's address space, zero-fills it and sets it up
    /// before anyone else knows of it.
    pub(super) fn new(protocol: &Protocol) -> Result<HostSlot, String> {
        let bytes = protocol.bytes;
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: a context is current (the caller's).
        let host =
            unsafe { result::malloc_host(bytes, flags) }.map_err(|e| fail("cuMemHostAlloc", e))?;
        let Some(host) = NonNull::new(host.cast::<u8>()) else {
            return Err("cuMemHostAlloc returned no memory".into());
        };
        // SAFETY: page-aligned memory of `bytes` bytes, ours alone until its address is handed out: zeroed, it is
        // what the protocol's `init` sets up.
        unsafe {
            host.write_bytes(0, bytes);
            protocol.init(host);
        }
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: `host` came from cuMemHostAlloc with DEVICEMAP; the driver writes one device pointer.
        let mapped =
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr().cast(), 0) }
                .result();
        if let Err(e) = mapped {
            // SAFETY: allocated above, not handed out.
            let _ = unsafe { result::free_host(host.as_ptr().cast()) };
            return Err(fail("cuMemHostGetDevicePointer", e));
        }
        Ok(HostSlot { host, device })
    }

    /// Frees the memory.
    ///
    /// # Safety
    /// The slot came from [`HostSlot::new`]; no launch that could use it runs any more, and it is not used again.
    pub(super) unsafe fn free(&self) {
        // SAFETY: per the contract. A failure leaves nothing to do.
        let _ = unsafe { result::free_host(self.host.as_ptr().cast()) };
    }
}

impl HostBlock for HostSlot {
    fn host_address(&self) -> Option<NonNull<u8>> {
        Some(self.host)
    }
}

/// Why a global of `bytes` bytes cannot hold a device address, if it cannot.
pub(super) fn not_a_pointer(symbol: &str, bytes: usize) -> Option<String> {
    (bytes != size_of::<sys::CUdeviceptr>())
        .then(|| format!("the image's {symbol} is {bytes} bytes, not a device address"))
}

/// The device address of `module`'s global `symbol`, which holds a device address: `None` if the image has none
/// (built before that global existed). The device points it with a copy ([`super::device`]'s `point_global`).
///
/// # Safety
/// `module` is loaded in the current context.
pub(super) unsafe fn global_pointer(
    module: sys::CUmodule,
    symbol: &str,
) -> Result<Option<sys::CUdeviceptr>, String> {
    let name = CString::new(symbol).map_err(|e| e.to_string())?;
    // SAFETY: per the contract.
    let (global, bytes) = match unsafe { result::module::get_global(module, name) } {
        Ok(found) => found,
        Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => return Ok(None),
        Err(e) => return Err(fail("cuModuleGetGlobal", e)),
    };
    match not_a_pointer(symbol, bytes) {
        Some(why) => Err(why),
        None => Ok(Some(global)),
    }
}
