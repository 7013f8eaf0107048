//! The task machinery under Miri (CI runs this file under Stacked and Tree Borrows): spawn and wait, forgotten and
//! dropped handles, a panicking task, a failure nobody took, a scope ending while its tasks run, `taskwait`, polling
//! a task as a future, `offload::spawn`, and a region's `nowait_f` (its host fallback: Miri has no device).

use offload::{target, task_scope, Error};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

#[target(teams_distribute_parallel_for, num_teams(2), thread_limit(2))]
fn scale(k: u32, y: &mut [u32]) {
    for i in 0..y.len() {
        y[i] *= k;
    }
}

#[target]
fn check(k: u32) -> u32 {
    if k > 2 {
        panic!("k is too large: {k}");
    }
    k + 1
}

#[test]
fn tasks_borrow_and_return() {
    let (mut a, b) = (vec![1u32; 16], vec![2u32; 16]);
    let total = task_scope(|s| {
        let ta = s.spawn(|| {
            a.iter_mut().for_each(|v| *v += 1);
            a.len()
        });
        let tb = s.spawn(|| b.iter().sum::<u32>());
        ta.wait().unwrap() as u32 + tb.wait().unwrap()
    });
    assert_eq!(total, 16 + 32);
    assert!(a.iter().all(|&v| v == 2));
}

#[test]
fn forgotten_and_dropped_tasks_have_ended_when_the_scope_returns() {
    let (mut a, mut b) = (vec![1u32; 8], vec![1u32; 8]);
    task_scope(|s| {
        std::mem::forget(s.spawn(|| a.iter_mut().for_each(|v| *v = 7)));
        drop(s.spawn(|| b.iter_mut().for_each(|v| *v = 9)));
    });
    assert!(a.iter().all(|&v| v == 7) && b.iter().all(|&v| v == 9));
}

#[test]
fn a_region_as_a_task_gives_what_try_gives() {
    let mut y = vec![3u32; 10];
    let r = task_scope(|s| {
        let t = nowait_scale(s, 2, &mut y);
        let c = nowait_check(s, 1);
        t.wait().unwrap();
        c.wait().unwrap()
    });
    assert_eq!(r, 2);
    assert!(y.iter().all(|&v| v == 6));
}

#[test]
fn a_panicking_task_is_an_error_with_its_message() {
    let e: Error = task_scope(|s| s.spawn(|| panic!("boom in a task")).wait().unwrap_err());
    assert!(e.to_string().contains("boom in a task"), "{e}");
    let e = task_scope(|s| nowait_check(s, 5).wait().unwrap_err());
    assert!(e.to_string().contains("k is too large: 5"), "{e}");
}

#[test]
fn a_failure_nobody_took_makes_the_scope_panic() {
    let p = catch_unwind(AssertUnwindSafe(|| {
        task_scope(|s| {
            drop(nowait_check(s, 9));
            s.spawn(|| 1).wait().unwrap()
        })
    }))
    .expect_err("the failure is not silent");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("k is too large: 9") && msg.contains("nobody took"),
        "{msg}"
    );
    // A failure that was taken is not reported again.
    let n = task_scope(|s| {
        assert!(nowait_check(s, 9).wait().is_err());
        3
    });
    assert_eq!(n, 3);
}

#[test]
fn the_scope_waits_for_tasks_still_running_and_a_panic_in_it_comes_after_them() {
    let done = AtomicUsize::new(0);
    let p = catch_unwind(AssertUnwindSafe(|| {
        task_scope(|s| {
            for _ in 0..4 {
                drop(s.spawn(|| {
                    for _ in 0..50 {
                        std::thread::yield_now();
                    }
                    done.fetch_add(1, SeqCst);
                }));
            }
            panic!("the scope's own closure panics");
        })
    }))
    .expect_err("re-raised");
    assert_eq!(done.load(SeqCst), 4, "every task ended first");
    assert!(p
        .downcast_ref::<&str>()
        .is_some_and(|m| m.contains("own closure")));
}

#[test]
fn taskwait_waits_for_the_tasks_so_far_and_tasks_spawn_tasks() {
    let n = AtomicUsize::new(0);
    task_scope(|s| {
        for _ in 0..3 {
            drop(s.spawn(|| {
                drop(s.spawn(|| n.fetch_add(1, SeqCst)));
                n.fetch_add(1, SeqCst)
            }));
        }
        s.taskwait();
        assert!(n.load(SeqCst) >= 3, "the first three ended");
    });
    assert_eq!(n.load(SeqCst), 6);
}

/// A minimal executor's waker: counts wakes and unparks the polling thread.
struct Wakes {
    n: AtomicUsize,
    thread: Thread,
}

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.n.fetch_add(1, SeqCst);
        self.thread.unpark();
    }
}

#[test]
fn a_task_is_a_future_woken_when_it_ends() {
    let (tx, rx) = mpsc::channel::<u32>();
    let task = offload::spawn(move || rx.recv().unwrap() * 2);
    let wakes = Arc::new(Wakes {
        n: AtomicUsize::new(0),
        thread: std::thread::current(),
    });
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    let mut task = pin!(task);
    assert!(
        task.as_mut().poll(&mut cx).is_pending(),
        "it waits for the channel"
    );
    tx.send(21).unwrap();
    let mut polls = 1;
    let out = loop {
        while wakes.n.swap(0, SeqCst) == 0 {
            std::thread::park();
        }
        polls += 1;
        if let Poll::Ready(v) = task.as_mut().poll(&mut cx) {
            break v;
        }
    };
    assert_eq!(out.unwrap(), 42);
    assert_eq!(polls, 2, "polled once more, when woken");
}

#[test]
fn a_static_task_hands_owned_data_back() {
    let v: Vec<u64> = (0..100).collect();
    let t = offload::spawn(move || {
        let s = v.iter().sum::<u64>();
        (v, s)
    });
    let (v, s) = t.wait().unwrap();
    assert_eq!((v.len(), s), (100, 4950));
    let t = offload::spawn(|| 5);
    while !t.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(t.wait().unwrap(), 5);
}
