//! A loaded CUDA module and its kernels.

use super::error::fail;
use crate::plugin::error::PluginError;
use crate::plugin::interface::{DevicePtr, Global, Kernel, LoadedImageOps};
use cudarc::driver::result::{self};
use cudarc::driver::sys::{self, CUresult};
use std::ffi::CStr;

pub(super) struct CudaImage {
    pub(super) module: sys::CUmodule,
    pub(super) ctx: sys::CUcontext,
}

// SAFETY: module handles may be used from any thread whose current context is the module's.
unsafe impl Send for CudaImage {}
unsafe impl Sync for CudaImage {}

impl LoadedImageOps for CudaImage {
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError> {
        let failed = |reason: String| PluginError::Lookup {
            symbol: symbol.to_string_lossy().into_owned(),
            reason,
        };
        // SAFETY: `ctx` is a retained primary context; the module was loaded in it and is never unloaded.
        unsafe {
            result::ctx::set_current(self.ctx).map_err(|e| failed(fail("cuCtxSetCurrent", e)))?;
            match result::module::get_function(self.module, symbol.to_owned()) {
                Ok(f) => Ok(Some(Kernel(f as usize))),
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
                Err(e) => Err(failed(fail("cuModuleGetFunction", e))),
            }
        }
    }

    fn global(&self, symbol: &CStr) -> Result<Option<Global>, PluginError> {
        let failed = |reason: String| PluginError::Lookup {
            symbol: symbol.to_string_lossy().into_owned(),
            reason,
        };
        // SAFETY: as for `kernel`.
        unsafe {
            result::ctx::set_current(self.ctx).map_err(|e| failed(fail("cuCtxSetCurrent", e)))?;
            match result::module::get_global(self.module, symbol.to_owned()) {
                Ok((address, bytes)) => Ok(Some(Global {
                    address: address as DevicePtr,
                    size: Some(bytes),
                })),
                Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_FOUND => Ok(None),
                Err(e) => Err(failed(fail("cuModuleGetGlobal", e))),
            }
        }
    }
}
