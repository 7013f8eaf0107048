//! The runtime behind the device numbers, chosen once, on first use, from `OFFLOAD_RUNTIME` and `OMP_TARGET_OFFLOAD`:
//! ours (the device table, its present tables and our plugins) or LLVM's libomptarget ([`super::llvm`]). This is
//! the device layer's one branch on that setting: how many devices there are and which device a construct runs on
//! ([`initial_device`], [`select`]), and what the runtime routines do with a device number, each routine's two
//! implementations side by side here. The region layer's `backend` does the same for region calls and data
//! constructs, over the [`Target`] a construct selected.

use super::entry::DeviceEntry;
use super::llvm::{self, Libomptarget, LlvmError};
use super::table::{devices, number, select_ours, Host, OMP_INITIAL_DEVICE};
use crate::env::{icv, Policy};
use crate::host::geometry::{host_limits, LaunchLimits};
use crate::observe::Label;
use crate::plugin::DeviceDescription;
use std::ffi::c_void;
use std::sync::OnceLock;

/// Which runtime runs the program's constructs and answers its routines.
#[derive(Clone, Copy)]
pub enum Backend {
    /// Ours: the device table (none under `OMP_TARGET_OFFLOAD=DISABLED`, whatever `OFFLOAD_RUNTIME` says).
    Ours,
    /// `OFFLOAD_RUNTIME=llvm`: libomptarget, opened and the program registered with it. Its device numbers are its
    /// own; ours are not reachable.
    Llvm(&'static Libomptarget),
    /// `OFFLOAD_RUNTIME=llvm`, but libomptarget could not be opened or registered: constructs run on the host (an
    /// error under `MANDATORY`), and the routines answer for our device table.
    Unavailable(&'static LlvmError),
}

/// The runtime, chosen on first use (which opens libomptarget under `OFFLOAD_RUNTIME=llvm`).
#[inline]
pub fn backend() -> Backend {
    static CHOSEN: OnceLock<Backend> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        if icv().policy == Policy::Disabled {
            return Backend::Ours;
        }
        match llvm::active() {
            None => Backend::Ours,
            Some(Ok(lib)) => Backend::Llvm(lib),
            Some(Err(e)) => Backend::Unavailable(e),
        }
    })
}

/// A device a construct runs on: one of ours, or one of libomptarget's.
#[derive(Clone, Copy)]
pub enum Target {
    Ours(&'static DeviceEntry),
    Llvm(&'static Libomptarget, i32),
}

impl Target {
    /// The device's number.
    pub fn number(self) -> i32 {
        match self {
            Target::Ours(d) => d.number,
            Target::Llvm(_, d) => d,
        }
    }
}

/// The host's device number, which OpenMP defines as the number of devices.
pub fn initial_device() -> i32 {
    backend().num_devices()
}

/// Whether `device` names the host: `omp_get_initial_device()` or `omp_initial_device`.
pub fn is_initial(device: i32) -> bool {
    device == OMP_INITIAL_DEVICE || device == initial_device()
}

/// The device a number names, `None` for the host; `Err` for numbers that name nothing.
pub fn device_or_host(device: i32) -> Result<Option<&'static DeviceEntry>, ()> {
    if is_initial(device) {
        return Ok(None);
    }
    // Under `OFFLOAD_RUNTIME=llvm` the numbers are libomptarget's, whose devices are not ours to allocate on or copy
    // to (yet): the routines that take them fail as for a device that does not exist.
    if !backend().numbers_ours() {
        return Err(());
    }
    usize::try_from(device)
        .ok()
        .and_then(|d| devices().get(d))
        .map(Some)
        .ok_or(())
}

/// Where a construct runs.
pub enum Selection {
    /// A device of the runtime [`backend`] chose: ours, or libomptarget's under `OFFLOAD_RUNTIME=llvm`.
    Device(Target),
    Host(Host),
}

/// Resolves `device(...)`, `if(...)`, the default device and the policy into a device or the host: the rules every
/// construct shares.
pub fn select(device: Option<i32>, cond: bool) -> Selection {
    if !cond {
        return Selection::Host(Host::Chosen("the if clause is false"));
    }
    if icv().policy == Policy::Disabled {
        return Selection::Host(Host::Chosen("OMP_TARGET_OFFLOAD=DISABLED"));
    }
    match backend() {
        Backend::Ours => {}
        Backend::Unavailable(e) => return Selection::Host(Host::Unavailable(e.to_string().into())),
        Backend::Llvm(lib) => {
            return match number(device, lib.num_devices()) {
                Ok(d) => Selection::Device(Target::Llvm(lib, d)),
                Err(h) => Selection::Host(h),
            }
        }
    }
    match select_ours(device) {
        Ok(dev) => Selection::Device(Target::Ours(dev)),
        Err(h) => Selection::Host(h),
    }
}

impl Backend {
    /// libomptarget, if it runs the program and `device` is one of its devices (not the initial device).
    fn llvm_device(self, device: i32) -> Option<&'static Libomptarget> {
        match self {
            Backend::Llvm(lib) if (0..lib.num_devices()).contains(&device) => Some(lib),
            _ => None,
        }
    }

    /// How many devices there are: the host's device number.
    pub fn num_devices(self) -> i32 {
        match self {
            Backend::Llvm(lib) => lib.num_devices(),
            Backend::Ours | Backend::Unavailable(_) => devices().len() as i32,
        }
    }

    /// Whether the routines that take device numbers may use our device table (not while libomptarget's numbers are
    /// the program's: its devices are not ours to allocate on or copy to).
    pub(super) fn numbers_ours(self) -> bool {
        !matches!(self, Backend::Llvm(_))
    }

    /// What a device offers: its plugin, description and launch limits; the host's for the initial device.
    pub fn describe(self, device: i32) -> Option<(&'static str, DeviceDescription, LaunchLimits)> {
        if let Some(lib) = self.llvm_device(device) {
            // A device of LLVM's host plugin, whose launches run on the host's cores as host-elf's do; a GPU
            // plugin's takes our GPU geometry, for the multiprocessors libomptarget does not tell.
            let (name, arch) = match lib.runs_on_host(device) {
                true => ("its host plugin", std::env::consts::ARCH),
                false => ("a GPU plugin's", "gpu"),
            };
            let description = DeviceDescription {
                name: format!("device {device} of LLVM's libomptarget ({name})"),
                arch: arch.into(),
                memory: 0,
            };
            return Some(("llvm", description, lib.limits(device)));
        }
        match device_or_host(device).ok()? {
            Some(d) => Some((d.plugin, d.describe(), *d.limits())),
            None => {
                let description = DeviceDescription {
                    name: "the host (the initial device)".into(),
                    arch: std::env::consts::ARCH.into(),
                    memory: 0,
                };
                Some(("host", description, host_limits()))
            }
        }
    }

    /// Whether the host data at `ptr` has a device copy on `device`; always for the initial device.
    pub fn is_present(self, ptr: *const c_void, device: i32) -> bool {
        if is_initial(device) {
            return true;
        }
        if let Backend::Llvm(lib) = self {
            return lib.is_present(ptr, device);
        }
        match usize::try_from(device).ok().and_then(|d| devices().get(d)) {
            Some(dev) => dev.table().lookup(ptr as usize, 1).is_some(),
            None => false,
        }
    }

    /// `size` bytes of `device`'s memory (host memory on the initial device); null on failure.
    pub fn alloc(self, size: usize, device: i32) -> *mut c_void {
        if let Some(lib) = self.llvm_device(device) {
            // SAFETY: libomptarget's routine, with its C signature.
            return unsafe { (lib.memory.alloc)(size, device) };
        }
        match device_or_host(device) {
            Ok(Some(d)) => {
                let _scope = d.scope(Label::Construct("omp_target_alloc"));
                d.alloc(size, 1)
                    .map_or(std::ptr::null_mut(), |p| p as usize as *mut c_void)
            }
            // SAFETY: plain malloc; freed by `free` on the initial device.
            Ok(None) => unsafe { libc::calloc(size.max(1), 1) },
            Err(()) => std::ptr::null_mut(),
        }
    }

    /// Frees what [`Backend::alloc`] gave.
    ///
    /// # Safety
    /// `ptr` came from `alloc(_, device)` and is not used afterwards.
    pub unsafe fn free(self, ptr: *mut c_void, device: i32) {
        if let Some(lib) = self.llvm_device(device) {
            // SAFETY: per the contract, memory libomptarget's `omp_target_alloc` gave.
            return unsafe { (lib.memory.free)(ptr, device) };
        }
        match device_or_host(device) {
            Ok(Some(d)) => {
                let _scope = d.scope(Label::Construct("omp_target_free"));
                // SAFETY: per the contract.
                unsafe { d.free(ptr as usize as u64) }
            }
            // SAFETY: per the contract: it came from calloc.
            Ok(None) => unsafe { libc::free(ptr) },
            Err(()) => {}
        }
    }

    /// Copies `length` bytes from `src` on `src_device` to `dst` on `dst_device` (offsets applied); 0 on success, as
    /// OpenMP's routine returns.
    ///
    /// # Safety
    /// Both ranges are valid memory of their devices.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn memcpy(
        self,
        dst: *mut c_void,
        src: *const c_void,
        length: usize,
        dst_offset: usize,
        src_offset: usize,
        dst_device: i32,
        src_device: i32,
    ) -> i32 {
        if let Some(lib) = self
            .llvm_device(dst_device)
            .or(self.llvm_device(src_device))
        {
            // libomptarget's own, which knows its devices and the initial device (the same number as ours).
            // SAFETY: per the contract.
            return unsafe {
                (lib.memory.memcpy)(
                    dst, src, length, dst_offset, src_offset, dst_device, src_device,
                )
            };
        }
        let (Ok(dd), Ok(sd)) = (device_or_host(dst_device), device_or_host(src_device)) else {
            return -1;
        };
        let d = dst as usize + dst_offset;
        let s = src as usize + src_offset;
        let label = Label::Construct("omp_target_memcpy");
        // Plain copies (map type 0) through the devices, which observe them as transfers.
        // SAFETY: per the contract.
        let r = unsafe {
            match (dd, sd) {
                (None, None) => {
                    std::ptr::copy(s as *const u8, d as *mut u8, length);
                    Ok(())
                }
                (Some(dd), None) => {
                    let _scope = dd.scope(label);
                    dd.submit(d as u64, s, length, 0)
                }
                (None, Some(sd)) => {
                    let _scope = sd.scope(label);
                    sd.retrieve(d, s as u64, length, 0)
                }
                (Some(dd), Some(sd)) => {
                    let mut staging = vec![0u8; length];
                    let from = {
                        let _scope = sd.scope(label);
                        sd.retrieve(staging.as_mut_ptr() as usize, s as u64, length, 0)
                    };
                    from.and_then(|()| {
                        let _scope = dd.scope(label);
                        dd.submit(d as u64, staging.as_ptr() as usize, length, 0)
                    })
                }
            }
        };
        if r.is_ok() {
            0
        } else {
            -1
        }
    }

    /// The device address of mapped host data, `ptr` itself on the initial device, and null if it is not mapped.
    pub fn mapped_ptr(self, ptr: *const c_void, device: i32) -> *mut c_void {
        if let Backend::Llvm(lib) = self {
            if !is_initial(device) {
                return lib.mapped_ptr(ptr, device);
            }
        }
        match device_or_host(device) {
            Ok(None) => ptr as *mut c_void,
            Ok(Some(d)) => d
                .table()
                .lookup(ptr as usize, 1)
                .map_or(std::ptr::null_mut(), |t| t as usize as *mut c_void),
            Err(()) => std::ptr::null_mut(),
        }
    }

    /// Makes `[host_ptr, host_ptr+size)` present on `device` at `device_ptr + device_offset`; 0 on success.
    ///
    /// # Safety
    /// The device range is `size` bytes of `device`'s memory that outlives the association.
    pub unsafe fn associate(
        self,
        host_ptr: *const c_void,
        device_ptr: *const c_void,
        size: usize,
        device_offset: usize,
        device: i32,
    ) -> i32 {
        if let Some(lib) = self.llvm_device(device) {
            // SAFETY: per the contract.
            return unsafe {
                (lib.memory.associate)(host_ptr, device_ptr, size, device_offset, device)
            };
        }
        match device_or_host(device) {
            Ok(Some(d)) => {
                let tgt = device_ptr as usize as u64 + device_offset as u64;
                let _scope = d.scope(Label::Construct("omp_target_associate_ptr"));
                let mut t = d.table();
                if t.associate(host_ptr as usize, size, tgt).is_ok() {
                    0
                } else {
                    -1
                }
            }
            _ => -1,
        }
    }

    /// Ends an association [`Backend::associate`] made: 0 on success, nonzero if `host_ptr` is not associated.
    ///
    /// # Safety
    /// No region may be using the association.
    pub unsafe fn disassociate(self, host_ptr: *const c_void, device: i32) -> i32 {
        if let Some(lib) = self.llvm_device(device) {
            // SAFETY: per the contract.
            return unsafe { (lib.memory.disassociate)(host_ptr, device) };
        }
        match device_or_host(device) {
            Ok(Some(d)) => {
                let _scope = d.scope(Label::Construct("omp_target_disassociate_ptr"));
                let mut t = d.table();
                if t.disassociate(host_ptr as usize).is_ok() {
                    0
                } else {
                    -1
                }
            }
            _ => -1,
        }
    }
}
