//! A `collapse(n)` share walked run by run gives every item of the thread's block once, in order, each with the
//! token `Iteration::own` gives it (the fast runs' tokens are made by an add, so they must be checked against it).

use offload_model::abi::{flat_share, Nest};
use offload_model::lanes::{each_nest, NestShare};
use offload_model::view::{Exclusive, Iteration, Own};

type Walk<T> = Vec<(T, Own<'static>)>;

/// The items and tokens of thread `g` of `total`, walked, and as the plain iterator with `own` gives them.
fn both<N: Nest, const S: usize>(
    nest: N,
    strides: [usize; S],
    g: usize,
    total: usize,
) -> (Walk<N::Item>, Walk<N::Item>)
where
    N::Item: Iteration + std::fmt::Debug,
{
    let mut walked = Vec::new();
    // SAFETY: each thread's block of one partition, the strides the same for all.
    let share = unsafe { Exclusive::new(flat_share(nest.clone(), g, total)) };
    each_nest(share, strides, [], |item, t: Own<'_>| {
        // SAFETY (of the test): the tokens are only compared, never used for an access.
        walked.push((item, unsafe {
            std::mem::transmute::<Own<'_>, Own<'static>>(t)
        }));
    });
    let plain = flat_share(nest, g, total)
        .map(|item| (item, unsafe { item.own(&strides) }))
        .collect();
    (walked, plain)
}

fn check<N: Nest, const S: usize>(nest: N, strides: [usize; S])
where
    N::Item: Iteration + std::fmt::Debug + PartialEq,
{
    let count = nest.count();
    for total in [1, 2, 3, 7, 64] {
        let mut seen = 0;
        for g in 0..total {
            let (walked, plain) = both(nest.clone(), strides, g, total);
            assert_eq!(walked, plain, "thread {g} of {total}");
            seen += walked.len();
        }
        assert_eq!(seen, count, "{total} threads");
    }
}

#[test]
fn ranges_of_every_width_and_sign() {
    check((1..7usize, 1..9usize), [10]);
    check((0..5u32, 0..4u32), [4]);
    check((-3..4i64, -2..5i32), [7]);
    check((0..4i8, -128..127i8), [300]);
    check((1..=6u64, 0..=9u64), [10]);
    check((250..=255u8, 250..=255u8), [256]);
    check((0..3usize, (usize::MAX - 4)..=usize::MAX), [5]);
}

#[test]
fn inner_values_past_the_stride_own_nothing() {
    // `i` reaches 9 with stride 8: the runs that cross it must fall back to item by item.
    check((0..5usize, 0..10usize), [8]);
    // No flat index written: stride 0, nothing owned.
    check((0..5usize, 0..10usize), [0]);
    // Overflowing flat indices.
    check(((usize::MAX - 3)..usize::MAX, 0..4usize), [usize::MAX / 2]);
}

#[test]
fn stepped_and_deeper_nests() {
    check((0..6usize, (0..20usize).step_by(3)), [20]);
    check((0..3usize, 0..4usize, 0..5usize), [4, 5]);
    check((0..3usize, 1..4usize, 2..=6u32, 0..2i16), [4, 7, 2]);
    check((0..2usize, 0..0usize, 0..5usize), [1, 5]);
    check((0..0usize, 0..3usize), [3]);
}

/// `walk` on an empty share calls nothing.
#[test]
fn empty_share() {
    let mut calls = 0;
    // SAFETY: the whole (empty) space for one thread.
    unsafe { flat_share((0..0usize, 0..5usize), 0, 1).walk(&[5], |_, _| calls += 1) };
    assert_eq!(calls, 0);
}

/// `schedule(static, c)` over a nest: every thread's chunks together walk every item once, with `own`'s token.
#[test]
fn chunked_nests_cover_the_space_once() {
    use offload_model::lanes::ChunkShare;
    let nest = (-2..5i32, 0..=10u16);
    let strides = [11];
    let all: Vec<_> = flat_share(nest.clone(), 0, 1)
        .map(|item| (item, unsafe { item.own(&strides) }))
        .collect();
    for (chunk, total) in [(1, 1), (3, 2), (4, 3), (100, 4), (5, 64)] {
        let mut got = Vec::new();
        for g in 0..total {
            let mut mine = Vec::new();
            // SAFETY: thread `g`'s chunks of one deal; the tokens are only compared.
            unsafe {
                nest.clone()
                    .chunks(chunk, g, total)
                    .walk(&strides, |item, t: Own<'_>| {
                        mine.push((item, std::mem::transmute::<Own<'_>, Own<'static>>(t)))
                    })
            };
            // Round-robin: this thread's chunks are `g`, `g + total`, ..
            for (item, _) in &mine {
                let at = all
                    .iter()
                    .position(|(i, _)| i == item)
                    .expect("an item of the nest");
                assert_eq!(
                    (at / chunk) % total,
                    g,
                    "item {item:?}, chunk {chunk}, {total} threads"
                );
            }
            got.extend(mine);
        }
        got.sort_by_key(|(i, _)| *i);
        let mut want = all.clone();
        want.sort_by_key(|(i, _)| *i);
        assert_eq!(got, want, "chunk {chunk}, {total} threads");
    }
}
