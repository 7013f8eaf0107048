//! Puts device images into the fat binary: an ELF object (written with `object`) holding each image's bytes and its
//! [`DeviceImageRecord`] in the runtime's `OFFLOAD_IMAGES` linkme section, wrapped in a static archive.
//!
//! The link rules (measured, see TOOLCHAIN.md): the record section needs `SHF_ALLOC | SHF_WRITE | SHF_GNU_RETAIN`
//! or `--gc-sections` drops it; the archive must be linked `+whole-archive`; names must be unique per package.

use crate::nested::BuiltImage;
use crate::package::{Kind, Package};
use crate::Error;
use object::write::{Object, Relocation, StandardSection, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationEncoding, RelocationFlags, RelocationKind,
    SectionFlags, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};
use offload_model::abi::DeviceImageRecord;
use offload_model::hash::hash_parts;
use std::path::Path;

/// linkme's section for `#[distributed_slice] static OFFLOAD_IMAGES` in the runtime.
const IMAGES_SECTION: &[u8] = b"linkme_OFFLOAD_IMAGES";

pub fn embed(pkg: &Package, images: &[BuiltImage], out_dir: &Path) -> Result<(), Error> {
    let suffix = pkg.unique_suffix();
    for kind in [Kind::Lib, Kind::Bin, Kind::Example, Kind::Test, Kind::Bench] {
        let imgs: Vec<&BuiltImage> = images.iter().filter(|i| i.kind == kind).collect();
        if imgs.is_empty() {
            continue;
        }
        let obj = object_file(pkg, &imgs)
            .map_err(|e| Error::Config(format!("writing the image object: {e}")))?;
        let name = format!(
            "offload_images_{}_{}_{suffix}",
            pkg.name.replace('-', "_"),
            kind.name()
        );
        let obj_path = out_dir.join(format!("{name}.o"));
        match kind {
            Kind::Lib => {
                let mut archive = std::io::Cursor::new(Vec::new());
                let member = ar_archive_writer::NewArchiveMember::new(
                    obj,
                    &ar_archive_writer::DEFAULT_OBJECT_READER,
                    format!("{name}.o"),
                );
                ar_archive_writer::write_archive_to_stream(
                    &mut archive,
                    &[member],
                    ar_archive_writer::ArchiveKind::Gnu,
                    false,
                    None,
                )
                .map_err(Error::io("writing the image archive"))?;
                let lib_path = out_dir.join(format!("lib{name}.a"));
                std::fs::write(&lib_path, archive.into_inner())
                    .map_err(Error::io(format!("writing {}", lib_path.display())))?;
                // Bundled into the library's rlib, so it reaches every final link that uses the library.
                println!("cargo:rustc-link-search=native={}", out_dir.display());
                println!("cargo:rustc-link-lib=static:+whole-archive={name}");
            }
            _ => {
                std::fs::write(&obj_path, &obj)
                    .map_err(Error::io(format!("writing {}", obj_path.display())))?;
                // An object on the link line is linked whole.
                println!(
                    "cargo:rustc-link-arg-{}={}",
                    kind.plural(),
                    obj_path.display()
                );
            }
        }
    }
    Ok(())
}

fn object_file(pkg: &Package, images: &[&BuiltImage]) -> object::write::Result<Vec<u8>> {
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let rodata = obj.section_id(StandardSection::ReadOnlyData);
    let records = obj.add_section(Vec::new(), IMAGES_SECTION.to_vec(), SectionKind::Data);
    obj.section_mut(records).flags = SectionFlags::Elf {
        sh_flags: u64::from(
            object::elf::SHF_ALLOC | object::elf::SHF_WRITE | object::elf::SHF_GNU_RETAIN,
        ),
    };
    let ro_sym = obj.section_symbol(rodata);
    for image in images {
        let id = hash_parts(&[&image.bytes, image.target.triple().as_bytes()]);
        let start = obj.append_section_data(rodata, &image.bytes, 64);
        let cstr = |s: &str| [s.as_bytes(), b"\0"].concat();
        let triple = obj.append_section_data(rodata, &cstr(image.target.triple()), 1);
        let arch = obj.append_section_data(rodata, &cstr(&image.arch), 1);
        let package = obj.append_section_data(rodata, &cstr(&pkg.name), 1);
        let mut rec = vec![0u8; DeviceImageRecord::SIZE];
        rec[0..4].copy_from_slice(&DeviceImageRecord::VERSION.to_le_bytes());
        rec[4..8].copy_from_slice(&image.format.to_le_bytes());
        rec[8..16].copy_from_slice(&id.to_le_bytes());
        let tag = DeviceImageRecord::PACKAGE_TAG;
        rec[tag..tag + 8].copy_from_slice(&pkg.tag.to_le_bytes());
        let at = obj.append_section_data(records, &rec, 8);
        for (field, addend) in [
            (DeviceImageRecord::IMAGE_START, start),
            (
                DeviceImageRecord::IMAGE_END,
                start + image.bytes.len() as u64,
            ),
            (DeviceImageRecord::TRIPLE, triple),
            (DeviceImageRecord::ARCH, arch),
            (DeviceImageRecord::PACKAGE, package),
        ] {
            obj.add_relocation(
                records,
                Relocation {
                    offset: at + field as u64,
                    symbol: ro_sym,
                    addend: addend as i64,
                    flags: RelocationFlags::Generic {
                        kind: RelocationKind::Absolute,
                        encoding: RelocationEncoding::Generic,
                        size: 64,
                    },
                },
            )?;
        }
        // A weak symbol gives the archive an index (GNU ld wants one) without clashing when linked twice.
        obj.add_symbol(Symbol {
            name: format!("__offload_image_{id:016x}").into_bytes(),
            value: start,
            size: image.bytes.len() as u64,
            kind: SymbolKind::Data,
            scope: SymbolScope::Linkage,
            weak: true,
            section: SymbolSection::Section(rodata),
            flags: SymbolFlags::None,
        });
    }
    obj.write()
}
