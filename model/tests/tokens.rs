//! What an iteration token owns, at the edges of `usize`.

use offload_model::view::Iteration;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Whether the token of loop value `i` with row length `m` lets the iteration reach element `e`.
fn owns(i: usize, m: usize, e: usize) -> bool {
    // SAFETY (of the test): the token is only asked, never used for an access.
    let t = unsafe { i.own(&[m]) };
    catch_unwind(AssertUnwindSafe(|| {
        t.at(e);
    }))
    .is_ok()
}

#[test]
fn a_row_owns_its_elements_and_no_others() {
    assert!(owns(2, 4, 8) && owns(2, 4, 11));
    assert!(!owns(2, 4, 7) && !owns(2, 4, 12));
}

/// A row running past `usize::MAX` would wrap round to element 0, which iteration 0's row owns: two threads could
/// write it. Such a row owns nothing.
#[test]
fn a_row_past_the_end_of_usize_owns_nothing() {
    let m = (1usize << 63) + 1;
    assert!(owns(0, m, 0));
    assert!(
        !owns(1, m, 0),
        "iteration 1's row wrapped round to element 0"
    );
    assert!(!owns(1, m, m));
}
