//! `host-elf`: the host as an offload device, like libomptarget's x86_64 host plugin. Images are x86_64 shared
//! objects loaded from memory; device memory is a separate, zero-filled heap allocation, so every missing or extra
//! copy is observable (`host_code`); kernels run on the host team executor.

use crate::env::icv;
use crate::host::geometry::{host_default_geometry, host_limits};
use crate::plugin::error::PluginError;
use crate::plugin::host_code::memory::{physical_memory, HostMemory, ALIGN, MAX_ALIGN};
use crate::plugin::host_code::teams::run;
use crate::plugin::host_code::{call, image};
use crate::plugin::interface::{
    Device, DeviceDescription, DeviceMemory, Discovered, Kernel, KernelArgs, LaunchLimits,
    LaunchParams, LoadedImage, Plugin,
};
use crate::registry::Image;
use offload_model::device_kind::DeviceKind;
use std::ffi::c_void;

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

    fn limits(&self) -> LaunchLimits {
        host_limits()
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
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        // SAFETY: per the trait's contract (the geometry within `host_limits`, at most `MAX_ARGS` arguments); the
        // environment `run` passes is the thread's for the call.
        unsafe {
            run(
                params.num_teams,
                params.num_threads,
                params.team_shared,
                &|env| call::call(kernel.0 as *const c_void, env.cast(), args),
            )
        }
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
