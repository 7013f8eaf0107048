//! Work-shared writes are race-free by construction (the guide, `docs/src/parallel.md`, "Race freedom"): inside the loop a `&mut [T]` parameter is
//! a view whose elements only the owning iteration reaches. The macro's rule asks about bindings (a shadowed loop
//! variable, a closure's parameter, a nested loop reusing the name are compile errors: `ui/`); what it lets through
//! (a stride rebound in the body) fails the region with a message on the host-elf device and in the host fallback
//! alike, instead of racing; correct code keeps its results.

use offload::target;

/// The line of `shadowed_stride`'s write.
const SHADOWED_WRITE: u32 = line!() + 14;

/// Under `collapse(2)`, a stride shadowed inside the body: rows would overlap.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn shadowed_stride(on_device: bool, n: usize, m: usize, y: &mut [u32]) {
    for i in 0..n {
        for j in 0..m {
            let m = 1;
            y[i * m + j] += 1;
        }
    }
}

/// The same loops written as OpenMP intends: each iteration its own element.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn own_elements(on_device: bool, y: &mut [u32]) {
    let n = y.len();
    for i in 0..n {
        y[i] += i as u32;
        let r = &mut y[i];
        *r *= 2;
    }
}

#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn own_cells(on_device: bool, n: usize, m: usize, y: &mut [u32]) {
    for i in 0..n {
        for j in 0..m {
            y[i * m + j] = (i * 100 + j) as u32;
        }
    }
}

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

/// A name the body rebinds is not the loop variable (`ui/work_shared_shadowed_loop_variable.rs`: a compile error); a
/// stride rebound inside the body is not the one the lowering computed before the loop, so the element it reaches
/// is not the iteration's own, which the view's check finds.
#[test]
fn an_element_another_iteration_owns_fails_the_region() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 8 * 8];
        let msg = failure(|| try_shadowed_stride(on_device, 8, 8, &mut y));
        assert!(
            msg.contains("region race_freedom::shadowed_stride")
                && offload_tests::says(&msg, "is not this iteration's"),
            "device {on_device}: {msg}"
        );
        // A device names the user's write, not the view's check (a GPU's report has only this).
        let at = format!(" at tests/tests/race_freedom.rs:{SHADOWED_WRITE}:");
        assert!(!on_device || msg.contains(&at), "{msg}");
    }
}

#[test]
fn each_iteration_writes_its_own_element() {
    for on_device in [true, false] {
        let mut y = vec![1u32; 1001];
        own_elements(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == 2 * (1 + i as u32)),
            "device {on_device}"
        );
        let (n, m) = (13, 7);
        let mut y = vec![0u32; n * m];
        own_cells(on_device, n, m, &mut y);
        for i in 0..n {
            for j in 0..m {
                assert_eq!(y[i * m + j], (i * 100 + j) as u32, "device {on_device}");
            }
        }
    }
}

// Stencils (OpenMP's most common kernel shape): an interior nest under `collapse(2)`, and rows shared out by the outer
// loop, each iteration writing its own row. Both are safe: the strides are computed once, and an index outside the
// iteration's element or row fails the region.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn stencil_collapse(on_device: bool, n: usize, m: usize, a: &[f64], anew: &mut [f64]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
        }
    }
}

#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn stencil_rows(on_device: bool, n: usize, m: usize, a: &[f64], anew: &mut [f64]) {
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
        }
    }
}

/// Jacobi as its C ports write it: the sweep and its residual (`error = fmax(error, fabs(anew - a))`) in one nest,
/// `i32` loops as C's `int` port, under `collapse(2)` and by rows.
#[target(teams_distribute_parallel_for, collapse(2), reduction(max: err), if(on_device))]
fn jacobi_collapse(on_device: bool, n: i32, m: i32, a: &[f64], anew: &mut [f64]) -> f64 {
    let mut err = 0.0f64;
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            let (j, i, m) = (j as usize, i as usize, m as usize);
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
            err = err.max((anew[j * m + i] - a[j * m + i]).abs());
        }
    }
    err
}

#[target(teams_distribute_parallel_for, reduction(max: err), if(on_device))]
fn jacobi_rows(on_device: bool, n: usize, m: usize, a: &[f64], anew: &mut [f64]) -> f64 {
    let mut err = 0.0f64;
    for j in 1..=n - 2 {
        for i in 1..m - 1 {
            anew[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
            err = err.max((anew[j * m + i] - a[j * m + i]).abs());
        }
    }
    err
}

/// The row length comes from the first `y[i * m + e]`; the second index reaches element 0 from every iteration.
/// With `m` past half of `usize`, iteration 1's row would run past `usize::MAX` and wrap round to element 0.
#[target(
    teams_distribute_parallel_for,
    num_teams(1),
    thread_limit(2),
    if(on_device)
)]
fn wrapping_row(on_device: bool, y: &mut [u64], m: usize, z: usize) {
    for i in 0..2usize {
        if z == 1 {
            y[i * m + z] = 0;
        }
        y[i * z + z] += 1;
    }
}

/// Writes one past its row's end.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn past_the_row(on_device: bool, n: usize, m: usize, y: &mut [u32]) {
    for j in 0..n {
        for i in 0..m {
            y[j * m + (i + 1)] += 1;
        }
    }
}

/// An inner index past its stride: `(j, m)` would own `(j + 1, 0)`'s element.
#[target(
    teams_distribute_parallel_for,
    collapse(2),
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn past_the_stride(on_device: bool, n: usize, m: usize, y: &mut [u32]) {
    for j in 0..n {
        for i in 0..m + 1 {
            y[j * m + i] += 1;
        }
    }
}

#[test]
fn stencils_write_their_own_cells() {
    let (n, m) = (37, 29);
    let a: Vec<f64> = (0..n * m).map(|k| ((k * 7) % 13) as f64).collect();
    let mut want = vec![-1.0; n * m];
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            want[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
        }
    }
    for on_device in [true, false] {
        let mut anew = vec![-1.0; n * m];
        stencil_collapse(on_device, n, m, &a, &mut anew);
        assert_eq!(anew, want, "collapse, device {on_device}");
        let mut anew = vec![-1.0; n * m];
        stencil_rows(on_device, n, m, &a, &mut anew);
        assert_eq!(anew, want, "rows, device {on_device}");
    }
}

#[test]
fn jacobi_sweeps_with_their_residual() {
    let (n, m) = (41usize, 33usize);
    let a: Vec<f64> = (0..n * m)
        .map(|k| ((k * 7919) % 1009) as f64 / 1009.0)
        .collect();
    let mut want = a.clone();
    let mut want_err = 0.0f64;
    for j in 1..n - 1 {
        for i in 1..m - 1 {
            want[j * m + i] = 0.25
                * (a[j * m + i + 1] + a[j * m + i - 1] + a[(j - 1) * m + i] + a[(j + 1) * m + i]);
            want_err = want_err.max((want[j * m + i] - a[j * m + i]).abs());
        }
    }
    for on_device in [true, false] {
        let mut anew = a.clone();
        let err = jacobi_collapse(on_device, n as i32, m as i32, &a, &mut anew);
        assert_eq!(
            (anew == want, err),
            (true, want_err),
            "collapse, device {on_device}"
        );
        let mut anew = a.clone();
        let err = jacobi_rows(on_device, n, m, &a, &mut anew);
        assert_eq!(
            (anew == want, err),
            (true, want_err),
            "rows, device {on_device}"
        );
    }
}

#[test]
fn a_row_past_the_end_of_usize_owns_nothing() {
    for on_device in [true, false] {
        let mut y = vec![0u64; 4];
        let msg = failure(|| try_wrapping_row(on_device, &mut y, (1 << 63) + 1, 0));
        assert!(
            msg.contains("region race_freedom::wrapping_row")
                && offload_tests::says(&msg, "not this iteration's"),
            "device {on_device}: {msg}"
        );
    }
}

#[test]
fn a_cell_outside_the_iterations_row_or_stride_fails_the_region() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 8 * 8 + 8];
        let msg = failure(|| try_past_the_row(on_device, 8, 8, &mut y));
        assert!(
            msg.contains("region race_freedom::past_the_row")
                && offload_tests::says(&msg, "owns the row of 8"),
            "device {on_device}: {msg}"
        );
        let msg = failure(|| try_past_the_stride(on_device, 8, 8, &mut y));
        assert!(
            msg.contains("region race_freedom::past_the_stride")
                && offload_tests::says(&msg, "is not this iteration's"),
            "device {on_device}: {msg}"
        );
    }
}

/// A method named `at` that a user gives the iteration token (in scope here) would send every access to element 0;
/// the lowering calls the token's own check by its path, so the region writes its own elements (a review found the
/// method-call form hijacked).
mod hijack {
    use offload::__view::{Own, Owned};
    use offload::target;

    // Never called: that is the point.
    #[allow(dead_code)]
    pub trait At<'t> {
        fn at(self, e: usize) -> Owned<'t>;
    }
    impl<'t> At<'t> for Own<'t> {
        fn at(self, _e: usize) -> Owned<'t> {
            Own::at(&self, 0)
        }
    }

    #[target(
        teams_distribute_parallel_for,
        num_teams(4),
        thread_limit(2),
        if(on_device)
    )]
    pub fn bump(on_device: bool, y: &mut [u32]) {
        for i in 0..y.len() {
            y[i] += i as u32;
        }
    }
}

/// The same for the view: a `reborrow(&self)` a user's trait gives `View` would be found before the view's own
/// `reborrow(&mut self)`, and the writes would go elsewhere; the lowering calls the view's by its path.
mod hijack_view {
    use offload::__view::View;
    use offload::target;

    #[allow(dead_code)]
    pub struct Elsewhere;
    #[allow(dead_code)]
    pub trait Reborrow {
        fn reborrow(&self) -> Elsewhere;
    }
    impl Reborrow for View<'_, u32> {
        fn reborrow(&self) -> Elsewhere {
            Elsewhere
        }
    }
    impl core::ops::Index<offload::__view::Owned<'_>> for Elsewhere {
        type Output = u32;
        fn index(&self, _: offload::__view::Owned<'_>) -> &u32 {
            &0
        }
    }
    impl core::ops::IndexMut<offload::__view::Owned<'_>> for Elsewhere {
        fn index_mut(&mut self, _: offload::__view::Owned<'_>) -> &mut u32 {
            static mut SINK: u32 = 0;
            // SAFETY (of the test): never reached once the lowering calls the view's own method.
            unsafe { &mut *core::ptr::addr_of_mut!(SINK) }
        }
    }

    #[target(
        teams_distribute_parallel_for,
        num_teams(2),
        thread_limit(2),
        if(on_device)
    )]
    pub fn bump(on_device: bool, y: &mut [u32]) {
        for i in 0..y.len() {
            y[i] += i as u32;
        }
    }
}

/// A per-thread `let` that rebinds a parameter's name to a value of another type before the loop: the loop's body
/// reads that binding, not the parameter. (A `Cell` there is refused: see `ui/work_shared_interior_mutability.rs`.)
#[target(
    teams_distribute_parallel_for,
    num_teams(2),
    thread_limit(2),
    if(on_device)
)]
fn rebound_before_the_loop(on_device: bool, x: &[u32], y: &mut [u32]) {
    let x = (x[0] * 2, 0u8);
    for i in 0..y.len() {
        y[i] = x.0 + i as u32;
    }
}

#[test]
fn the_lowering_keeps_the_views_and_bindings_the_body_names() {
    for on_device in [true, false] {
        let mut y = vec![1u32; 64];
        hijack_view::bump(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == 1 + i as u32),
            "device {on_device}: {y:?}"
        );
        let mut y = vec![0u32; 16];
        rebound_before_the_loop(on_device, &[5], &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == 10 + i as u32),
            "device {on_device}: {y:?}"
        );
    }
}

#[test]
fn a_users_method_on_the_token_is_not_the_check() {
    for on_device in [true, false] {
        let mut y = vec![1u32; 64];
        hijack::bump(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == 1 + i as u32),
            "device {on_device}: {y:?}"
        );
    }
}
