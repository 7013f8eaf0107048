//! Puts device images into the fat binary: an ELF object (written with `object`) holding each image's bytes and its
//! image record ([`ImageRecord::encode`]) in the runtime's images section ([`section::IMAGES`]), wrapped in a static archive.
//!
//! The link rules (measured with rust-lld and GNU ld): the record section needs `SHF_ALLOC | SHF_WRITE | SHF_GNU_RETAIN`
//! or `--gc-sections` drops it; the archive must be linked `+whole-archive`; names must be unique per package.

use crate::nested::BuiltImage;
use crate::package::{Kind, Package};
use crate::Error;
use object::write::{Object, Relocation, StandardSection, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, RelocationEncoding, RelocationFlags, RelocationKind,
    SectionFlags, SectionKind, SymbolFlags, SymbolKind, SymbolScope,
};
use offload_model::fatbin::{section, ImageRecord};
use offload_model::hash::hash_parts;
use std::path::Path;

pub fn embed(pkg: &Package, images: &[BuiltImage], out_dir: &Path) -> Result<(), Error> {
    let suffix = pkg.unique_suffix();
    for kind in [Kind::Lib, Kind::Bin, Kind::Example, Kind::Test, Kind::Bench] {
        let imgs: Vec<&BuiltImage> = images.iter().filter(|i| i.kind == kind).collect();
        if imgs.is_empty() {
            continue;
        }
        let obj = object_file(pkg, &imgs)?;
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
    let records = obj.add_section(
        Vec::new(),
        section::IMAGES.as_bytes().to_vec(),
        SectionKind::Data,
    );
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
        let record = ImageRecord {
            format: image.format,
            id,
            // Offsets in the read-only section, which the relocations below turn into addresses.
            image_start: start,
            image_end: start + image.bytes.len() as u64,
            triple: obj.append_section_data(rodata, &cstr(image.target.triple()), 1),
            arch: obj.append_section_data(rodata, &cstr(&image.arch), 1),
            package: obj.append_section_data(rodata, &cstr(&pkg.name), 1),
            package_tag: pkg.tag,
        };
        let (bytes, pointers) = record.encode();
        let at = obj.append_section_data(records, &bytes, 8);
        for (field, offset) in pointers {
            obj.add_relocation(
                records,
                Relocation {
                    offset: at + field.offset() as u64,
                    symbol: ro_sym,
                    addend: offset as i64,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::DeviceTarget;
    use object::{Object, ObjectSection};
    use offload_model::fatbin::{DeviceImageRecord, ImageFormat};

    /// The object's record, read back with the model's decoder after doing what the linker does with its
    /// relocations, describes the image embedded beside it.
    #[test]
    fn an_embedded_record_decodes_to_its_image() {
        let pkg = Package {
            name: "demo".into(),
            edition: "2021".into(),
            manifest_dir: "/work/demo".into(),
            workspace_root: "/work".into(),
            targets: Vec::new(),
            metadata_targets: None,
            device_deps: Vec::new(),
            uses_offload: false,
            host_crates: Vec::new(),
            tag: 0xfeed_f00d,
            features: Default::default(),
        };
        let image = BuiltImage {
            target: DeviceTarget::Nvptx {
                archs: vec!["sm_80".into()],
            },
            kind: Kind::Lib,
            arch: "sm_80".into(),
            format: ImageFormat::Ptx,
            bytes: b".version 7.8\n.target sm_80\n\0".to_vec(),
            inputs: Vec::new(),
        };
        let obj = object_file(&pkg, &[&image]).unwrap();
        let file = object::File::parse(&*obj).unwrap();
        let rodata = file.section_by_name(".rodata").unwrap().data().unwrap();
        let records = file.section_by_name(section::IMAGES).unwrap();
        let mut bytes: [u8; DeviceImageRecord::SIZE] = records.data().unwrap().try_into().unwrap();
        // Every relocation is against the read-only section's symbol: its address, linked at 0, plus the addend.
        let relocations: Vec<_> = records.relocations().collect();
        assert_eq!(relocations.len(), 5);
        for (at, r) in relocations {
            bytes[at as usize..at as usize + 8].copy_from_slice(&(r.addend() as u64).to_le_bytes());
        }
        let rec = ImageRecord::decode(&bytes).unwrap();
        let cstr = |at: u64| {
            let s = &rodata[at as usize..];
            std::str::from_utf8(&s[..s.iter().position(|&b| b == 0).unwrap()]).unwrap()
        };
        assert_eq!(rec.format, ImageFormat::Ptx);
        assert_eq!(rec.package_tag, 0xfeed_f00d);
        assert_eq!(
            &rodata[rec.image_start as usize..rec.image_end as usize],
            &image.bytes[..]
        );
        assert_eq!(cstr(rec.triple), "nvptx64-nvidia-cuda");
        assert_eq!(cstr(rec.arch), "sm_80");
        assert_eq!(cstr(rec.package), "demo");
    }
}
