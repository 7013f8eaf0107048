//! Structured data (OpenMP's `declare mapper`): a struct holding slices, `#[derive(Mapper)]`, is a
//! region parameter mapped field by field, and a data construct's variable. Each region runs on the device and in
//! the host fallback (`if(on_device)`), and the tests change host or device copies where a wrong mapping would copy.

use offload::{
    data_scope, omp_get_num_devices, omp_is_initial_device, omp_target_is_present, target,
    target_data, target_enter_data, target_exit_data, target_update, Mapper,
};

/// The port of C's `struct grid { double *u; const double *coef; int n; double h; }`: the pointers become slices,
/// which carry their lengths.
#[derive(Mapper)]
pub struct Grid<'a> {
    u: &'a mut [f64],
    coef: &'a [f64],
    n: usize,
    h: f64,
}

/// Whether a region asked to run on a device does (not under `OMP_TARGET_OFFLOAD=DISABLED`, where every region
/// runs in the host fallback).
fn ran_on_device(on_device: bool) -> bool {
    on_device && omp_get_num_devices() > 0
}

/// A serial region updating the grid: `u` is `tofrom`, `coef` `to`, `n` and `h` firstprivate.
#[target(if(on_device))]
fn relax(on_device: bool, g: Grid<'_>) -> bool {
    for i in 0..g.n {
        g.u[i] += g.h * g.coef[i];
    }
    omp_is_initial_device()
}

/// The same through `&mut`: the struct's values are still the region's own copies.
#[target(if(on_device))]
fn relax_ref(on_device: bool, g: &mut Grid<'_>) -> bool {
    for i in 0..g.n {
        g.u[i] += g.h * g.coef[i];
    }
    g.h = -1.0;
    g.n = 0;
    omp_is_initial_device()
}

#[test]
fn a_region_updates_a_struct_of_slices() {
    let coef: Vec<f64> = (0..32).map(|i| i as f64).collect();
    for on_device in [true, false] {
        let mut u = vec![1.0; 32];
        let initial = relax(
            on_device,
            Grid {
                u: &mut u,
                coef: &coef,
                n: 30,
                h: 0.5,
            },
        );
        assert_eq!(initial, !ran_on_device(on_device), "ran where asked");
        let want: Vec<f64> = (0..32)
            .map(|i| if i < 30 { 1.0 + 0.5 * i as f64 } else { 1.0 })
            .collect();
        assert_eq!(u, want, "on_device {on_device}");

        let mut g = Grid {
            u: &mut u,
            coef: &coef,
            n: 32,
            h: 2.0,
        };
        assert_eq!(relax_ref(on_device, &mut g), !ran_on_device(on_device));
        assert_eq!((g.n, g.h), (32, 2.0), "values are firstprivate");
        assert_eq!(g.u[31], 1.0 + 2.0 * 31.0);
        assert_eq!(g.u[1], 1.0 + 0.5 + 2.0);
    }
}

/// Inputs for a work-shared loop: shared slices and a value; the output is its own parameter (a parallel region
/// takes no struct with `&mut` fields).
#[derive(Mapper)]
pub struct Axpy<'a> {
    x: &'a [f64],
    y: &'a [f64],
    a: f64,
    n: usize,
}

#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(4),
    if(on_device)
)]
fn axpy(on_device: bool, p: Axpy<'_>, out: &mut [f64]) {
    // The struct's fields are the same in every thread, so they may bound the loop.
    for i in 0..p.n.min(p.x.len()) {
        out[i] = p.a * p.x[i] + p.y[i];
    }
}

#[test]
fn a_work_shared_loop_reads_a_struct_and_writes_its_own_output() {
    let x: Vec<f64> = (0..1001).map(|i| i as f64).collect();
    let y = vec![3.0; 1001];
    for on_device in [true, false] {
        let mut out = vec![0.0; 1001];
        axpy(
            on_device,
            Axpy {
                x: &x,
                y: &y,
                a: 2.0,
                n: 1001,
            },
            &mut out,
        );
        assert!(
            out.iter()
                .enumerate()
                .all(|(i, &v)| v == 2.0 * i as f64 + 3.0),
            "on_device {on_device}: {:?}",
            &out[..4]
        );
    }
}

const SENTINEL: i64 = 0x5EED_F00D;

/// Field map types: `from` and `alloc` are not copied in, `to` on a `&mut` field is not copied back.
#[derive(Mapper)]
pub struct Fields<'a> {
    #[map(from)]
    result: &'a mut [i64],
    #[map(alloc)]
    scratch: &'a mut [i64],
    #[map(to)]
    input: &'a mut [i64],
    /// One object, mapped `tofrom`.
    count: &'a mut i64,
}

#[target(if(on_device))]
fn fill(on_device: bool, f: Fields<'_>) -> [i64; 2] {
    let seen = [f.result[0], f.scratch[0]];
    for i in 0..f.result.len() {
        f.scratch[i] = f.input[i] * 2;
        f.result[i] = f.scratch[i] + 1;
        f.input[i] = -1; // the device copy only
    }
    *f.count += 1;
    seen
}

#[test]
fn field_map_types_override_the_defaults() {
    for on_device in [true, false] {
        let mut result = vec![SENTINEL; 8];
        let mut scratch = vec![SENTINEL; 8];
        let mut input: Vec<i64> = (0..8).collect();
        let mut count = 41;
        let seen = fill(
            on_device,
            Fields {
                result: &mut result,
                scratch: &mut scratch,
                input: &mut input,
                count: &mut count,
            },
        );
        if ran_on_device(on_device) {
            // The device copies were never written from the host: fresh device memory, not the sentinel (on LLVM's
            // libomptarget, whose memory is not zeroed, they start as the host's values).
            assert!(
                offload_tests::runtime_is_llvm() || seen.iter().all(|&s| s != SENTINEL),
                "`from` and `alloc` fields were copied in: {seen:?}"
            );
            assert_eq!(input, (0..8).collect::<Vec<_>>(), "`to` copied back");
            assert_eq!(scratch, [SENTINEL; 8], "`alloc` copied back");
        } else {
            assert_eq!(seen, [SENTINEL; 2], "the fallback sees the host data");
        }
        assert_eq!(
            result,
            (0..8).map(|i| 2 * i + 1).collect::<Vec<_>>(),
            "`from` copied back"
        );
        assert_eq!(count, 42, "an object field is `tofrom`");
    }
}

#[test]
fn a_data_region_maps_every_field_and_regions_inside_find_them_present() {
    if omp_get_num_devices() == 0 {
        return; // nothing to be present on
    }
    let coef = vec![1.0; 16];
    let mut u = vec![1.0; 16];
    let mut g = Grid {
        u: &mut u,
        coef: &coef,
        n: 16,
        h: 1.0,
    };
    target_data!(map(tofrom: g) => {
        assert!(omp_target_is_present(g.u.as_ptr().cast(), 0));
        assert!(omp_target_is_present(g.coef.as_ptr().cast(), 0));
        g.u[0] = 100.0; // the host copy only: the region finds `u` present and copies nothing in
        assert!(!relax_ref(true, g));
        assert_eq!(g.u[0], 100.0, "nothing copied back after the region");
        assert_eq!(g.u[1], 1.0);
        target_update!(from: g);
        assert_eq!(g.u[0], 2.0, "the device copy never saw 100");
        g.u[0] = 50.0;
        target_update!(to: g);
    });
    assert!(!omp_target_is_present(u.as_ptr().cast(), 0));
    assert!(!omp_target_is_present(coef.as_ptr().cast(), 0));
    assert_eq!(u[0], 50.0, "copied back at the end");
    assert_eq!(u[1], 2.0);
}

/// OpenMP's `target enter data map(to: g)` .. `target exit data map(from: g)` of a struct of slices: inside a data
/// scope the struct (which borrows its slices) is entered in one statement and exited in another, regions between
/// find every field present, and the exit copies back and returns the struct.
#[test]
fn a_struct_of_slices_is_entered_and_exited_in_a_data_scope() {
    let coef = vec![2.0; 16];
    let mut u = vec![1.0; 16];
    data_scope(|s| {
        let g = Grid {
            u: &mut u,
            coef: &coef,
            n: 16,
            h: 0.5,
        };
        let mut m = target_enter_data!(map(to: g), scope(s));
        let on_device = omp_get_num_devices() > 0;
        // (Without devices, device 0 is the host, where all data is present.)
        assert!(omp_target_is_present(m.u.as_ptr().cast(), 0));
        assert!(omp_target_is_present(m.coef.as_ptr().cast(), 0));
        if on_device {
            m.u[0] = 100.0; // the host copy only: the region finds `u` present and copies nothing in
        }
        for _ in 0..2 {
            assert_eq!(relax_ref(true, &mut m), !on_device, "ran where asked");
        }
        let g = target_exit_data!(map(from: m));
        assert!(
            !on_device || !omp_target_is_present(g.u.as_ptr().cast(), 0),
            "exited"
        );
        assert_eq!(g.h, 0.5, "the region's values were its own");
        assert_eq!(g.u[1], 3.0, "two relaxations copied back");
        assert_eq!(g.u[0], 3.0, "the device copy never saw 100");
    });
    assert_eq!(u, vec![3.0; 16]);
}

/// A scope's entries never outlive it: one dropped without an exit is released (nothing copied back), and so is a
/// forgotten one, at the scope's end, while its data is still borrowed.
#[test]
fn a_scope_releases_what_was_dropped_or_forgotten_without_copying_back() {
    if omp_get_num_devices() == 0 {
        return; // nothing to map
    }
    let mut a = vec![1.0f64; 8];
    let mut b = vec![1.0f64; 8];
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    data_scope(|s| {
        let ra = &mut a;
        let rb = &mut b[..];
        let (ma, mut mb) = target_enter_data!(map(to: ra, rb), scope(s));
        scale(&mut mb);
        drop(ma);
        assert!(!omp_target_is_present(pa.cast(), 0), "dropped: released");
        std::mem::forget(mb);
        assert!(
            omp_target_is_present(pb.cast(), 0),
            "forgotten: still mapped in the scope"
        );
    });
    assert!(
        !omp_target_is_present(pb.cast(), 0),
        "released at the scope's end"
    );
    assert_eq!(b, vec![1.0; 8], "a release copies nothing back");
    assert_eq!(a, vec![1.0; 8]);
}

#[target]
fn scale(y: &mut [f64]) {
    for v in y.iter_mut() {
        *v *= 2.0;
    }
}

/// A panic in the scope releases its entries too; the data can be mapped afresh afterwards.
#[test]
fn a_panic_in_a_scope_releases_its_entries() {
    let mut y = vec![1.0f64; 8];
    let p = y.as_ptr();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        data_scope(|s| {
            let ry = &mut y;
            let m = target_enter_data!(map(to: ry), scope(s));
            std::mem::forget(m);
            panic!("in the scope");
        })
    }));
    assert!(r.is_err());
    assert!(omp_get_num_devices() == 0 || !omp_target_is_present(p.cast(), 0));
    scale(&mut y);
    assert_eq!(y, vec![2.0; 8], "mapped afresh: copied in and back");
}

/// A struct whose field is pointed elsewhere while entered cannot be copied back where it came from: the exit says
/// so, and releases what was entered.
#[test]
fn exiting_a_struct_whose_field_moved_panics_and_releases() {
    if omp_get_num_devices() == 0 {
        return; // nothing to map
    }
    let coef = vec![2.0; 4];
    let mut u = vec![1.0; 4];
    let mut other = vec![7.0; 4];
    let pu = u.as_ptr();
    data_scope(|s| {
        let g = Grid {
            u: &mut u,
            coef: &coef,
            n: 4,
            h: 1.0,
        };
        let mut m = target_enter_data!(map(to: g), scope(s));
        m.u = &mut other;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(
            || target_exit_data!(map(from: m)),
        ));
        let Err(e) = r else {
            panic!("the exit must refuse")
        };
        let msg = e.downcast::<String>().unwrap();
        assert!(
            msg.contains("not where it was when it was entered"),
            "{msg}"
        );
        assert!(!omp_target_is_present(pu.cast(), 0), "released");
    });
}

/// Entered data is borrowed, so other regions and data regions may hold it too: `delete` (which ends every reference
/// and frees the device copy) would pull it from under them. Exiting scoped data with `delete` panics, after
/// releasing only the scope's own reference: here the enclosing data region's mapping survives, and both regions'
/// results reach the host.
#[test]
fn deleting_scoped_data_panics_and_leaves_other_holders_their_mapping() {
    let mut v = vec![1.0f64; 8];
    target_data!(map(tofrom: v) => {
        scale(v);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            data_scope(|s| {
                let part = &mut v[0..4];
                let m = target_enter_data!(map(to: part), scope(s));
                target_exit_data!(map(delete: m));
            })
        }));
        let Err(e) = r else { panic!("delete must refuse") };
        let msg = e
            .downcast_ref::<&str>()
            .map(|m| m.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(msg.contains("`delete` would free the device copy under them"), "{msg}");
        scale(v);
    });
    assert_eq!(v, vec![4.0; 8]);
}

// ---- Structs that own their arrays: XSBench's `SimulationData`, whose C struct `malloc`s them.

/// The port of a C struct owning its arrays: `Vec` fields, mapped as slices through `&Sim` (`to`) and `&mut Sim`
/// (`tofrom`, or the field's `#[map(..)]`); the other fields are values.
#[derive(Mapper, Clone, Debug, Default)]
pub struct Sim {
    concs: Vec<f64>,
    #[map(to)]
    mats: Vec<u32>,
    lookups: usize,
    scale: f64,
}

fn sim() -> Sim {
    Sim {
        concs: (0..8).map(|i| i as f64).collect(),
        mats: (0..64).map(|i| (i * 5) % 8).collect(),
        lookups: 60,
        scale: 0.5,
    }
}

/// XSBench's shape: a work-shared loop bounded by a field, reading the arrays through `&Sim`.
#[target(
    teams_distribute_parallel_for,
    num_teams(3),
    thread_limit(2),
    if(on_device)
)]
fn lookup(on_device: bool, s: &Sim, out: &mut [f64]) {
    for i in 0..s.lookups {
        out[i] = s.concs[s.mats[i] as usize] * s.scale + s.mats.len() as f64;
    }
}

/// Writes through `&mut Sim`: `concs` comes back; `mats` is `#[map(to)]`, so its device writes do not; a value
/// field's write comes back on a device as it stays in the fallback.
#[target(if(on_device))]
fn update(on_device: bool, s: &mut Sim) -> bool {
    for c in s.concs.iter_mut() {
        *c += 1.0;
    }
    s.mats[0] = 99;
    s.scale *= 4.0;
    omp_is_initial_device()
}

#[test]
fn a_region_reads_a_struct_that_owns_its_arrays() {
    let s = sim();
    for on_device in [true, false] {
        let mut out = vec![-1.0; 64];
        lookup(on_device, &s, &mut out);
        for (i, o) in out.iter().enumerate() {
            let want = if i < 60 {
                s.concs[s.mats[i] as usize] * 0.5 + 64.0
            } else {
                -1.0
            };
            assert_eq!(*o, want, "device {on_device}, element {i}");
        }
    }
}

#[test]
fn a_region_writes_a_struct_that_owns_its_arrays_through_mut() {
    for on_device in [true, false] {
        let mut s = sim();
        let initial = update(on_device, &mut s);
        assert_eq!(initial, !ran_on_device(on_device), "ran where asked");
        assert_eq!(
            s.concs,
            (1..9).map(|i| i as f64).collect::<Vec<_>>(),
            "device {on_device}"
        );
        assert_eq!(
            s.scale, 2.0,
            "device {on_device}: a value's write comes back"
        );
        let want = if ran_on_device(on_device) { 0 } else { 99 };
        assert_eq!(
            s.mats[0], want,
            "device {on_device}: `#[map(to)]` copies nothing back"
        );
    }
}

#[test]
fn a_data_region_maps_an_owning_struct_and_regions_inside_copy_nothing() {
    if omp_get_num_devices() == 0 {
        return; // nothing to be present on
    }
    let mut s = sim();
    target_data!(map(to: s) => {
        assert!(omp_target_is_present(s.concs.as_ptr().cast(), 0));
        assert!(omp_target_is_present(s.mats.as_ptr().cast(), 0));
        // `s: &mut offload::Fixed<Sim>`, whose `Vec`s cannot change: their elements are written through `elems_mut`.
        s.elems_mut(|s| &s.concs)[1] = 100.0; // the host copy only: the region finds `concs` present and copies nothing in
        let mut out = vec![0.0; 64];
        lookup(true, s, &mut out);
        assert_eq!(out[5], 1.0 * 0.5 + 64.0, "the device copy, mapped at the entry");
    });
    assert!(!omp_target_is_present(s.concs.as_ptr().cast(), 0));
}

/// The block sees the struct as `offload::Fixed<Sim>` (`&mut` here): regions take it as their `&mut Sim` (written `s` or
/// `&mut s`) and `&Sim` parameters and find its arrays present, copying nothing; the host copy changes only at the
/// exit. (Nothing in the block can replace, grow or drop a `Vec`: tests/ui/target_data_owned_*.rs.)
#[test]
fn an_owning_structs_data_region_lends_it_to_regions_that_copy_nothing() {
    let device = ran_on_device(true);
    let mut s = sim();
    target_data!(map(tofrom: s) => {
        let mut out = vec![0.0; 64];
        lookup(true, s, &mut out);
        assert_eq!(out[5], 1.0 * 0.5 + 64.0);
        assert_eq!(update(true, s), !device);
        assert_eq!(update(true, &mut s), !device);
        assert_eq!(s.scale, 8.0, "a value field is the region's object, copied in and out by each call");
        if device {
            assert!(omp_target_is_present(s.concs.as_ptr().cast(), 0));
            assert_eq!(s.concs[0], 0.0, "the device copy was written, not the host's: nothing copied back");
        } else {
            assert_eq!(s.concs[0], 2.0);
        }
    });
    assert_eq!(
        s.concs,
        (2..10).map(|i| i as f64).collect::<Vec<_>>(),
        "copied back at the exit"
    );
    assert_eq!(
        s.mats[0],
        if device { 0 } else { 99 },
        "`#[map(to)]`: not copied back"
    );
    assert!(!device || !omp_target_is_present(s.concs.as_ptr().cast(), 0));
}

/// Entered in a data scope, the struct is a `ScopedMapped` that derefs to `offload::Fixed<Sim>` too: a region takes it
/// as `&mut Sim`, and nothing can replace a `Vec` before the exit (tests/ui/scoped_owning_push.rs).
#[test]
fn an_owning_struct_entered_in_a_data_scope_goes_to_mut_regions() {
    let device = ran_on_device(true);
    let mut s = sim();
    data_scope(|sc| {
        let r = &mut s;
        let mut m = target_enter_data!(map(to: r), scope(sc));
        update(true, &mut m);
        assert_eq!(m.concs[0], if device { 0.0 } else { 1.0 });
        target_exit_data!(map(from: m));
    });
    assert_eq!(s.concs, (1..9).map(|i| i as f64).collect::<Vec<_>>());
}

/// An owning struct with a `bool` beside its array.
#[derive(Mapper)]
pub struct Flagged {
    data: Vec<f64>,
    flag: bool,
}

/// Fills `data` only: through `map(from: ..)` the value field is still copied in and out (a region reads it and
/// writes it back), so the host's `bool` keeps its value.
#[target(map(from: f), if(on_device))]
fn fill_flagged(on_device: bool, f: &mut Flagged) {
    for (k, v) in f.data.iter_mut().enumerate() {
        *v = k as f64;
    }
}

#[test]
fn a_value_field_through_mut_from_keeps_its_value() {
    for on_device in [true, false] {
        let mut f = Flagged {
            data: vec![-1.0; 4],
            flag: true,
        };
        fill_flagged(on_device, &mut f);
        assert_eq!(f.data, [0.0, 1.0, 2.0, 3.0], "device {on_device}");
        assert!(f.flag, "device {on_device}: the value came back as it went");
    }
}

/// Two arrays of one type.
#[derive(Mapper)]
pub struct Pair {
    a: Vec<f64>,
    b: Vec<f64>,
}

/// Swaps the two arrays' handles: on a device the host's `Vec`s cannot follow, so the region fails there (in the
/// host fallback they swap, as Rust says).
#[target(if(on_device))]
fn swap_arrays(on_device: bool, p: &mut Pair) {
    core::mem::swap(&mut p.a, &mut p.b);
}

#[test]
fn a_region_that_swaps_vec_fields_fails_on_a_device() {
    let mut p = Pair {
        a: vec![1.0; 2],
        b: vec![2.0; 2],
    };
    swap_arrays(false, &mut p);
    assert_eq!((p.a[0], p.b[0]), (2.0, 1.0), "the fallback swaps");
    if !ran_on_device(true) {
        return;
    }
    let e = try_swap_arrays(true, &mut p).expect_err("a moved field fails the region");
    assert!(e.to_string().contains("moved a `Vec` field"), "{e}");
    assert_eq!((p.a[0], p.b[0]), (2.0, 1.0), "nothing copied back");
}

/// A block cannot replace a mapped `Vec` (it sees `offload::Fixed<Pair>`), but a region's host fallback, which gets the
/// `&mut Pair`, may swap two: the exit would copy each device copy into the other buffer, so it releases the mapping
/// without copying back, and says so.
#[test]
fn a_fallback_that_swaps_mapped_vecs_inside_a_data_region_releases_them_and_says_so() {
    if omp_get_num_devices() == 0 {
        return; // nothing mapped
    }
    let mut p = Pair {
        a: vec![1.0; 2],
        b: vec![2.0; 4],
    };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        target_data!(map(tofrom: p) => {
            swap_arrays(false, p);
        });
    }));
    let e = r.expect_err("the exit says the data moved");
    let msg = e
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default();
    assert!(msg.contains("moved inside the block"), "{msg}");
    assert_eq!(
        (p.a.len(), p.b.len()),
        (4, 2),
        "the swap stands, nothing copied over it"
    );
    assert!(
        !omp_target_is_present(p.a.as_ptr().cast(), 0)
            && !omp_target_is_present(p.b.as_ptr().cast(), 0),
        "every field released"
    );
}
