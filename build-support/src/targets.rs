//! The device targets to build: `OFFLOAD_TARGETS` (like `-fopenmp-targets=`) or `[package.metadata.offload] targets`,
//! `host` by default.

use crate::package::Package;
use crate::{Error, TargetError};
use offload_model::device_kind::{triple_arch, DeviceKind};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceTarget {
    /// The x86_64 host as an offload device (the `host-elf` plugin): one image with the program's own CPU flags, or
    /// one per x86-64 level listed (`host:x86-64-v3,x86-64`), of which the plugin loads the best this CPU runs.
    Host { triple: String, levels: Vec<String> },
    /// NVIDIA GPUs (the `cuda` plugin): PTX for each `sm_XX`, and a cubin where ptxas is installed.
    Nvptx { archs: Vec<String> },
    /// AMD GPUs (the `amdgpu` plugin): an HSA code object for each `gfxNNN`.
    Amdgcn { archs: Vec<String> },
    /// The simulated GPU (the `gpu-sim` plugin): the GPU lowering as a shared object for the host's triple.
    GpuSim { triple: String },
}

impl DeviceTarget {
    pub fn kind(&self) -> DeviceKind {
        match self {
            DeviceTarget::Host { .. } => DeviceKind::Host,
            DeviceTarget::Nvptx { .. } => DeviceKind::Nvptx,
            DeviceTarget::Amdgcn { .. } => DeviceKind::Amdgcn,
            DeviceTarget::GpuSim { .. } => DeviceKind::GpuSim,
        }
    }

    pub fn triple(&self) -> &str {
        match self {
            DeviceTarget::Host { triple, .. } | DeviceTarget::GpuSim { triple } => triple,
            _ => self.kind().gpu_triple().unwrap_or_default(),
        }
    }

    /// The host's architecture, or the first GPU architecture (`gpu-sim` for the simulated GPU).
    pub fn arch(&self) -> &str {
        match self {
            DeviceTarget::Nvptx { archs } | DeviceTarget::Amdgcn { archs } => &archs[0],
            DeviceTarget::GpuSim { .. } => offload_model::device_kind::GPU_SIM_ARCH,
            _ => triple_arch(self.triple()),
        }
    }

    pub fn kernel_abi(&self) -> crate::outline::KernelAbi {
        match self {
            // gpu-sim's entries are the host image's (`extern "C"`, offload-device's entry around the body).
            DeviceTarget::Host { .. } | DeviceTarget::GpuSim { .. } => {
                crate::outline::KernelAbi::Host
            }
            DeviceTarget::Nvptx { .. } => crate::outline::KernelAbi::Nvptx,
            DeviceTarget::Amdgcn { .. } => crate::outline::KernelAbi::Amdgpu,
        }
    }

    pub fn key(&self) -> &'static str {
        self.kind().name()
    }

    /// Whether the target is a real GPU's, built by the device toolchain.
    pub fn is_gpu(&self) -> bool {
        !self.kind().host_compiled()
    }
}

/// `sm_80,sm_90`, `gfx90a,gfx942`, `x86-64-v3,x86-64`: the architectures of a target of `kind`, each once. A GPU
/// target without a list builds for its kind's default; a host target without one takes the program's CPU flags.
fn arch_list(kind: DeviceKind, target: &str, archs: &str) -> Result<Vec<String>, TargetError> {
    let mut out: Vec<String> = Vec::new();
    for a in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if !kind.is_arch(a) {
            return Err(TargetError::Arch {
                target: target.into(),
                arch: a.into(),
                kind,
            });
        }
        if !out.iter().any(|o| o == a) {
            out.push(a.to_string());
        }
    }
    if out.is_empty() {
        out.extend(kind.default_arch().map(String::from));
    }
    Ok(out)
}

pub fn configured(pkg: &Package) -> Result<Vec<DeviceTarget>, Error> {
    // `host:x86-64-v3,x86-64;nvptx64:sm_80,sm_90;amdgcn:gfx90a`: a word after a comma that names no target continues the previous
    // target's architecture list, as in `-fopenmp-targets=` with `--offload-arch`.
    let list: Vec<String> = match std::env::var("OFFLOAD_TARGETS") {
        Ok(v) => {
            let mut list: Vec<String> = Vec::new();
            for word in v.split([',', ';']).map(str::trim).filter(|w| !w.is_empty()) {
                let starts_target =
                    word.contains(':') || !DeviceKind::ALL.iter().any(|k| k.looks_like_arch(word));
                match list.last_mut() {
                    Some(last) if !starts_target => {
                        last.push(',');
                        last.push_str(word);
                    }
                    _ => list.push(word.to_string()),
                }
            }
            list
        }
        Err(_) => pkg
            .metadata_targets
            .clone()
            .unwrap_or_else(|| vec![DeviceKind::Host.name().into()]),
    };
    let host_triple =
        std::env::var("TARGET").map_err(|_| Error::NotInBuildScript { var: "TARGET" })?;
    let mut out = Vec::new();
    for t in list {
        let (name, archs) = t.split_once(':').unwrap_or((&t, ""));
        let Some(kind) = DeviceKind::from_name(name) else {
            return Err(TargetError::Unknown { target: t }.into());
        };
        if kind.host_compiled() && DeviceKind::of_triple(&host_triple) != Some(DeviceKind::Host) {
            return Err(TargetError::HostUnsupported {
                triple: host_triple,
            }
            .into());
        }
        let archs = arch_list(kind, &t, archs)?;
        out.push(match kind {
            DeviceKind::Host => DeviceTarget::Host {
                triple: host_triple.clone(),
                levels: archs,
            },
            DeviceKind::Nvptx => DeviceTarget::Nvptx { archs },
            DeviceKind::Amdgcn => DeviceTarget::Amdgcn { archs },
            DeviceKind::GpuSim => DeviceTarget::GpuSim {
                triple: host_triple.clone(),
            },
        });
    }
    out.dedup();
    Ok(out)
}
