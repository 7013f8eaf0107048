//! Loading images and finding their kernels. An image must be an AMDGPU ELF code object built for the GPU's very
//! processor (AMD code objects are not portable across `gfx` processors); it is loaded into an executable that is
//! kept for the life of the process, and a kernel is found by its kernel-descriptor symbol `<name>.kd`.

use super::error::{Error, ImageError};
use super::safe::{info, Info, KeptExecutable, KeptSymbol, OwnedExecutable, OwnedReader};
use super::sys::*;
use offload_model::device_kind::{AmdArch, AMDGCN_TRIPLE};
use offload_model::fatbin::ImageFormat;
use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex, RwLock};

/// The triple of the images this plugin runs.
pub const TRIPLE: &str = AMDGCN_TRIPLE;

/// `e_machine` of AMDGPU code objects.
const EM_AMDGPU: u16 = 224;

/// `gfx90a` for `gfx90a:sramecc+:xnack-` (the model's one parser of AMD architectures): target features do not take
/// part in matching. A name that is no `gfx` processor stays as it is.
pub fn base_arch(name: &str) -> &str {
    AmdArch::parse(name).map_or(name, |a| a.processor())
}

/// How well an image suits a GPU of architecture `agent_arch`: an HSA code object built for that very processor
/// runs; nothing else does.
pub fn rank_for(
    agent_arch: &str,
    image_triple: &str,
    image_arch: &str,
    format: ImageFormat,
) -> Option<u32> {
    (image_triple == TRIPLE
        && format == ImageFormat::Hsaco
        && !agent_arch.is_empty()
        && base_arch(image_arch) == base_arch(agent_arch))
    .then_some(1)
}

/// What the loader is given must be an AMDGPU ELF code object: a 64-bit little-endian ELF file for `EM_AMDGPU`.
fn check_code_object(bytes: &[u8]) -> Result<(), ImageError> {
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Err(ImageError::NotElf);
    }
    if bytes.len() < 64 {
        return Err(ImageError::Truncated(bytes.len()));
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err(ImageError::NotElf64Le);
    }
    match u16::from_le_bytes([bytes[18], bytes[19]]) {
        EM_AMDGPU => Ok(()),
        machine => Err(ImageError::Machine(machine)),
    }
}

/// An image's code object, checked, at an address the loader can read it from in place: the embedded bytes if they
/// are 16-byte aligned, else an aligned copy. The copy is kept for the process's life, like the executable
/// (debuggers find code objects by address).
pub fn code_object(format: ImageFormat, bytes: &'static [u8]) -> Result<&'static [u8], ImageError> {
    if format != ImageFormat::Hsaco {
        return Err(ImageError::Format(format));
    }
    check_code_object(bytes)?;
    if bytes.as_ptr().cast::<u128>().is_aligned() {
        return Ok(bytes);
    }
    /// The copies, kept for the process (reachable from here: kept on purpose, not leaked).
    static COPIES: Mutex<Vec<&'static [u128]>> = Mutex::new(Vec::new());
    let mut v = vec![0u128; bytes.len().div_ceil(16)];
    // SAFETY: `v` holds at least `bytes.len()` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), bytes.len())
    };
    let v: &'static [u128] = Vec::leak(v);
    COPIES.lock().unwrap_or_else(|p| p.into_inner()).push(v);
    // SAFETY: the buffer holds `bytes.len()` initialised bytes and lives forever.
    Ok(unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), bytes.len()) })
}

/// What HSA needs to know about a kernel, read from its `.kd` symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    /// The kernel descriptor's address, for the dispatch packet.
    pub object: u64,
    pub kernarg_size: u32,
    /// Static LDS.
    pub group_size: u32,
    /// Stack bytes per work-item.
    pub private_size: u32,
    /// The stack size could not be bounded at compile time.
    pub dynamic_stack: bool,
}

/// The kernels found in a device's images, by kernel handle.
pub type KernelTable = RwLock<Vec<KernelInfo>>;

/// A loaded image.
pub struct AmdGpuImage {
    executable: KeptExecutable,
    agent: Agent,
    kernels: Arc<KernelTable>,
}

/// Loads images onto one GPU; the kernels found in them go into the GPU's kernel table.
pub struct Loader {
    hsa: &'static Hsa,
    agent: Agent,
    /// The agent's profile, which its executables are made with.
    profile: u32,
    kernels: Arc<KernelTable>,
}

impl Loader {
    /// A loader for GPU `agent` of `profile`, with an empty kernel table.
    pub fn new(hsa: &'static Hsa, agent: Agent, profile: u32) -> Loader {
        Loader {
            hsa,
            agent,
            profile,
            kernels: Arc::new(RwLock::new(Vec::new())),
        }
    }

    /// The kernel table, which the loaded images' lookups fill and launches read.
    pub fn kernels(&self) -> Arc<KernelTable> {
        Arc::clone(&self.kernels)
    }

    /// Loads a checked code object into a new executable, kept for the life of the process.
    pub fn load(&self, bytes: &'static [u8]) -> Result<AmdGpuImage, Error> {
        let reader = OwnedReader::from_memory(self.hsa, bytes)?;
        let executable = OwnedExecutable::new(self.hsa, self.profile)?;
        executable.load(self.agent, &reader)?;
        executable.freeze()?;
        match executable.validate()? {
            0 => {}
            result => return Err(Error::Invalid(result)),
        }
        // The reader is no longer needed once the executable is frozen.
        drop(reader);
        Ok(AmdGpuImage {
            executable: executable.keep(),
            agent: self.agent,
            kernels: Arc::clone(&self.kernels),
        })
    }
}

impl AmdGpuImage {
    /// The kernel `symbol`: its handle in the device's kernel table, `None` if the image has no such symbol, `Err`
    /// if the runtime could not say or the symbol is not a usable kernel.
    pub fn find(&self, symbol: &CStr) -> Result<Option<usize>, Error> {
        // A kernel's symbol is its kernel descriptor, `<name>.kd` (no interior NUL: it extends a C string).
        let Ok(name) = CString::new([symbol.to_bytes(), b".kd"].concat()) else {
            return Ok(None);
        };
        let found = match self.executable.symbol(&name, self.agent) {
            Ok(s) => s,
            Err(e) if e.status() == Some(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let info = kernel_info(found, &name.to_string_lossy())?;
        let mut kernels = self.kernels.write().unwrap_or_else(|p| p.into_inner());
        let index = match kernels.iter().position(|k| *k == info) {
            Some(i) => i,
            None => {
                kernels.push(info);
                kernels.len() - 1
            }
        };
        Ok(Some(index))
    }
}

/// A variable of a loaded image: its address on the GPU (the loader allocated it in the GPU's memory) and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variable {
    pub address: u64,
    pub size: u32,
}

impl AmdGpuImage {
    /// The variable `name`: `None` if the image has no such symbol, `Err` if the runtime could not say or the
    /// symbol is not a variable.
    pub fn variable(&self, name: &CStr) -> Result<Option<Variable>, Error> {
        let found = match self.executable.symbol(name, self.agent) {
            Ok(s) => s,
            Err(e) if e.status() == Some(HSA_STATUS_ERROR_INVALID_SYMBOL_NAME) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let symbol = name.to_string_lossy();
        let get = |attribute| {
            found.info(attribute).map_err(|source| Error::Symbol {
                symbol: symbol.to_string(),
                source,
            })
        };
        if get(info::TYPE)? != HSA_SYMBOL_KIND_VARIABLE {
            return Err(Error::NotAVariable(symbol.to_string()));
        }
        let size = get(info::VARIABLE_SIZE)?;
        let address = found
            .info(info::VARIABLE_ADDRESS)
            .map_err(|source| Error::Symbol {
                symbol: symbol.to_string(),
                source,
            })?;
        Ok(Some(Variable { address, size }))
    }
}

/// Reads a kernel symbol's properties.
fn kernel_info(symbol: KeptSymbol, name: &str) -> Result<KernelInfo, Error> {
    fn get<T: Copy>(
        symbol: KeptSymbol,
        name: &str,
        attribute: Info<info::Symbol, T>,
    ) -> Result<T, Error> {
        symbol.info(attribute).map_err(|source| Error::Symbol {
            symbol: name.to_string(),
            source,
        })
    }
    if get(symbol, name, info::TYPE)? != HSA_SYMBOL_KIND_KERNEL {
        return Err(Error::NotAKernel(name.to_string()));
    }
    Ok(KernelInfo {
        object: get(symbol, name, info::KERNEL_OBJECT)?,
        kernarg_size: get(symbol, name, info::KERNARG_SEGMENT_SIZE)?,
        group_size: get(symbol, name, info::GROUP_SEGMENT_SIZE)?,
        private_size: get(symbol, name, info::PRIVATE_SEGMENT_SIZE)?,
        dynamic_stack: get(symbol, name, info::DYNAMIC_CALLSTACK)? != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    const HSACO: ImageFormat = ImageFormat::Hsaco;

    #[test]
    fn an_hsaco_runs_on_its_own_processor_only() {
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a", HSACO), Some(1));
        assert_eq!(rank_for("gfx942", TRIPLE, "gfx942", HSACO), Some(1));
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx942", HSACO), None);
        assert_eq!(rank_for("gfx942", TRIPLE, "gfx90a", HSACO), None);
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx908", HSACO), None);
        assert_eq!(rank_for("gfx1100", TRIPLE, "gfx110", HSACO), None);
    }

    #[test]
    fn target_features_do_not_take_part_in_matching() {
        assert_eq!(base_arch("gfx90a:sramecc+:xnack-"), "gfx90a");
        assert_eq!(base_arch("gfx90a"), "gfx90a");
        assert_eq!(rank_for("gfx90a:xnack+", TRIPLE, "gfx90a", HSACO), Some(1));
        assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a:xnack-", HSACO), Some(1));
    }

    #[test]
    fn other_triples_and_formats_are_not_ranked() {
        for triple in [
            "nvptx64-nvidia-cuda",
            "x86_64-unknown-linux-gnu",
            "amdgcn",
            "",
        ] {
            assert_eq!(
                rank_for("gfx90a", triple, "gfx90a", HSACO),
                None,
                "{triple}"
            );
        }
        for format in [
            ImageFormat::SharedObject,
            ImageFormat::Ptx,
            ImageFormat::Cubin,
        ] {
            assert_eq!(rank_for("gfx90a", TRIPLE, "gfx90a", format), None);
        }
        assert_eq!(
            rank_for("", TRIPLE, "", HSACO),
            None,
            "an agent without a name"
        );
        assert_eq!(rank_for("gfx90a", TRIPLE, "sm_90", HSACO), None);
    }

    /// The first 20 bytes of an ELF header with the given class, data encoding and machine.
    fn elf(class: u8, data: u8, machine: u16) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = class;
        h[5] = data;
        h[6] = 1;
        h[7] = 64; // ELFOSABI_AMDGPU_HSA
        h[16] = 3; // ET_DYN
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h
    }

    #[test]
    fn a_code_object_must_be_a_64_bit_amdgpu_elf_file() {
        let check = |bytes: &[u8]| check_code_object(bytes).map_err(|e| e.to_string());
        assert_eq!(check(&elf(2, 1, 224)), Ok(()));
        let e = check(&elf(2, 1, 62)).unwrap_err();
        assert!(e.contains("machine 62, not AMDGPU"), "{e}");
        let e = check(&elf(1, 1, 224)).unwrap_err();
        assert!(e.contains("not a 64-bit little-endian"), "{e}");
        let e = check(&elf(2, 2, 224)).unwrap_err();
        assert!(e.contains("not a 64-bit little-endian"), "{e}");
        let e = check(b"junk").unwrap_err();
        assert!(e.contains("not an ELF file"), "{e}");
        let e = check(b"").unwrap_err();
        assert!(e.contains("not an ELF file"), "{e}");
        let e = check(&elf(2, 1, 224)[..40]).unwrap_err();
        assert!(e.contains("truncated"), "{e}");
    }

    #[test]
    fn an_unaligned_code_object_is_copied_to_an_aligned_buffer() {
        let bytes = super::super::fake::code_object(false);
        assert!(!bytes.as_ptr().cast::<u128>().is_aligned());
        let aligned = code_object(HSACO, bytes).unwrap();
        assert!(aligned.as_ptr().cast::<u128>().is_aligned());
        assert_eq!(aligned, bytes);
        assert_eq!(
            code_object(ImageFormat::Ptx, bytes),
            Err(ImageError::Format(ImageFormat::Ptx))
        );
    }
}
