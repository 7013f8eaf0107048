// A reference to the reduction variable made before the loop and read in it (plain Rust rejects the loop): the
// lowered loop borrows the variable mutably, as a sequential loop does, so it is rustc's borrow error, not a read of
// the initial value.
use offload::target;

#[target(teams_distribute_parallel_for, reduction(+: s))]
fn reduction_through_reference(n: u64) -> u64 {
    let mut s = 1u64;
    let r = &s;
    for _i in 0..n {
        s += *r;
    }
    s
}

// A closure reading it, the same.
#[target(teams_distribute_parallel_for, reduction(+: s))]
fn reduction_through_closure(n: u64) -> u64 {
    let mut s = 1u64;
    let get = || s;
    for _i in 0..n {
        s += get();
    }
    s
}

fn main() {}
