//! What a GPU launch is, shared by the CUDA plugin and gpu-sim, which stands in for it: how kernel arguments are
//! packed (CUDA's `kernelParams`) and the geometry of a launch whose clauses leave it open; and, shared by the CUDA
//! and AMD plugins, what a failed kernel's panic record says.

use super::error::PluginError;
use super::interface::Arg;
use offload_model::gpu_panic::Taken;
use std::ffi::c_void;

/// The message of a panic on a GPU: its code records where and which thread, not the message (offload-device's
/// handlers read none: the message's formatting code would cost every kernel registers, panicking or not).
pub const NO_MESSAGE: &str = "panicked (GPU code records where, not the message)";

/// A failed kernel's error on a GPU whose trap loses the device: the panic its record holds, else `trap`.
pub fn panic_or_trap(record: Option<Taken>, trap: impl FnOnce() -> PluginError) -> PluginError {
    match PluginError::from_panic_record(record, true, trap) {
        PluginError::Panic {
            message,
            location,
            thread,
            lost,
        } if message.is_empty() => PluginError::Panic {
            message: NO_MESSAGE.into(),
            location,
            thread,
            lost,
        },
        e => e,
    }
}

/// CUDA's `kernelParams` for the calling convention `(dyn_ptr, a0, .., ak)`: a pointer to each parameter's 8 bytes,
/// `dyn_ptr` first. Whoever launches copies the bytes each points to (the driver, or gpu-sim's [`unpack`]); they
/// are never read as numbers here (a small by-value argument's padding is uninitialised).
pub fn kernel_params(dyn_ptr: &u64, args: &[Arg]) -> Vec<*mut c_void> {
    let mut params: Vec<*mut c_void> = Vec::with_capacity(args.len() + 1);
    params.push((dyn_ptr as *const u64).cast_mut().cast());
    params.extend(args.iter().map(|a| a.as_ptr().cast_mut().cast::<c_void>()));
    params
}

/// What a driver does with [`kernel_params`]: copies each parameter's 8 bytes; `(dyn_ptr, args)`.
///
/// # Safety
/// `params` came from [`kernel_params`], whose `dyn_ptr` and arguments are still alive.
pub unsafe fn unpack(params: &[*mut c_void]) -> (u64, Vec<Arg>) {
    // SAFETY: per the contract, each pointer points to 8 live bytes (the first an initialised `u64`).
    unsafe {
        (
            params[0].cast::<u64>().read(),
            params[1..].iter().map(|p| p.cast::<Arg>().read()).collect(),
        )
    }
}

/// (teams, threads per team) of a launch on a GPU of `multiprocessors` whose clauses leave them open: a construct of
/// wide teams (`Construct::wide_teams`: `teams, parallel`, `parallel_for`) gets a block of 256 threads per
/// multiprocessor; a work-shared teams loop is a grid-stride loop, with enough blocks of 128 to fill every
/// multiprocessor several times over.
pub fn default_geometry(multiprocessors: u32, wide: bool) -> (u32, u32) {
    if wide {
        (multiprocessors, 256)
    } else {
        (multiprocessors.saturating_mul(8), 128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_model::gpu_panic::{record_str, take, PanicRecord, Site};
    use std::mem::MaybeUninit;

    fn trap() -> PluginError {
        PluginError::Trap {
            message: "the kernel trapped".into(),
        }
    }

    #[test]
    fn a_written_record_is_a_panic_that_loses_the_device_and_says_where() {
        let mut r = PanicRecord::new();
        let site = Site {
            file: "src/lib.rs",
            line: 12,
            column: 9,
            block: 3,
            thread: 17,
        };
        // SAFETY: a live record, written as a GPU's panicking thread does, then taken as the plugin does.
        let taken = unsafe {
            record_str(&mut r, "", &site);
            take(&mut r)
        };
        let e = panic_or_trap(taken, trap);
        assert!(e.device_lost());
        assert_eq!(e.to_string(), NO_MESSAGE);
        assert_eq!(e.location(), Some(&("src/lib.rs".to_string(), 12, 9)));
        assert_eq!(e.thread(), Some((3, 17)));
        // A message, where a device records one, is kept.
        // SAFETY: as above.
        let taken = unsafe {
            record_str(&mut r, "index out of bounds", &site);
            take(&mut r)
        };
        assert_eq!(
            panic_or_trap(taken, trap).to_string(),
            "index out of bounds"
        );
    }

    #[test]
    fn without_a_record_the_trap_is_the_error() {
        let e = panic_or_trap(None, trap);
        assert!(matches!(e, PluginError::Trap { .. }), "{e:?}");
        assert!(e.device_lost());
    }

    #[test]
    fn arguments_come_out_as_they_went_in() {
        let args: Vec<Arg> = [7u64, u64::MAX, 0].map(MaybeUninit::new).to_vec();
        let dyn_ptr = 0x1000;
        let params = kernel_params(&dyn_ptr, &args);
        assert_eq!(params.len(), 4);
        // SAFETY: `dyn_ptr` and `args` are alive.
        let (d, out) = unsafe { unpack(&params) };
        assert_eq!(d, 0x1000);
        // SAFETY: every argument here is initialised.
        let out: Vec<u64> = out.iter().map(|a| unsafe { a.assume_init() }).collect();
        assert_eq!(out, [7, u64::MAX, 0]);
    }
}
