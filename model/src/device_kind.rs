//! The kinds of offload device, and the one place that knows each kind's target triple, its plugin and how its
//! architectures are written: `sm_XX` for NVIDIA, `gfxNNN` for AMD, x86-64 levels for the host. Build support
//! parses `OFFLOAD_TARGETS` with it, the plugins match images to devices with it, `cargo offload` names targets with
//! it.

use core::fmt;

/// The triple of NVIDIA GPU images.
pub const NVPTX_TRIPLE: &str = "nvptx64-nvidia-cuda";
/// The triple of AMD GPU images.
pub const AMDGCN_TRIPLE: &str = "amdgcn-amd-amdhsa";
/// The architecture of `gpu-sim` images (built for the host's triple) and of the `gpu-sim` device: what tells them
/// from host-elf images.
pub const GPU_SIM_ARCH: &str = "gpu-sim";

/// A kind of offload device: what `OFFLOAD_TARGETS` names, what a plugin drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeviceKind {
    /// The x86_64 Linux host as an offload device (images are shared objects for the program's own triple).
    Host,
    /// NVIDIA GPUs.
    Nvptx,
    /// AMD GPUs.
    Amdgcn,
    /// The simulated GPU: the GPU lowering compiled for the host's triple, run by the `gpu-sim` plugin as a GPU runs
    /// a grid (blocks of concurrent threads, barriers, dynamic shared memory).
    GpuSim,
}

impl DeviceKind {
    /// Every kind, in declaration order.
    pub const ALL: [DeviceKind; 4] = [Self::Host, Self::Nvptx, Self::Amdgcn, Self::GpuSim];

    /// The name `OFFLOAD_TARGETS` and `[package.metadata.offload] targets` use.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::Nvptx => "nvptx64",
            Self::Amdgcn => "amdgcn",
            Self::GpuSim => "gpu-sim",
        }
    }

    /// The kind [`DeviceKind::name`] spells `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The runtime plugin that drives devices of this kind (the name `OFFLOAD_PLUGINS` and `--device` use).
    pub const fn plugin(self) -> &'static str {
        match self {
            Self::Host => "host-elf",
            Self::Nvptx => "cuda",
            Self::Amdgcn => "amdgpu",
            Self::GpuSim => "gpu-sim",
        }
    }

    /// The triple a GPU image is built for; the host's and gpu-sim's are the build's own (`TARGET`).
    pub const fn gpu_triple(self) -> Option<&'static str> {
        match self {
            Self::Host | Self::GpuSim => None,
            Self::Nvptx => Some(NVPTX_TRIPLE),
            Self::Amdgcn => Some(AMDGCN_TRIPLE),
        }
    }

    /// The kind of device an image of `triple` and `arch` runs on: gpu-sim's by its architecture, the rest by
    /// their triple.
    pub fn of_image(triple: &str, arch: &str) -> Option<Self> {
        match Self::of_triple(triple)? {
            Self::Host if arch == GPU_SIM_ARCH => Some(Self::GpuSim),
            k => Some(k),
        }
    }

    /// Whether code for this kind is compiled by the host's own toolchain (the host image and gpu-sim), not a
    /// device toolchain.
    pub const fn host_compiled(self) -> bool {
        matches!(self, Self::Host | Self::GpuSim)
    }

    /// Whether region code takes the GPU lowering (grid-stride shares, reductions through team-shared slots).
    pub const fn gpu_lowering(self) -> bool {
        !matches!(self, Self::Host)
    }

    /// The kind of device images for `triple` run on: the GPU triples, and x86_64 Linux for the host.
    pub fn of_triple(triple: &str) -> Option<Self> {
        match triple {
            NVPTX_TRIPLE => Some(Self::Nvptx),
            AMDGCN_TRIPLE => Some(Self::Amdgcn),
            t if t.starts_with("x86_64-") && t.contains("-linux") => Some(Self::Host),
            _ => None,
        }
    }

    /// The architecture a target without a list builds for. NVIDIA: PTX for sm_80 runs, JIT-compiled, on every GPU
    /// since Ampere. AMD: the MI200 series (code objects run only on their exact processor). The host: none, the
    /// image takes the program's own CPU flags.
    pub const fn default_arch(self) -> Option<&'static str> {
        match self {
            Self::Host | Self::GpuSim => None,
            Self::Nvptx => Some("sm_80"),
            Self::Amdgcn => Some("gfx90a"),
        }
    }

    /// Whether `arch` is an architecture a target of this kind can be built for.
    pub fn is_arch(self, arch: &str) -> bool {
        match self {
            Self::Host => x86_64_level(arch).is_some(),
            Self::Nvptx => NvidiaArch::parse(arch).is_some(),
            // Device crates are compiled for a processor, without target features (`gfx90a`, not `gfx90a:xnack+`).
            Self::Amdgcn => AmdArch::parse(arch).is_some_and(|a| a.features().is_empty()),
            // One simulated GPU, no architectures.
            Self::GpuSim => false,
        }
    }

    /// Whether `word` is spelt like an architecture of this kind (`sm_`, `gfx`, `x86-64`), valid or not: in
    /// `OFFLOAD_TARGETS`, such a word after a comma continues the previous target's list.
    pub fn looks_like_arch(self, word: &str) -> bool {
        match self {
            Self::Host => word.starts_with("x86-64"),
            Self::Nvptx => word.starts_with("sm_"),
            Self::Amdgcn => word.starts_with("gfx"),
            Self::GpuSim => false,
        }
    }

    /// How a target of this kind is written, for messages.
    pub const fn usage(self) -> &'static str {
        match self {
            Self::Host => "`host`",
            Self::Nvptx => "`nvptx64:sm_XX,..`",
            Self::Amdgcn => "`amdgcn:gfxNNN,..`",
            Self::GpuSim => "`gpu-sim`",
        }
    }

    /// What an architecture of this kind is, for messages: "`x` is not {this}".
    pub const fn arch_noun(self) -> &'static str {
        match self {
            Self::Host => "an x86-64 level",
            Self::Nvptx => "an NVIDIA architecture",
            Self::Amdgcn => "an AMD GPU architecture",
            Self::GpuSim => "an architecture gpu-sim has (it has none)",
        }
    }
}

impl fmt::Display for DeviceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A triple's architecture (`x86_64` of `x86_64-unknown-linux-gnu`): a host image's, where no level is named.
pub fn triple_arch(triple: &str) -> &str {
    triple.split('-').next().unwrap_or_default()
}

/// An NVIDIA architecture: `sm_90` (portable to newer GPUs as PTX), `sm_90a` (code for 9.0 alone), `sm_100f`
/// (code for the 10.x family).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvidiaArch {
    /// The compute capability's major version (`9` of sm_90).
    pub major: u32,
    /// Its minor version, the last digit (`0` of sm_90).
    pub minor: u32,
    /// Which code the architecture stands for: PTX for it and newer GPUs, or its `a` or `f` code.
    pub variant: NvidiaVariant,
}

/// What an NVIDIA architecture's suffix says the code may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvidiaVariant {
    /// No suffix: PTX, JIT-compiled for this compute capability and every newer one.
    Portable,
    /// `a`: uses features only this exact compute capability has.
    ArchSpecific,
    /// `f`: uses features of this major version's family.
    FamilySpecific,
}

impl NvidiaArch {
    /// The portable architecture of compute capability `major.minor`.
    pub const fn new(major: u32, minor: u32) -> Self {
        NvidiaArch {
            major,
            minor,
            variant: NvidiaVariant::Portable,
        }
    }

    /// `sm_` followed by at least two digits (the last the minor version) and an optional `a` or `f`.
    pub fn parse(arch: &str) -> Option<Self> {
        let rest = arch.strip_prefix("sm_")?;
        let (digits, variant) = match rest.as_bytes().last() {
            Some(b'a') => (&rest[..rest.len() - 1], NvidiaVariant::ArchSpecific),
            Some(b'f') => (&rest[..rest.len() - 1], NvidiaVariant::FamilySpecific),
            _ => (rest, NvidiaVariant::Portable),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let sm: u32 = digits.parse().ok()?;
        Some(NvidiaArch {
            major: sm / 10,
            minor: sm % 10,
            variant,
        })
    }

    /// `90` for sm_90: the number PTX's `.target` and the driver's ordering use.
    pub const fn number(self) -> u32 {
        self.major * 10 + self.minor
    }
}

impl fmt::Display for NvidiaArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = match self.variant {
            NvidiaVariant::Portable => "",
            NvidiaVariant::ArchSpecific => "a",
            NvidiaVariant::FamilySpecific => "f",
        };
        write!(f, "sm_{}{}{suffix}", self.major, self.minor)
    }
}

/// An AMD GPU architecture as the HSA runtime names an agent: a processor (`gfx` and three or four hex digits) and
/// optional target features (`gfx90a:sramecc+:xnack-`), which do not take part in matching images to GPUs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmdArch<'a> {
    processor: &'a str,
    features: &'a str,
}

impl<'a> AmdArch<'a> {
    /// `gfx` and three or four hex digits, then `:`-separated features if any; surrounding whitespace is ignored.
    pub fn parse(name: &'a str) -> Option<Self> {
        let name = name.trim();
        let (processor, features) = name.split_once(':').unwrap_or((name, ""));
        let digits = processor.strip_prefix("gfx")?;
        ((3..=4).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .then_some(AmdArch {
                processor,
                features,
            })
    }

    /// `gfx90a`: what code objects are built for and run on (AMD code objects are not portable across processors).
    pub fn processor(&self) -> &'a str {
        self.processor
    }

    /// `sramecc+:xnack-`, or empty.
    pub fn features(&self) -> &'a str {
        self.features
    }

    /// (major, minor, stepping): gfx90a is 9.0.10, gfx942 9.4.2, gfx1100 11.0.0 (the major in decimal, then a hex
    /// digit each).
    pub fn isa_version(&self) -> (u32, u32, u32) {
        let digits = &self.processor[3..];
        let (major, rest) = digits.split_at(digits.len() - 2);
        let hex = |i: usize| u32::from_str_radix(&rest[i..i + 1], 16).unwrap_or(0);
        (major.parse().unwrap_or(0), hex(0), hex(1))
    }
}

/// The x86-64 microarchitecture levels a host image can be built for (`host:x86-64-v3,x86-64`, like the `sm_XX`
/// list of an NVIDIA target), lowest first, each with the CPU features it adds to the one before (the x86-64
/// psABI's lists, as `is_x86_feature_detected!` spells them; `lahfsahf`, which v2 adds too, cannot be detected and
/// every x86-64 CPU since 2006 has). Build support checks the names, the host-elf plugin loads the highest level
/// this CPU runs.
pub const X86_64_LEVELS: [(&str, &[&str]); 4] = [
    ("x86-64", &[]),
    (
        "x86-64-v2",
        &["cmpxchg16b", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"],
    ),
    (
        "x86-64-v3",
        &[
            "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave",
        ],
    ),
    (
        "x86-64-v4",
        &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
    ),
];

/// A level's rank (0 for the baseline) and every feature it needs, or `None` for a name that is not a level.
pub fn x86_64_level(name: &str) -> Option<(usize, impl Iterator<Item = &'static str>)> {
    let rank = X86_64_LEVELS.iter().position(|(n, _)| *n == name)?;
    Some((
        rank,
        X86_64_LEVELS[..=rank]
            .iter()
            .flat_map(|(_, features)| features.iter().copied()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names_and_triples() {
        for k in DeviceKind::ALL {
            assert_eq!(DeviceKind::from_name(k.name()), Some(k));
            if let Some(t) = k.gpu_triple() {
                assert_eq!(DeviceKind::of_triple(t), Some(k));
            }
        }
        assert_eq!(
            DeviceKind::of_triple("x86_64-unknown-linux-gnu"),
            Some(DeviceKind::Host)
        );
        assert_eq!(DeviceKind::of_triple("aarch64-unknown-linux-gnu"), None);
        assert_eq!(DeviceKind::of_triple("x86_64-pc-windows-msvc"), None);
        assert_eq!(DeviceKind::from_name("spirv"), None);
        assert_eq!(
            DeviceKind::of_image("x86_64-unknown-linux-gnu", GPU_SIM_ARCH),
            Some(DeviceKind::GpuSim)
        );
        assert_eq!(
            DeviceKind::of_image("x86_64-unknown-linux-gnu", "x86-64-v3"),
            Some(DeviceKind::Host)
        );
        assert_eq!(
            DeviceKind::of_image(NVPTX_TRIPLE, "sm_90"),
            Some(DeviceKind::Nvptx)
        );
    }

    #[test]
    fn nvidia_architectures() {
        let sm90a = NvidiaArch::parse("sm_90a").unwrap();
        assert_eq!((sm90a.major, sm90a.minor), (9, 0));
        assert_eq!(sm90a.variant, NvidiaVariant::ArchSpecific);
        assert_eq!(sm90a.to_string(), "sm_90a");
        let sm100 = NvidiaArch::parse("sm_100").unwrap();
        assert_eq!((sm100.major, sm100.minor, sm100.number()), (10, 0, 100));
        assert_eq!(sm100.to_string(), "sm_100");
        assert_eq!(
            NvidiaArch::parse("sm_100f").unwrap().variant,
            NvidiaVariant::FamilySpecific
        );
        assert_eq!(NvidiaArch::new(8, 6).to_string(), "sm_86");
        for bad in [
            "", "sm_", "sm_9", "sm_9x", "gfx90a", "90", "sm_90af", "x86_64",
        ] {
            assert_eq!(NvidiaArch::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn amd_architectures() {
        let a = AmdArch::parse("gfx90a:sramecc+:xnack-").unwrap();
        assert_eq!((a.processor(), a.features()), ("gfx90a", "sramecc+:xnack-"));
        assert_eq!(AmdArch::parse("gfx90a").unwrap().features(), "");
        assert_eq!(AmdArch::parse("gfx90a").unwrap().isa_version(), (9, 0, 10));
        assert_eq!(AmdArch::parse("gfx942").unwrap().isa_version(), (9, 4, 2));
        assert_eq!(AmdArch::parse("gfx1100").unwrap().isa_version(), (11, 0, 0));
        for bad in ["", "gfx", "gfx90", "gfx90g", "gfx12345", "sm_90", "amdgcn"] {
            assert_eq!(AmdArch::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn build_architectures_by_kind() {
        assert!(DeviceKind::Nvptx.is_arch("sm_80"));
        assert!(DeviceKind::Nvptx.is_arch("sm_90a"));
        assert!(!DeviceKind::Nvptx.is_arch("gfx90a"));
        assert!(DeviceKind::Amdgcn.is_arch("gfx942"));
        assert!(!DeviceKind::Amdgcn.is_arch("gfx90a:xnack+"));
        assert!(DeviceKind::Host.is_arch("x86-64-v3"));
        assert!(!DeviceKind::Host.is_arch("znver3"));
        assert!(DeviceKind::Amdgcn.looks_like_arch("gfx9999999"));
        assert_eq!(triple_arch("x86_64-unknown-linux-gnu"), "x86_64");
    }

    #[test]
    fn levels_accumulate() {
        let (rank, v3) = x86_64_level("x86-64-v3").unwrap();
        let v3: Vec<_> = v3.collect();
        assert_eq!(rank, 2);
        assert!(v3.contains(&"sse4.2") && v3.contains(&"avx2") && !v3.contains(&"avx512f"));
        assert_eq!(x86_64_level("x86-64").unwrap().1.count(), 0);
        assert!(x86_64_level("znver3").is_none());
    }
}
