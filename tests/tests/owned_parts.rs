//! What real ports trip on, accepted safely (the guide, `docs/src/parallel.md`, "Race freedom"): a `collapse(2)` iteration
//! writing its own column `y[k * plane + j * m + i]` (hotspot3D), a work-shared iteration handing the sub-slice of
//! its row to a helper (miniBUDE), and loop bounds read from a by-value `#[declare_target]` struct's fields
//! (XSBench). Each has its adversary: a program that uses the form to reach another iteration's element fails the
//! region (the UI cases `work_shared_sub_slice_*` and `work_shared_struct_field_deref` do not compile).

use offload::{declare_target, target};

/// The message a failed region gives: the `try_` entry point's `Err` on a device, the re-raised panic in the host
/// fallback.
fn failure(f: impl FnOnce() -> Result<(), offload::Error>) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r.expect_err("the region fails").to_string(),
        Err(p) => p
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_else(|| p.downcast_ref::<&str>().unwrap_or(&"").to_string()),
    }
}

// ---- 4: columns under collapse(2)

/// hotspot3D's shape: each `(j, i)` iteration walks its column through the `nz` planes.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn columns(on_device: bool, ny: usize, nx: usize, nz: usize, plane: usize, t: &mut [u32]) {
    for j in 0..ny {
        for i in 0..nx {
            for k in 0..nz {
                t[k * plane + j * nx + i] += (k * 1000 + j * nx + i) as u32;
            }
            t[j * nx + i] += 1;
        }
    }
}

/// An adversary: the first write names the plane the lowering takes, the second steps by another, so its elements
/// are other iterations'.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn skewed_column(on_device: bool, ny: usize, nx: usize, plane: usize, t: &mut [u32]) {
    for j in 0..ny {
        for i in 0..nx {
            let (k0, k1) = (0, 1);
            t[k0 * plane + j * nx + i] = 1;
            t[k1 * (plane + 1) + j * nx + i] = 2;
        }
    }
}

/// An adversary: `far * plane` wraps around to another iteration's element of the first plane.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn wrapping_column(on_device: bool, ny: usize, nx: usize, plane: usize, far: usize, t: &mut [u32]) {
    for j in 0..ny {
        for i in 0..nx {
            t[far * plane + j * nx + i] = 1;
        }
    }
}

#[test]
fn each_iteration_writes_its_own_column() {
    for on_device in [true, false] {
        let (ny, nx, nz) = (5, 7, 3);
        let plane = ny * nx;
        let mut t = vec![0u32; plane * nz];
        columns(on_device, ny, nx, nz, plane, &mut t);
        for k in 0..nz {
            for f in 0..plane {
                let want = (k * 1000 + f) as u32 + u32::from(k == 0);
                assert_eq!(t[k * plane + f], want, "device {on_device}");
            }
        }
    }
}

/// A plane smaller than the nest (`rows * m`): iterations `f` and `f + plane` would share a column. Those whose flat
/// index is not below the plane own nothing, so the region fails instead.
#[test]
fn a_plane_smaller_than_the_nest_fails_the_region() {
    for on_device in [true, false] {
        let (ny, nx, nz) = (5, 7, 3);
        let mut t = vec![0u32; ny * nx * nz];
        let msg = failure(|| try_columns(on_device, ny, nx, nz, nx, &mut t));
        assert!(
            offload_tests::says(&msg, "is not this iteration's"),
            "device {on_device}: {msg}"
        );
    }
}

#[test]
fn a_column_stepping_by_another_plane_fails_the_region() {
    for on_device in [true, false] {
        let (ny, nx) = (4, 4);
        let mut t = vec![0u32; 3 * ny * nx];
        let msg = failure(|| try_skewed_column(on_device, ny, nx, ny * nx, &mut t));
        assert!(
            offload_tests::says(&msg, "is not this iteration's"),
            "device {on_device}: {msg}"
        );
    }
}

/// `far * 12` is `2^64 + 8`: wrapped, the index would be the element 8 past the iteration's own, another's.
#[test]
fn a_column_whose_index_overflows_fails_the_region() {
    let (ny, nx) = (3, 4);
    let far = (u64::MAX / 12 + 1) as usize;
    assert_eq!(far.wrapping_mul(ny * nx), 8);
    for on_device in [true, false] {
        let mut t = vec![0u32; ny * nx];
        let msg = failure(|| try_wrapping_column(on_device, ny, nx, ny * nx, far, &mut t));
        assert!(
            offload_tests::says(&msg, "is not this iteration's"),
            "device {on_device}: {msg}"
        );
        assert!(t.iter().all(|&e| e == 0), "device {on_device}: {t:?}");
    }
}

// ---- 5: owned sub-slices

const W: usize = 4;

#[declare_target]
fn fill(part: &mut [u32], g: usize) {
    for (k, e) in part.iter_mut().enumerate() {
        *e = (g * 10 + k) as u32;
    }
}

/// miniBUDE's shape: each iteration, a group, hands its part to a helper.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn groups(on_device: bool, y: &mut [u32]) {
    for g in 0..y.len() / W {
        fill(&mut y[g * W..g * W + W], g);
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn groups_chained(on_device: bool, y: &mut [u32]) {
    for g in 0..y.len() / W {
        fill(&mut y[g * W..][..W], g);
        y[g * W + 1] += 100;
    }
}

/// Adversaries: one element past the row, by each spelling.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn group_too_long(on_device: bool, y: &mut [u32]) {
    for g in 0..y.len() / W - 1 {
        fill(&mut y[g * W..g * W + W + 1], g);
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn group_shifted(on_device: bool, y: &mut [u32]) {
    for g in 0..y.len() / W - 1 {
        fill(&mut y[g * W + 1..][..W], g);
    }
}

#[test]
fn each_iteration_hands_its_own_part_to_a_helper() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 40 * W];
        groups(on_device, &mut y);
        assert!(
            y.iter()
                .enumerate()
                .all(|(e, &v)| v == ((e / W) * 10 + e % W) as u32),
            "device {on_device}"
        );
        let mut y = vec![0u32; 40 * W];
        groups_chained(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(
                |(e, &v)| v == ((e / W) * 10 + e % W) as u32 + if e % W == 1 { 100 } else { 0 }
            ),
            "device {on_device}"
        );
    }
}

#[test]
fn a_part_past_the_row_fails_the_region() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 8 * W];
        let msg = failure(|| try_group_too_long(on_device, &mut y));
        assert!(
            offload_tests::says(&msg, "are not this iteration's"),
            "device {on_device}: {msg}"
        );
        let msg = failure(|| try_group_shifted(on_device, &mut y));
        assert!(
            offload_tests::says(&msg, "are not this iteration's"),
            "device {on_device}: {msg}"
        );
    }
}

// ---- 6: fields of by-value structs as bounds

#[declare_target]
#[derive(Clone, Copy)]
#[repr(C)]
pub struct Inputs {
    pub lookups: usize,
    pub scale: u32,
}

/// XSBench's shape: the loop runs over a field of the immutable inputs.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn lookups(on_device: bool, inp: Inputs, y: &mut [u32]) {
    let n = inp.lookups.min(y.len());
    for i in (0..n).step_by(inp.scale as usize) {
        y[i] = i as u32 * inp.scale;
    }
}

#[test]
fn a_by_value_structs_fields_bound_the_loop() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 100];
        let inp = Inputs {
            lookups: 60,
            scale: 3,
        };
        lookups(on_device, inp, &mut y);
        for (i, &v) in y.iter().enumerate() {
            let want = if i < 60 && i % 3 == 0 {
                i as u32 * 3
            } else {
                0
            };
            assert_eq!(v, want, "device {on_device}, element {i}");
        }
    }
}
