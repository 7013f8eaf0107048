//! From a compiled image package to its images: the host's shared objects as cargo left them; GPU bitcode through the
//! device link ([`crate::devlink`]), relinked only when the device crates were rebuilt.

use super::cargo::{dep_info, RLIBS};
use super::recipe::{GpuMath, Variant};
use super::workspace::{device_crate_name, ImageGroup};
use super::{BuiltImage, NestedBuild};
use crate::devlink::Linked;
use crate::outline::Outlined;
use crate::targets::DeviceTarget;
use crate::Error;
use offload_model::fatbin::ImageFormat;
use std::path::{Path, PathBuf};

/// The images of one group: one per variant and format (a GPU target may have several architectures, NVIDIA a
/// cubin beside each PTX). `fresh`: the device crates were not rebuilt, so an earlier link may be reused.
pub(super) fn group_images(
    b: &NestedBuild,
    outlined: &Outlined,
    group: &ImageGroup,
    fresh: bool,
) -> Result<Vec<BuiltImage>, Error> {
    let inputs = dep_info(
        &b.artifact(b.first_variant(), group).with_extension("d"),
        b.dir,
    );
    // Only this group's kernels and device globals (what the runtime looks up by name): names are unique within a
    // kind, not across kinds.
    let ours = || outlined.crates.iter().filter(|c| c.kind == group.kind);
    let kernels: Vec<String> = ours()
        .flat_map(|c| c.regions.iter().map(|r| r.symbol.clone()))
        .collect();
    let globals: Vec<String> = ours().flat_map(|c| c.globals.iter().cloned()).collect();
    let what = format!("{} {} image", b.pkg.name, group.kind.name());
    let mut linked = Vec::new();
    match (b.target, &b.recipe.gpu) {
        (DeviceTarget::Amdgcn { .. }, Some((tc, GpuMath::Rocm(math)))) => {
            // rustc compiles for one AMD processor at a time: a build and a link per variant.
            for v in &b.recipe.variants {
                let gfx = v.arch.clone().unwrap_or_default();
                let work = b.dir.join("link").join(group.kind.name()).join(&gfx);
                linked.extend(link_cached(&work, fresh, &what, || {
                    let archives = amdgcn_archives(b, outlined, group, v);
                    crate::devlink::link_amdgcn(
                        &archives, &kernels, &globals, &gfx, &tc.llvm, math, &work,
                    )
                })?);
            }
        }
        (DeviceTarget::Nvptx { archs }, Some((tc, GpuMath::Cuda(cuda)))) => {
            // One bitcode library, linked for each architecture.
            let work = b.dir.join("link").join(group.kind.name());
            let library = b.artifact(b.first_variant(), group);
            linked.extend(link_cached(&work, fresh, &what, || {
                crate::devlink::link_nvptx(
                    &library, &kernels, &globals, archs, &tc.llvm, cuda, &work,
                )
            })?);
        }
        _ => {
            for v in &b.recipe.variants {
                let path = b.artifact(v, group);
                let bytes = std::fs::read(&path)
                    .map_err(Error::io(format!("reading the image {}", path.display())))?;
                linked.push(Linked {
                    arch: v.arch.as_deref().unwrap_or(b.target.arch()).to_string(),
                    format: ImageFormat::SharedObject,
                    bytes,
                });
            }
        }
    }
    Ok(linked
        .into_iter()
        .map(|l| BuiltImage {
            target: b.target.clone(),
            kind: group.kind,
            arch: l.arch,
            format: l.format,
            bytes: l.bytes,
            inputs: inputs.clone(),
        })
        .collect())
}

/// What an AMD variant's device link reads: the image's rlib and its dependencies' (the target needs LTO to link a
/// staticlib), only this group's device crates among them, and the sysroot's `core`.
fn amdgcn_archives(
    b: &NestedBuild,
    outlined: &Outlined,
    group: &ImageGroup,
    v: &Variant,
) -> Vec<PathBuf> {
    let listed = std::fs::read_to_string(b.dir.join(&v.target_dir).join(RLIBS)).unwrap_or_default();
    // Only this group's crates: kernel names are unique within a kind, not across kinds.
    let ours: Vec<String> = outlined
        .crates
        .iter()
        .filter(|c| c.kind == group.kind)
        .map(|c| device_crate_name(&c.key).replace('-', "_"))
        .chain(["offload_device", "offload_model"].map(String::from))
        .chain([group.package.replace('-', "_")])
        // The package's device dependencies (`libm`, offload-aware libraries' device crates): what the crates call
        // of them.
        .chain(b.pkg.device_dep_idents().map(String::from))
        .chain(outlined.libraries.iter().flat_map(|(lib, _)| {
            lib.device_dep_idents()
                .map(String::from)
                .chain(lib.lib_crate_name())
                .collect::<Vec<_>>()
        }))
        .map(|n| format!("lib{n}"))
        .collect();
    let mut archives: Vec<PathBuf> = listed
        .lines()
        .map(PathBuf::from)
        .filter(|p| {
            // `libNAME.rlib`, or `libNAME-HASH.rlib` for dependencies.
            let stem = p.file_stem().unwrap_or_default().to_string_lossy();
            let name = stem.split_once('-').map_or(&*stem, |(n, _)| n);
            ours.iter().any(|o| o == name)
        })
        .collect();
    archives.extend(v.sysroot_rlibs());
    archives
}

/// The linked images of a group, relinked when the device crates were rebuilt, the last link did not finish or was
/// made by another offload-build (its shims and steps may differ), else read back from the index the last link
/// wrote.
fn link_cached(
    work: &Path,
    fresh: bool,
    what: &str,
    link: impl FnOnce() -> Result<Vec<Linked>, Error>,
) -> Result<Vec<Linked>, Error> {
    let t = std::time::Instant::now();
    let index = work.join("images");
    if fresh {
        if let Some(read) = read_index(work, &index) {
            return Ok(read);
        }
    }
    let _ = std::fs::remove_file(&index);
    let linked = link()?;
    let images: Vec<String> = linked
        .iter()
        .map(|l| format!("{} {}", l.arch, l.format))
        .collect();
    crate::progress::status("Linking", &format!("{what}: {}", images.join(", ")), t);
    let mut text = format!("{}\n", linker());
    for (i, l) in linked.iter().enumerate() {
        let file = format!("image{i}.{}.bin", l.arch);
        std::fs::write(work.join(&file), &l.bytes)
            .map_err(Error::io(format!("writing {}", work.display())))?;
        text.push_str(&format!("{} {} {file}\n", l.arch, l.format.code()));
    }
    std::fs::write(&index, text).map_err(Error::io(format!("writing {}", index.display())))?;
    Ok(linked)
}

/// What links: this process's executable (the build script, or cargo-offload) and its modification time, which
/// change whenever offload-build, and so the device link, does.
fn linker() -> String {
    let exe = std::env::current_exe().ok();
    let time = exe
        .as_ref()
        .and_then(|e| std::fs::metadata(e).ok())
        .and_then(|m| m.modified().ok());
    format!("linker {exe:?} {time:?}")
}

/// The images the last link listed in `index` (`ARCH FORMAT FILE` per line, after the [`linker`] line), if this
/// linker made them and all are still there.
fn read_index(work: &Path, index: &Path) -> Option<Vec<Linked>> {
    let text = std::fs::read_to_string(index).ok()?;
    let (by, images) = text.split_once('\n')?;
    if by != linker() {
        return None;
    }
    images
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let (arch, format, file) = (f.next()?, f.next()?.parse().ok()?, f.next()?);
            Some(Linked {
                arch: arch.to_string(),
                format: ImageFormat::from_code(format)?,
                bytes: std::fs::read(work.join(file)).ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Vec<Linked> {
        vec![Linked {
            arch: "sm_90".into(),
            format: ImageFormat::Ptx,
            bytes: b"ptx\0".to_vec(),
        }]
    }

    #[test]
    fn a_link_is_reused_only_by_the_linker_that_made_it() {
        let work = std::env::temp_dir().join(format!("offload-link-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&work);
        std::fs::create_dir_all(&work).unwrap();
        let links = std::cell::Cell::new(0);
        let link = || {
            links.set(links.get() + 1);
            Ok(image())
        };
        link_cached(&work, false, "t", link).unwrap();
        let again = link_cached(&work, true, "t", link).unwrap();
        assert_eq!(again[0].bytes, b"ptx\0");
        assert_eq!(
            links.get(),
            1,
            "fresh device crates and the same linker: no relink"
        );
        // Another offload-build linked last: its shims and steps may differ.
        let index = work.join("images");
        let text = std::fs::read_to_string(&index).unwrap();
        let (_, images) = text.split_once('\n').unwrap();
        std::fs::write(&index, format!("linker elsewhere\n{images}")).unwrap();
        link_cached(&work, true, "t", link).unwrap();
        assert_eq!(links.get(), 2);
        // Rebuilt device crates are always relinked.
        link_cached(&work, false, "t", link).unwrap();
        assert_eq!(links.get(), 3);
        let _ = std::fs::remove_dir_all(&work);
    }
}
