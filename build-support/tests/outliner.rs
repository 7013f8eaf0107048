//! The outliner on fixture crates: what it keeps, where, and what it rejects.

use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The device crate's root source, `lib.rs`.
fn lib_rs(krate: &offload_build::outline::DeviceCrate) -> &str {
    &krate
        .files
        .iter()
        .find(|(r, _)| r.ends_with("lib.rs"))
        .expect("the device crate has a lib.rs")
        .1
}

fn gen_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("outliner")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Outlining fixture `name` fails (`why`) with the errors its `name.stderr` holds (`OUTLINER_OVERWRITE=1` rewrites it).
fn rejects(name: &str, why: &str) {
    let err = offload_build::outline_dir(&fixture(name), &gen_dir(name)).expect_err(why);
    let got = err.to_string();
    let path = fixture(&format!("{name}.stderr"));
    if std::env::var_os("OUTLINER_OVERWRITE").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(got.trim_end(), want.trim_end(), "\n--- got ---\n{got}");
}

#[test]
fn calling_a_host_function_from_device_code_is_a_spanned_error() {
    rejects("calls_host_fn", "helper is not declare_target");
}

#[test]
fn kept_items_stay_on_their_lines() {
    let dir = fixture("mirror_lines");
    let gen = gen_dir("mirror_lines");
    let out = offload_build::outline_dir(&dir, &gen).expect("outlines");
    let krate = &out.crates[0];
    assert_eq!(krate.key, "lib-mirror_lines");
    let ids: Vec<&str> = out.regions().map(|r| r.identity.as_str()).collect();
    // `larger` calls `core::cmp::max`, imported by name, though a host `max` exists: not an error.
    assert_eq!(
        ids,
        [
            "mirror_lines::apply",
            "mirror_lines::biggest",
            "mirror_lines::inline::twice",
            "mirror_lines::moved::larger"
        ]
    );
    assert_eq!(
        out.regions().next().unwrap().symbol,
        "__omp_offloading_rs_12mirror_lines5apply"
    );

    for (rel, text) in &krate.files {
        let src_rel = rel.strip_prefix("src").unwrap();
        let src = std::fs::read_to_string(dir.join(src_rel)).unwrap();
        let src_lines: Vec<&str> = src.lines().collect();
        let mirror: Vec<&str> = text.lines().collect();
        assert!(mirror.len() >= src_lines.len(), "{rel:?} lost lines");
        for (n, (m, s)) in mirror.iter().zip(&src_lines).enumerate() {
            let m = m.trim_end();
            // Every mirrored line is blank, the original, or the original with a generated `#[path]`, filtered
            // derive or `use`, a lowered work-shared loop, or appended entries.
            let ok = m.is_empty()
                || m == *s
                || m.contains("::offload::__")
                || m.contains("#[path =")
                || m.contains("__offload_kernel_")
                || m.trim_start().starts_with("#[derive(")
                || m.trim_start().starts_with("use ")
                || s.trim_start().starts_with("#[");
            assert!(ok, "{rel:?}:{}: {m:?} vs {s:?}", n + 1);
        }
    }
    let lib = lib_rs(krate);
    let line = |n: usize| lib.lines().nth(n - 1).unwrap().trim().to_string();
    assert_eq!(line(1), "", "inner doc comments are dropped");
    assert_eq!(line(4), "use offload::{declare_target, target};");
    assert_eq!(line(5), "", "std imports are dropped");
    assert_eq!(
        line(6),
        "use crate :: nested :: { scale } ;",
        "only names device code uses are imported"
    );
    assert!(
        line(8).starts_with("#[path = ") && line(8).ends_with("mod nested;"),
        "{}",
        line(8)
    );
    assert!(
        line(9).starts_with("#[path = ") && line(9).ends_with("src/elsewhere.rs\"]"),
        "{}",
        line(9)
    );
    assert_eq!(line(10), "pub mod moved;");
    assert_eq!(line(13), "", "host-only functions are dropped");
    assert_eq!(line(17), "", "#[declare_target] is removed");
    assert_eq!(
        line(18),
        "#[derive(Clone, Copy, Debug)]",
        "only core derives are kept"
    );
    assert_eq!(line(19), "#[repr(C)]");
    assert_eq!(line(25), "pub fn apply(y: &mut [f32], k: f32) {");
    assert_eq!(line(35), "pub fn twice(p: P) -> P {");
    assert!(
        line(38).contains("__offload_kernel_twice") && line(38).ends_with('}'),
        "entries go before the inline module's brace"
    );
    assert!(lib.contains("export_name = \"__omp_offloading_rs_12mirror_lines5apply\""));
    let find = |text: &str| lib.lines().position(|l| l.contains(text)).map(|i| i + 1);
    let host_use = src_line("mirror_lines", "src/lib.rs", "use crate::nested::max;");
    assert_eq!(
        line(host_use),
        "",
        "an import of a host function is dropped even if kept code says `max`"
    );
    assert_eq!(
        find("pub type Real = f32;"),
        Some(src_line("mirror_lines", "src/lib.rs", "pub type Real"))
    );
    assert!(lib.contains("export_name = \"__omp_offloading_rs_12mirror_lines6inline5twice\""));
}

/// A struct that owns its arrays: on the device its `Vec` fields are `DeviceVec`s, the derives a `DeviceVec` cannot
/// have are dropped, it is marked an owning mapper, and a kernel entry rebuilds it from its fields' arguments (a
/// value field of `&mut Sim` written back), while a `&Plain` stays one object, checked to be no owning mapper.
#[test]
fn an_owning_mapper_struct_is_rebuilt_from_its_fields_on_the_device() {
    let out = offload_build::outline_dir(&fixture("owning_mapper"), &gen_dir("owning_mapper"))
        .expect("outlines");
    let lib = lib_rs(&out.crates[0]);
    let line = |n: usize| lib.lines().nth(n - 1).unwrap().trim().to_string();
    assert_eq!(
        line(3),
        "#[derive(Debug)]",
        "no `Clone`, `Copy` or `Default` for `DeviceVec`s"
    );
    // The replaced path's columns stay blank, so later columns keep their places.
    let bare = |n: usize| line(n).replace(' ', "");
    assert_eq!(bare(5), "concs:::offload::DeviceVec<f64>,");
    assert_eq!(bare(7), "mats:::offload::DeviceVec<u32>,");
    assert_eq!(line(8), "lookups: usize,");
    // Marked an owning mapper, and its slots stated (five: two per `Vec`, one for the value), on its last line.
    assert!(
        bare(9).ends_with(
            "impl::offload::__rt::OwnedMapperforSim{}impl::offload::__rt::MapperSlotsforSim{constSLOTS:usize=5;}"
        ),
        "{}",
        line(9)
    );
    let entry = |name: &str| {
        let at = lib.find(&format!("__offload_kernel_{name}")).expect(name);
        lib[at..]
            .split("pub unsafe extern")
            .next()
            .unwrap()
            .to_string()
    };
    let lookup = entry("lookup");
    assert!(lookup.contains("(__offload_dyn : * mut :: core :: ffi :: c_void , __offload_a0 : u64 , __offload_a1 : u64 , __offload_a2 : u64 , __offload_a3 : u64 , __offload_a4 : u64 , __offload_a5 : u64 , __offload_a6 : u64)"), "{lookup}");
    assert!(
        lookup.contains(
            "concs : unsafe { :: offload :: __rt :: device_vec (__offload_a0 , __offload_a1) }"
        ),
        "{lookup}"
    );
    assert!(
        lookup.contains("lookups : unsafe { :: offload :: __rt :: value (__offload_a4) }"),
        "{lookup}"
    );
    // The entry checks at compile time that the struct, as Rust resolves the parameter's type, takes the five
    // arguments it gives it.
    assert!(
        lookup.contains("< Sim as :: offload :: __rt :: MapperSlots > :: SLOTS == 5usize"),
        "{lookup}"
    );
    let refresh = entry("refresh");
    assert!(refresh.contains("& mut __offload_m0"), "{refresh}");
    assert!(
        refresh
            .contains(":: core :: ptr :: write (__offload_a4 as * mut _ , __offload_m0 . lookups)"),
        "{refresh}"
    );
    let plain = entry("plain");
    assert!(
        plain.contains(":: offload :: __rt :: object (__offload_a0)"),
        "{plain}"
    );
    assert!(plain.contains("one_object ()"), "{plain}");
}

#[test]
fn names_are_unique_per_kind_of_target_only() {
    let dir = fixture("shared_names");
    let out = offload_build::outline_dir(&dir, &gen_dir("shared_names"))
        .expect("an example and a bench may share a name");
    let mut got: Vec<(String, String)> = out
        .crates
        .iter()
        .flat_map(|c| {
            c.regions
                .iter()
                .map(|r| (c.key.clone(), r.identity.clone()))
        })
        .collect();
    got.sort();
    let want = [
        ("bench-saxpy", "saxpy::saxpy"),
        ("bin-shared-names", "shared_names::kernels::twice"),
        ("example-saxpy", "saxpy::saxpy"),
        ("lib-shared_names", "shared_names::kernels::twice"),
    ];
    assert_eq!(
        got,
        want.map(|(a, b)| (a.to_string(), b.to_string())),
        "the shared module keeps its kernel in both"
    );
}

/// The line number of the first line of a fixture file containing `text`.
fn src_line(fixture_name: &str, file: &str, text: &str) -> usize {
    let src = std::fs::read_to_string(fixture(fixture_name).join(file)).unwrap();
    src.lines()
        .position(|l| l.contains(text))
        .expect("text in fixture")
        + 1
}

#[test]
fn a_crate_not_built_for_devices_is_an_error_naming_it_and_the_fix() {
    rejects("uses_crates", "hostdep is not a device dependency");
}

/// An offload-aware library's device crate keeps its `#[declare_target]` items and what they reach (a module's
/// function, a trait impl of a kept type and its trait), not its host-only items; a dependent's `use` of it keeps
/// what that crate has (the trait, brought into scope for its method) and drops the rest.
#[test]
fn an_offload_aware_librarys_device_items_are_outlined_for_its_dependent() {
    let dir = fixture("uses_library");
    let out = offload_build::outline_dir(&dir, &gen_dir("uses_library")).expect("outlines");
    // The dependency; the package has no target but its library, which needs no library crate of its own.
    let [(lib, krate)] = out.libraries.as_slice() else {
        panic!("one library: {:?}", out.libraries.len());
    };
    assert_eq!(lib.name, "offload-lib");
    assert!(krate.regions.is_empty());
    let text = |name: &str| {
        krate
            .files
            .iter()
            .find(|(p, _)| p.ends_with(name))
            .map(|(_, t)| t.clone())
            .unwrap()
    };
    let (root, ops) = (text("lib.rs"), text("ops.rs"));
    assert!(root.contains("pub fn cube"), "{root}");
    assert!(!root.contains("fn listing"), "{root}");
    for kept in [
        "pub fn sq",
        "pub trait Norm",
        "pub struct P",
        "impl Norm for P",
    ] {
        assert!(ops.contains(kept), "{kept}:\n{ops}");
    }
    let user = &out.crates[0].files[0].1;
    assert!(user.contains("use offlib::ops::{Norm, P};"), "{user}");
    assert!(
        user.contains("use offlib::{cube};")
            || user.contains("use offlib::{ cube };")
            || user.contains("use offlib :: { cube } ;"),
        "{user}"
    );
    assert!(
        !user.contains("listing ;") && !user.contains("listing}"),
        "{user}"
    );
    // A device global of atomics is the library image's: a dependent reaching it gets a copy, and a warning.
    assert!(
        root.contains("pub static HITS") && !root.contains("export_name"),
        "{root}"
    );
    assert_eq!(krate.unpaired.len(), 1, "{:?}", krate.unpaired);
    assert!(krate.unpaired[0]
        .starts_with("`offlib::HITS` of `offload-lib` is a device global that regions change"));
    // A method a device cannot have is left out of its kept impl, and a failed device build calling it says why.
    assert!(
        ops.contains("pub fn scaled") && !ops.contains("fn to_vec"),
        "{ops}"
    );
    let notes = out.explain("error[E0599]: no method named `to_vec` found for struct `P`");
    assert_eq!(
        notes,
        "note: offload left `P::to_vec` out of the device build: it uses `Vec` (from `std`): a device has no \
         `std`; region code cannot call it\n"
    );
    assert_eq!(
        out.explain("error[E0599]: no method named `norm` found"),
        ""
    );
    // A name two functions share: the device one is kept, the host one left out, and explained if needed.
    assert!(user.contains("pub fn total(a: f64, b: f64)"), "{user}");
    assert!(!user.contains("pub fn total(v: &[f64])"), "{user}");
    assert_eq!(
        out.explain("error[E0425]: cannot find function `total` in module `report`"),
        "note: offload left `fn total` out of the device build: it uses `Vec` (from `std`): a device has no `std`; \
         region code cannot call it\n"
    );
}

#[test]
fn a_generic_region_has_a_kernel_per_instance_and_a_method_region_one_at_module_level() {
    let dir = fixture("generics");
    let gen = gen_dir("generics");
    let out = offload_build::outline_dir(&dir, &gen).expect("outlines");
    let ids: Vec<(&str, &str)> = out
        .regions()
        .map(|r| (r.identity.as_str(), r.symbol.as_str()))
        .collect();
    assert_eq!(
        ids,
        [
            (
                "generics::Body::step",
                "__omp_offloading_rs_8generics4Body4step"
            ),
            (
                "generics::first<f32,4>",
                "__omp_offloading_rs_8generics18first$3Cf32$2C4$3E"
            ),
            (
                "generics::triad<f32>",
                "__omp_offloading_rs_8generics14triad$3Cf32$3E"
            ),
            (
                "generics::triad<f64>",
                "__omp_offloading_rs_8generics14triad$3Cf64$3E"
            ),
        ]
    );
    let lib = lib_rs(&out.crates[0]);
    let text = lib.split_whitespace().collect::<Vec<_>>().join(" ");
    // The generic function once, lowered, on its line; each kernel calls it with its arguments.
    let line = |n: usize| lib.lines().nth(n - 1).unwrap_or_default();
    let at = src_line("generics", "src/lib.rs", "pub fn triad");
    assert!(line(at).contains("pub fn triad<T: Real>("), "{}", line(at));
    assert!(text.contains("triad :: < f32 > ("), "{text}");
    assert!(text.contains("triad :: < f64 > ("), "{text}");
    assert!(text.contains("first :: < f32 , 4 > ("), "{text}");
    // The kernel returns the instance's type, not `T`.
    assert!(text.contains("write_return"), "{text}");
    // The method region's impl is kept, its helper too; the host-only method is left out.
    assert!(text.contains("< Body > :: step ("), "{text}");
    let at = src_line("generics", "src/lib.rs", "fn moved");
    assert!(
        line(at).contains("fn moved(&self, dt: f64) -> f64 {"),
        "{}",
        line(at)
    );
    assert!(!lib.contains("format!"), "{lib}");
    assert!(!lib.contains("#[target]"), "{lib}");
}

#[test]
fn a_method_region_in_an_impl_without_target_is_an_error() {
    rejects("method_without_impl_attr", "the impl has no #[target]");
}
