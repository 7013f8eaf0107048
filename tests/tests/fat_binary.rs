//! What the fat binary carries (what `objdump -h` and `objdump -s` would show): the offload entries table with one
//! LLVM-layout entry per region, and an embedded x86_64 shared object exporting each region's kernel.

use object::{Object, ObjectSection};
use offload_model::fatbin::{section, EntryFields, OffloadEntry};

fn probe() -> Vec<u8> {
    std::fs::read(env!("CARGO_BIN_EXE_probe")).expect("reading the probe binary")
}

#[test]
fn entries_table_has_llvm_layout_entries() {
    let bytes = probe();
    let file = object::File::parse(&*bytes).unwrap();
    let entries = file
        .section_by_name(section::ENTRIES)
        .expect("the entries table is in the binary");
    let data = entries.data().unwrap();
    assert_eq!(
        data.len() % OffloadEntry::SIZE,
        0,
        "56-byte __tgt_offload_entry records"
    );
    assert!(
        data.len() / OffloadEntry::SIZE >= 2,
        "the probe links both regions of the library"
    );
    for e in data.chunks_exact(OffloadEntry::SIZE) {
        let e = EntryFields::decode(e.try_into().unwrap());
        assert_eq!(e.reserved, 0, "reserved");
        assert_eq!(e.version, 1, "version 1");
        assert_eq!(e.kind, 1, "kind OpenMP");
    }
    assert!(file.section_by_name(section::IMAGES).is_some());
}

/// Every embedded ELF shared object (the probe's own header excluded).
fn embedded_images(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut at = 1;
    while let Some(off) = bytes[at..].windows(4).position(|w| w == b"\x7fELF") {
        let start = at + off;
        if let Ok(f) = object::File::parse(&bytes[start..]) {
            if f.kind() == object::ObjectKind::Dynamic {
                out.push(&bytes[start..]);
            }
        }
        at = start + 4;
    }
    out
}

fn exports(image: &[u8]) -> Vec<String> {
    let img = object::File::parse(image).unwrap();
    assert_eq!(img.architecture(), object::Architecture::X86_64);
    img.exports()
        .unwrap()
        .iter()
        .map(|e| String::from_utf8_lossy(e.name()).into_owned())
        .collect()
}

#[test]
fn each_kernel_is_embedded_once_in_an_x86_64_image() {
    let bytes = probe();
    let images: Vec<Vec<String>> = embedded_images(&bytes).into_iter().map(exports).collect();
    // This package builds for `host` and `gpu-sim` (its Cargo.toml): gpu-sim's images are the ones that export the
    // GPU panic record.
    let (sim, host): (Vec<&Vec<String>>, Vec<&Vec<String>>) = images
        .iter()
        .partition(|exports| exports.iter().any(|e| e == "__offload_panic_record"));
    // The library's regions come through the library, the binary's own through its link line: one image each per
    // kind of device, neither linked twice, and nothing from another kind of target (these tests) in a binary.
    assert_eq!((host.len(), sim.len()), (2, 2), "{images:?}");
    for kind in [&host, &sim] {
        for k in [
            "__omp_offloading_rs_13offload_tests7kernels6double",
            "__omp_offloading_rs_13offload_tests7kernels8scale_on",
            "__omp_offloading_rs_5probe6negate",
        ] {
            let holders = kind
                .iter()
                .filter(|exports| exports.iter().any(|e| e == k))
                .count();
            assert_eq!(
                holders, 1,
                "{k} must be in exactly one image of each kind: {images:?}"
            );
        }
    }
    assert!(
        images.iter().flatten().all(|e| !e.contains("conformance")),
        "test kernels stay out of binaries"
    );
    assert!(
        images.iter().flatten().all(|e| !e.contains("saxpy")),
        "nothing from other packages"
    );
}
