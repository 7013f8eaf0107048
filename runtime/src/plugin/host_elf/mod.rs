//! `host-elf`: the host as an offload device, like libomptarget's x86_64 host plugin. Images are x86_64 shared
//! objects loaded from memory; device memory is a separate, zero-filled heap allocation, so every missing or extra
//! copy is observable (`host_code`); kernels run on the host team executor.

use crate::env::icv;
use crate::host::geometry::{
    host_default_geometry, host_max_teams, host_max_threads, HOST_LIMITS_WHY,
};
use crate::host::{run_teams, TeamBarrier};
use crate::plugin::error::PluginError;
use crate::plugin::host_code::memory::{physical_memory, HostMemory, ALIGN, MAX_ALIGN};
use crate::plugin::host_code::{call, image};
use crate::plugin::interface::{
    Arg, Device, DeviceDescription, DeviceMemory, Discovered, Kernel, LaunchParams, LoadedImage,
    Plugin,
};
use crate::registry::Image;
use offload_model::abi::Construct;
use offload_model::abi::{HostFailure, HostLaunchEnv};
use offload_model::device_kind::DeviceKind;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicU32;

pub struct HostElf;

impl Plugin for HostElf {
    fn name(&self) -> &'static str {
        DeviceKind::Host.plugin()
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load an image from memory.
            return Err(PluginError::Unavailable {
                reason: "not under Miri".into(),
            });
        }
        // Like LLVM's host plugin, which offers several devices, the count is configurable (`OFFLOAD_HOST_DEVICES`)
        // so `device(n)` can be exercised.
        let icv = icv();
        Ok(Discovered {
            devices: (0..icv.host_devices)
                .map(|_| Box::new(HostElfDevice::new(icv.host_memory)) as Box<dyn Device>)
                .collect(),
            notes: Vec::new(),
        })
    }
}

struct HostElfDevice {
    memory: HostMemory,
}

impl HostElfDevice {
    fn new(capacity: usize) -> Self {
        HostElfDevice {
            memory: HostMemory::new(capacity, ALIGN, MAX_ALIGN),
        }
    }
}

impl Device for HostElfDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: format!(
                "the host as an offload device ({} hardware threads)",
                host_default_geometry(true).1
            ),
            arch: std::env::consts::ARCH.to_string(),
            memory: physical_memory(),
        }
    }

    /// An image for an x86-64 level ranks by its level, if this CPU has every feature of it: `host:x86-64-v3,x86-64`
    /// runs AVX2 code where there is AVX2 and the baseline elsewhere. An image built with the program's own CPU flags
    /// runs where the program does.
    fn rank(&self, image: &Image) -> Option<u32> {
        let mut parts = image.triple.split('-');
        if parts.next() != Some(std::env::consts::ARCH)
            || !image.triple.contains(std::env::consts::OS)
            || DeviceKind::of_image(image.triple, image.arch) != Some(DeviceKind::Host)
            || image.format != offload_model::fatbin::ImageFormat::SharedObject
        {
            return None;
        }
        match offload_model::device_kind::x86_64_level(image.arch) {
            Some((level, mut features)) => features
                .all(|f| cpu_has(f) == Some(true))
                .then_some(1 + level as u32),
            None => Some(1),
        }
    }

    fn default_geometry(&self, construct: Construct) -> (u32, u32) {
        host_default_geometry(construct.wide_teams())
    }

    fn max_teams(&self) -> u32 {
        host_max_teams()
    }

    fn max_threads(&self) -> u32 {
        host_max_threads()
    }

    fn limits_why(&self) -> (&'static str, &'static str) {
        HOST_LIMITS_WHY
    }

    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        Ok(Box::new(image::load(image)?))
    }

    fn memory(&self) -> &dyn DeviceMemory {
        &self.memory
    }

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &[Arg],
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        if args.len() > call::MAX_ARGS {
            return Err(PluginError::Launch {
                reason: format!(
                    "the kernel takes {} arguments; the host-elf device passes at most {} (pass fewer arguments, \
                     or group them in a `#[declare_target]` struct)",
                    args.len(),
                    call::MAX_ARGS
                ),
            });
        }
        // The runtime clamps the geometry; a caller that did not gets the same bounds here, not a huge allocation.
        let teams = params.num_teams.clamp(1, host_max_teams());
        let threads = params.num_threads.clamp(1, self.max_threads());
        // Team-shared memory: one zeroed block per team, in 16-byte units so any slot type is aligned.
        let units = params.team_shared.div_ceil(16);
        let shared: Vec<std::sync::Mutex<Vec<u128>>> = (0..if units > 0 { teams } else { 0 })
            .map(|_| std::sync::Mutex::new(vec![0u128; units]))
            .collect();
        // Each team's claim word: the atomic type `team_shared` hands its block out as, zero until the first call.
        let claims: Vec<AtomicU32> = shared.iter().map(|_| AtomicU32::new(0)).collect();
        let shared_ptr = |t: u32| -> SharedBlock {
            match (shared.get(t as usize), claims.get(t as usize)) {
                // The block outlives the launch; its threads coordinate their accesses with the team barrier.
                (Some(m), Some(c)) => (
                    m.lock().unwrap_or_else(|p| p.into_inner()).as_mut_ptr() as *mut u8,
                    units * 16,
                    c as *const AtomicU32,
                ),
                _ => (std::ptr::null_mut(), 0, std::ptr::null()),
            }
        };
        // `schedule(dynamic)`'s chunk counter, shared by the launch's threads.
        let chunks = std::sync::atomic::AtomicUsize::new(0);
        if teams == 1 && threads == 1 {
            // SAFETY: per the trait's contract.
            return unsafe { run_thread(kernel, args, (0, 1, 0, 1), None, shared_ptr(0), &chunks) };
        }
        run_teams(teams, threads, &|t, i, b| {
            // SAFETY: per the trait's contract; `b`, the team's block and the counter outlive the kernel call.
            unsafe {
                run_thread(
                    kernel,
                    args,
                    (t, teams, i, threads),
                    Some(b),
                    shared_ptr(t),
                    &chunks,
                )
            }
        })
        .map(drop)
    }
}

/// A team's shared block (address, bytes) and its claim word (`HostLaunchEnv::team_shared_claim`).
type SharedBlock = (*mut u8, usize, *const AtomicU32);

/// Runs one thread of a kernel: team `g.0` of `g.1`, thread `g.2` of `g.3`.
///
/// # Safety
/// As [`Device::launch`].
unsafe fn run_thread(
    kernel: Kernel,
    args: &[Arg],
    g: (u32, u32, u32, u32),
    barrier: Option<&TeamBarrier>,
    shared: SharedBlock,
    chunks: &std::sync::atomic::AtomicUsize,
) -> Result<(), PluginError> {
    let mut failure = MaybeUninit::<HostFailure>::uninit();
    // SAFETY: only `failed` is read unless the kernel set it, after writing the rest.
    unsafe { std::ptr::addr_of_mut!((*failure.as_mut_ptr()).failed).write(0) };
    let mut env = HostLaunchEnv {
        team_num: g.0,
        num_teams: g.1,
        thread_num: g.2,
        num_threads: g.3,
        team_shared: shared.0,
        team_shared_len: shared.1,
        team_shared_claim: shared.2,
        failure: failure.as_mut_ptr(),
        panic_record: std::ptr::null_mut(),
        barrier: barrier.map(|_| TeamBarrier::wait_c as unsafe extern "C" fn(*const c_void) -> u32),
        barrier_ctx: barrier.map_or(std::ptr::null(), |b| {
            b as *const TeamBarrier as *const c_void
        }),
        chunks,
    };
    // SAFETY: per the contract; the image's entry catches every panic, so nothing unwinds into us.
    unsafe {
        call::call(
            kernel.0 as *const c_void,
            &mut env as *mut HostLaunchEnv as *mut c_void,
            args,
        )
    };
    // SAFETY: `failed` was initialised above.
    let failed = unsafe { std::ptr::addr_of!((*failure.as_ptr()).failed).read() };
    if failed == 0 {
        return Ok(());
    }
    // SAFETY: the kernel wrote the lengths and those prefixes of the buffers before setting `failed`.
    let (message, file, line, column) = unsafe { read_failure(failure.as_ptr()) };
    Err(PluginError::Panic {
        message,
        location: (!file.is_empty()).then_some((file, line, column)),
        thread: None,
        lost: false,
    })
}

/// Reads a failure record whose buffers are written only up to their recorded lengths:
/// (message, file, line, column).
///
/// # Safety
/// `p` points to a record `HostFailure::record` filled.
unsafe fn read_failure(p: *const HostFailure) -> (String, String, u32, u32) {
    use offload_model::abi::{FAILURE_FILE_CAP, FAILURE_MESSAGE_CAP};
    use std::ptr::addr_of;
    // SAFETY: per the contract, each buffer's prefix of its recorded length is initialised.
    unsafe {
        let text = |buf: *const u8, len: u32, cap: usize| {
            String::from_utf8_lossy(std::slice::from_raw_parts(buf, (len as usize).min(cap)))
                .into_owned()
        };
        let message = text(
            addr_of!((*p).message).cast(),
            addr_of!((*p).message_len).read(),
            FAILURE_MESSAGE_CAP,
        );
        let file = text(
            addr_of!((*p).file).cast(),
            addr_of!((*p).file_len).read(),
            FAILURE_FILE_CAP,
        );
        (
            message,
            file,
            addr_of!((*p).line).read(),
            addr_of!((*p).column).read(),
        )
    }
}

/// Whether this CPU has a feature of [`offload_model::device_kind::X86_64_LEVELS`] (which `is_x86_feature_detected!` needs
/// spelled out); `None` for a feature this table does not know, whose image is then not run.
fn cpu_has(feature: &str) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        Some(match feature {
            "cmpxchg16b" => has!("cmpxchg16b"),
            "popcnt" => has!("popcnt"),
            "sse3" => has!("sse3"),
            "sse4.1" => has!("sse4.1"),
            "sse4.2" => has!("sse4.2"),
            "ssse3" => has!("ssse3"),
            "avx" => has!("avx"),
            "avx2" => has!("avx2"),
            "bmi1" => has!("bmi1"),
            "bmi2" => has!("bmi2"),
            "f16c" => has!("f16c"),
            "fma" => has!("fma"),
            "lzcnt" => has!("lzcnt"),
            "movbe" => has!("movbe"),
            "xsave" => has!("xsave"),
            "avx512f" => has!("avx512f"),
            "avx512bw" => has!("avx512bw"),
            "avx512cd" => has!("avx512cd"),
            "avx512dq" => has!("avx512dq"),
            "avx512vl" => has!("avx512vl"),
            _ => return None,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        None
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_level_feature_is_detected() {
        // A feature `cpu_has` does not spell out would make its level unloadable everywhere.
        for (level, features) in offload_model::device_kind::X86_64_LEVELS {
            for f in features {
                assert!(
                    super::cpu_has(f).is_some(),
                    "{level} needs {f}, which is not detected"
                );
            }
        }
        assert_eq!(
            super::cpu_has("avx2"),
            Some(std::arch::is_x86_feature_detected!("avx2"))
        );
    }
}
