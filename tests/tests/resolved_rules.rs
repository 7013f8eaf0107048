//! The region rules ask about bindings, not spellings (the guide, `docs/src/parallel.md`, "Race freedom"): a reduction variable is the `let` in
//! scope where the loop starts, a `let` before the loop may read it, and a name the loop body rebinds is not it. On
//! the host-elf device and in the host fallback alike.

use offload::target;

/// Two `let`s of `s`: the second is the reduction variable, the first is another variable.
#[allow(unused_mut, unused_variables)]
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn shadowed_declaration(on_device: bool, n: u64) -> u64 {
    let mut s = 100u64;
    let mut s = 0u64;
    for _i in 0..n {
        s += 1;
    }
    s
}

/// A `let` before the loop reads the reduction variable's initial value.
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn read_before_the_loop(on_device: bool, n: u64) -> u64 {
    let mut s = 5u64;
    let step = s * 2;
    for _i in 0..n {
        s += step;
    }
    s
}

/// Inside the loop, a block's own `s` is not the reduction variable.
#[allow(clippy::let_and_return)]
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn shadowed_in_the_loop(on_device: bool, n: u64) -> u64 {
    let mut s = 1u64;
    for _i in 0..n {
        let v = {
            let s = 2u64;
            s
        };
        s += v;
    }
    s
}

/// A closure parameter named as the reduction variable is the closure's.
#[allow(clippy::redundant_closure_call)]
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device))]
fn closure_parameter(on_device: bool, n: u64) -> u64 {
    let mut s = 0u64;
    for _i in 0..n {
        s += (|s: u64| s * 3)(1);
    }
    s
}

/// Several variables, one shadowed before the loop.
#[allow(unused_mut, unused_variables)]
#[target(teams_distribute_parallel_for, reduction(+: a, b), if(on_device))]
fn several(on_device: bool, n: u64) -> (u64, u64) {
    let mut a = 1000u64;
    let mut a = 1u64;
    let mut b = a + 1;
    for _i in 0..n {
        a += 1;
        b += 2;
    }
    (a, b)
}

#[test]
fn the_reduction_variable_is_the_binding_in_scope_at_the_loop() {
    for on_device in [true, false] {
        for n in [0u64, 1, 997, 1000] {
            assert_eq!(
                shadowed_declaration(on_device, n),
                n,
                "device {on_device}, n {n}"
            );
            assert_eq!(
                read_before_the_loop(on_device, n),
                5 + 10 * n,
                "device {on_device}, n {n}"
            );
            assert_eq!(
                shadowed_in_the_loop(on_device, n),
                1 + 2 * n,
                "device {on_device}, n {n}"
            );
            assert_eq!(
                closure_parameter(on_device, n),
                3 * n,
                "device {on_device}, n {n}"
            );
            assert_eq!(
                several(on_device, n),
                (1 + n, 2 + 2 * n),
                "device {on_device}, n {n}"
            );
        }
    }
}

/// Values declared before the loop that are `Copy` stay readable in it: numbers, arrays, tuples, slices, closures.
#[target(teams_distribute_parallel_for, if(on_device))]
fn reads_copies(on_device: bool, x: &[f32], y: &mut [f32]) {
    let w = [0.25f32, 0.5, 0.25];
    let (a, b) = (2.0f32, 1.0f32);
    let xs = &x[1..];
    let scale = |v: f32| a * v + b;
    let n = y.len();
    for i in 0..n {
        y[i] = scale(xs[i]) * (w[0] + w[1] + w[2]);
    }
}

#[test]
fn copies_declared_before_the_loop_are_read_in_it() {
    for on_device in [true, false] {
        let x: Vec<f32> = (0..1001).map(|i| i as f32).collect();
        let mut y = vec![0.0; 1000];
        reads_copies(on_device, &x, &mut y);
        assert!(
            y.iter().zip(&x[1..]).all(|(y, x)| *y == 2.0 * x + 1.0),
            "device {on_device}"
        );
    }
}
