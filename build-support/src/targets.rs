//! The device targets to build: `OFFLOAD_TARGETS` (like `-fopenmp-targets=`) or `[package.metadata.offload] targets`,
//! `host` by default.

use crate::package::Package;
use crate::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceTarget {
    /// The x86_64 host as an offload device (the `host-elf` plugin).
    Host { triple: String },
}

impl DeviceTarget {
    pub fn triple(&self) -> &str {
        match self {
            DeviceTarget::Host { triple } => triple,
        }
    }

    pub fn arch(&self) -> &str {
        self.triple().split('-').next().unwrap_or_default()
    }

    pub fn kernel_abi(&self) -> crate::outline::KernelAbi {
        match self {
            DeviceTarget::Host { .. } => crate::outline::KernelAbi::Host,
        }
    }

    pub fn key(&self) -> &'static str {
        match self {
            DeviceTarget::Host { .. } => "host",
        }
    }
}

pub fn configured(pkg: &Package) -> Result<Vec<DeviceTarget>, Error> {
    // `host,nvptx64:sm_80,sm_90;amdgcn:gfx90a`: a word after a comma that names no target continues the previous
    // target's architecture list, as in `-fopenmp-targets=` with `--offload-arch`.
    let list: Vec<String> = match std::env::var("OFFLOAD_TARGETS") {
        Ok(v) => {
            let mut list: Vec<String> = Vec::new();
            for word in v.split([',', ';']).map(str::trim).filter(|w| !w.is_empty()) {
                let starts_target = word == "host" || word.contains(':') || !word.contains('_');
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
        let (name, _archs) = t.split_once(':').unwrap_or((&t, ""));
        match name {
            "host" => {
                if !host_triple.starts_with("x86_64-") || !host_triple.contains("-linux") {
                    return Err(Error::Config(format!(
                        "the `host` offload target needs an x86_64 Linux host; this build targets {host_triple}"
                    )));
                }
                out.push(DeviceTarget::Host { triple: host_triple.clone() })
            }
            "nvptx64" | "amdgcn" => {
                return Err(Error::Config(format!(
                    "offload target `{t}`: this version of offload-build builds only the `host` target; \
                     remove `{name}` from OFFLOAD_TARGETS / [package.metadata.offload] targets"
                )))
            }
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
