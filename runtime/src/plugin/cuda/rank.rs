//! Which images a device can run, and how well: a cubin for its architecture before PTX the driver must compile.

use crate::registry::Image;
use offload_model::device_kind::{NvidiaArch, NvidiaVariant};
use offload_model::fatbin::ImageFormat;

/// How well an image of `image_arch` (`sm_XY`, or `sm_XYa` for an architecture-specific image) and `format` suits a
/// device of compute capability `cc`: a cubin runs on its own major version with a minor version at least its own
/// (its exact architecture ranks highest); PTX runs on any device at least as new as its target, which the driver
/// JIT-compiles, the newest PTX best.
pub(super) fn rank_for(cc: (u32, u32), image_arch: &str, format: ImageFormat) -> Option<u32> {
    let arch = NvidiaArch::parse(image_arch)?;
    let specific = match arch.variant {
        NvidiaVariant::Portable => false,
        NvidiaVariant::ArchSpecific => true,
        // Family-specific code (`sm_100f`) is not ranked: which GPUs a family spans is not known here.
        NvidiaVariant::FamilySpecific => return None,
    };
    let (sm, image) = (arch.number(), (arch.major, arch.minor));
    // `sm_90a` code uses features only 9.0 has, and its PTX cannot be compiled for anything else either.
    if specific && image != cc {
        return None;
    }
    match format {
        ImageFormat::Cubin if image == cc => Some(3000 + specific as u32),
        ImageFormat::Cubin => (image.0 == cc.0 && image.1 <= cc.1).then_some(2000 + image.1),
        ImageFormat::Ptx => (sm <= cc.0 * 10 + cc.1).then_some(1000 + sm),
        _ => None,
    }
}

/// What the driver is given must be well formed: it reads a cubin's ELF header for its size and PTX up to its NUL.
pub(super) fn check_image(image: &Image) -> Result<(), String> {
    match image.format {
        ImageFormat::Ptx if image.bytes.last() != Some(&0) => {
            Err("the PTX image is not NUL-terminated".into())
        }
        ImageFormat::Cubin if image.bytes.get(..4) != Some(b"\x7fELF") => {
            Err("the cubin image is not an ELF file".into())
        }
        ImageFormat::Ptx | ImageFormat::Cubin => Ok(()),
        f => Err(format!("a {f} image is neither PTX nor a cubin")),
    }
}
