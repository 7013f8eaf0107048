//! Adversarial programs against the resolved region rules (the guide, `docs/src/parallel.md`, "Race freedom"), on the host-elf device and in the
//! host fallback. What the attacks found is a compile error now (`ui/attack_*.rs`: a per-thread bound or `Cell` under
//! a raw identifier or a capitalised `let`, a reference to the reduction variable, a `&Cell` made by `Cell::from_mut`,
//! a user's `len` on an integer constant) or computes the right result here (a reduction variable spelt raw, or
//! shadowed by a match arm's capitalised name or a block's item); what is still let through is `#[ignore = "hole"]`.

use offload::target;

const W: [u32; 4] = [1, 2, 3, 4];

/// A capitalised uniform `let` (C's `N`), a constant array's `len()`, and a raw identifier for the loop variable's
/// copy: all the same in every thread.
#[allow(non_snake_case)]
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    if(on_device)
)]
fn uniform_spellings(on_device: bool, n: usize, y: &mut [u32]) {
    let N = n * W.len();
    for i in 0..N {
        let r#j = i;
        y[j] += W[i % 4];
    }
}

/// Match arms with variants, a block's own constant, and a reduction variable read by value before the loop.
#[allow(non_upper_case_globals)]
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    reduction(+: s),
    if(on_device)
)]
fn reduction_spellings(on_device: bool, n: u64) -> u64 {
    let mut s = 1u64;
    let step = s * 2;
    for i in 0..n {
        s += match (i % 2 == 0).then_some(step) {
            Some(v) => v,
            None => {
                const one: u64 = 1;
                one
            }
        };
    }
    s
}

/// The reduction variable under its raw name is the reduction variable.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    reduction(+: s),
    if(on_device)
)]
fn raw_reduction(on_device: bool, n: u64) -> u64 {
    let mut s = 0u64;
    for _i in 0..n {
        r#s += 1;
    }
    s
}

/// A match arm's capitalised name binds (no constant `S` is in scope): it is not the reduction variable.
#[allow(non_snake_case, clippy::match_single_binding)]
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    reduction(+: S),
    if(on_device)
)]
fn capital_arm(on_device: bool, n: u64) -> u64 {
    let mut S = 0u64;
    for _i in 0..n {
        S += match 1u64 {
            S => S,
        };
    }
    S
}

/// An item declared in a block of the loop shadows the reduction variable there.
#[allow(non_upper_case_globals)]
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    reduction(+: s),
    if(on_device)
)]
fn item_shadows_reduction(on_device: bool, n: u64) -> u64 {
    let mut s = 0u64;
    for _i in 0..n {
        s += {
            const s: u64 = 1;
            s
        };
    }
    s
}

/// Before the resolver bound raw identifiers, capitalised pattern names and a block's items, each of these loops
/// updated something other than the private copy (or read the private copy for the arm's or item's value), and
/// returned 0 or a doubled count.
#[test]
fn reduction_variable_spellings() {
    for on_device in [true, false] {
        assert_eq!(raw_reduction(on_device, 100), 100, "device {on_device}");
        assert_eq!(capital_arm(on_device, 100), 100, "device {on_device}");
        assert_eq!(
            item_shadows_reduction(on_device, 100),
            100,
            "device {on_device}"
        );
    }
}

#[test]
fn correct_spellings_keep_their_results() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 64];
        uniform_spellings(on_device, 16, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == W[i % 4]),
            "device {on_device}: {y:?}"
        );
        let n = 101u64;
        assert_eq!(
            reduction_spellings(on_device, n),
            1 + 2 * n.div_ceil(2) + n / 2,
            "device {on_device}"
        );
    }
}

/// `private(x)` with an initial value: the thread's copy carries over between its iterations (as the guide documents,
/// and as OpenMP's `private` leaves it), so what the loop writes depends on how the iterations were shared out.
#[target(
    teams_distribute_parallel_for,
    num_teams(4),
    thread_limit(2),
    private(x),
    if(on_device)
)]
fn private_with_value(on_device: bool, y: &mut [u32]) {
    let mut x = 0u32;
    let n = y.len();
    for i in 0..n {
        x += 1;
        y[i] = x;
    }
}

#[test]
#[ignore = "hole (documented): a private variable with a value carries a count across a thread's iterations"]
fn private_with_a_value_depends_on_the_schedule() {
    for on_device in [true, false] {
        let mut y = vec![0u32; 64];
        private_with_value(on_device, &mut y);
        assert!(
            y.iter().enumerate().all(|(i, &v)| v == i as u32 + 1),
            "device {on_device}: {y:?}"
        );
    }
}
