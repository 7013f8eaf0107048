//! The device targets to build: `OFFLOAD_TARGETS` (like `-fopenmp-targets=`) or `[package.metadata.offload] targets`,
//! `host` by default.

use crate::package::Package;
use crate::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceTarget {
    /// The x86_64 host as an offload device (the `host-elf` plugin): one image with the program's own CPU flags, or
    /// one per x86-64 level listed (`host:x86-64-v3,x86-64`), of which the plugin loads the best this CPU runs.
    Host { triple: String, levels: Vec<String> },
    /// NVIDIA GPUs (the `cuda` plugin): PTX for each `sm_XX`, and a cubin where ptxas is installed.
    Nvptx { archs: Vec<String> },
    /// AMD GPUs (the `amdgpu` plugin): an HSA code object for each `gfxNNN`.
    Amdgcn { archs: Vec<String> },
}

/// The architecture an `nvptx64` target without a list builds for: PTX for sm_80 runs, JIT-compiled, on every GPU
/// since Ampere.
const DEFAULT_SM: &str = "sm_80";

/// An `amdgcn` target without a list builds for the MI200 series (code objects run only on their exact gfx).
const DEFAULT_GFX: &str = "gfx90a";

impl DeviceTarget {
    pub fn triple(&self) -> &str {
        match self {
            DeviceTarget::Host { triple, .. } => triple,
            DeviceTarget::Nvptx { .. } => "nvptx64-nvidia-cuda",
            DeviceTarget::Amdgcn { .. } => "amdgcn-amd-amdhsa",
        }
    }

    /// The host's architecture, or the first GPU architecture.
    pub fn arch(&self) -> &str {
        match self {
            DeviceTarget::Nvptx { archs } | DeviceTarget::Amdgcn { archs } => &archs[0],
            _ => self.triple().split('-').next().unwrap_or_default(),
        }
    }

    pub fn kernel_abi(&self) -> crate::outline::KernelAbi {
        match self {
            DeviceTarget::Host { .. } => crate::outline::KernelAbi::Host,
            DeviceTarget::Nvptx { .. } => crate::outline::KernelAbi::Nvptx,
            DeviceTarget::Amdgcn { .. } => crate::outline::KernelAbi::Amdgpu,
        }
    }

    pub fn key(&self) -> &'static str {
        match self {
            DeviceTarget::Host { .. } => "host",
            DeviceTarget::Nvptx { .. } => "nvptx64",
            DeviceTarget::Amdgcn { .. } => "amdgcn",
        }
    }

    pub fn is_gpu(&self) -> bool {
        !matches!(self, DeviceTarget::Host { .. })
    }
}

/// `x86-64-v3,x86-64`: the levels of a `host:` target; none means the program's own CPU flags.
fn level_list(target: &str, levels: &str) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::new();
    for l in levels.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        if offload_model::cpu::level(l).is_none() {
            let names: Vec<&str> = offload_model::cpu::X86_64_LEVELS
                .iter()
                .map(|l| l.0)
                .collect();
            return Err(Error::Config(format!(
                "offload target `{target}`: `{l}` is not an x86-64 level; the host images can be built for {}",
                names.join(", ")
            )));
        }
        if !out.iter().any(|o| o == l) {
            out.push(l.to_string());
        }
    }
    Ok(out)
}

/// `gfx90a,gfx942`: the architectures of an `amdgcn:` target.
fn gfx_list(target: &str, archs: &str) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::new();
    for a in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let ok = a.strip_prefix("gfx").is_some_and(|d| {
            (3..=4).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_hexdigit())
        });
        if !ok {
            return Err(Error::Config(format!(
                "offload target `{target}`: `{a}` is not an AMD GPU architecture; write them as `amdgcn:gfx90a,gfx942`"
            )));
        }
        if !out.iter().any(|o| o == a) {
            out.push(a.to_string());
        }
    }
    if out.is_empty() {
        out.push(DEFAULT_GFX.to_string());
    }
    Ok(out)
}

/// `sm_80,sm_90` (also `sm_90a`): the architectures of an `nvptx64:` target.
fn sm_list(target: &str, archs: &str) -> Result<Vec<String>, Error> {
    let mut out: Vec<String> = Vec::new();
    for a in archs.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let digits = a
            .strip_prefix("sm_")
            .map(|d| d.trim_end_matches(['a', 'f']));
        if !digits.is_some_and(|d| d.len() >= 2 && d.bytes().all(|b| b.is_ascii_digit())) {
            return Err(Error::Config(format!(
                "offload target `{target}`: `{a}` is not an NVIDIA architecture; write them as `nvptx64:sm_80,sm_90`"
            )));
        }
        if !out.iter().any(|o| o == a) {
            out.push(a.to_string());
        }
    }
    if out.is_empty() {
        out.push(DEFAULT_SM.to_string());
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
                let starts_target = word.contains(':')
                    || !(word.starts_with("sm_")
                        || word.starts_with("gfx")
                        || word.starts_with("x86-64"));
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
            .unwrap_or_else(|| vec!["host".into()]),
    };
    let host_triple =
        std::env::var("TARGET").map_err(|_| Error::Config("TARGET is not set".into()))?;
    let mut out = Vec::new();
    for t in list {
        let (name, archs) = t.split_once(':').unwrap_or((&t, ""));
        match name {
            "host" => {
                if !host_triple.starts_with("x86_64-") || !host_triple.contains("-linux") {
                    return Err(Error::Config(format!(
                        "the `host` offload target needs an x86_64 Linux host; this build targets {host_triple}"
                    )));
                }
                out.push(DeviceTarget::Host {
                    triple: host_triple.clone(),
                    levels: level_list(&t, archs)?,
                })
            }
            "nvptx64" => out.push(DeviceTarget::Nvptx {
                archs: sm_list(&t, archs)?,
            }),
            "amdgcn" => out.push(DeviceTarget::Amdgcn {
                archs: gfx_list(&t, archs)?,
            }),
            _ => {
                return Err(Error::Config(format!(
                    "unknown offload target `{t}`; expected `host`, `nvptx64:sm_XX,..` or `amdgcn:gfxNNN,..`"
                )))
            }
        }
    }
    out.dedup();
    Ok(out)
}
