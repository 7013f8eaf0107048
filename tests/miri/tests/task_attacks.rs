//! Attacks on the task machinery under Miri: safe code that tries to make a scope end early (panics in a result's
//! drop and in a waker, run after the task stored its result), to deadlock it (`taskwait` from inside a task, a
//! scope's end that skips queued tasks) or to lose a failure. Every test runs with one helper thread
//! (`OFFLOAD_TASK_THREADS=1`), so which task is still queued when is deterministic.

use offload::{target, task_scope, Mapper};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{mpsc, Arc, Once};
use std::task::{Context, Wake, Waker};

/// Whether the runtime has one helper thread. Under Miri, which does not run the registry's constructor, the
/// variable is set here, before anything reads the runtime's settings; natively that constructor reads them before
/// `main`, so [`natively_with_one_helper`] runs this binary again with the variable set, and the tests run there.
fn one_helper() -> bool {
    if cfg!(miri) {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| std::env::set_var("OFFLOAD_TASK_THREADS", "1"));
        true
    } else {
        std::env::var("OFFLOAD_TASK_THREADS").as_deref() == Ok("1")
    }
}

#[test]
#[cfg(not(miri))]
fn natively_with_one_helper() {
    if one_helper() {
        return; // the child
    }
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .env("OFFLOAD_TASK_THREADS", "1")
        .output()
        .expect("run the test binary");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("test result: ok."), "{stdout}\n{stderr}");
}

/// Lets the first task of [`with_the_helper_busy_reading`] go on when dropped, on every way out of the scope's
/// closure (a failed assertion in it included, which would otherwise leave the scope waiting for that task).
struct Go(mpsc::Sender<()>);

impl Drop for Go {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

fn message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// A minimal executor: polls `f` on this thread, parking until woken.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// A task's result whose drop panics.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("a result's drop panics");
    }
}

/// A waker whose wake panics.
struct PanicWake;

impl Wake for PanicWake {
    fn wake(self: Arc<Self>) {
        panic!("a waker panics");
    }
}

/// Runs `queued(s)` in a scope whose only helper thread is busy with a task that keeps reading `data` for a while
/// after the closure returned, so the scope's end runs what `queued` spawned on its own thread. The scope may not
/// end, nor unwind, while that first task still reads.
fn with_the_helper_busy_reading(
    queued: impl for<'s, 'e> FnOnce(&'s offload::TaskScope<'s, 'e>),
) -> String {
    assert!(one_helper(), "the callers run only with one helper");
    let r = catch_unwind(AssertUnwindSafe(|| {
        #[allow(clippy::useless_vec)] // on the heap: freed as this closure unwinds
        let data = vec![1u64; 4];
        let (tx, rx) = mpsc::channel();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let data = &data; // borrowed by the task, not moved into it
        task_scope(|s| {
            let _go = Go(go_tx.clone());
            drop(s.spawn(move || {
                tx.send(()).unwrap();
                // Held until `queued` has run, so the helper cannot take its task first, whatever the scheduler does.
                let _ = go_rx.recv();
                let mut sum = 0;
                for _ in 0..100 {
                    std::thread::yield_now();
                    sum += data.iter().sum::<u64>();
                }
                sum
            }));
            rx.recv().unwrap(); // the helper runs it: what comes next stays queued
            queued(s);
        });
    }));
    message(&*r.expect_err("the panic is reported when the scope ends"))
}

#[test]
fn a_result_whose_drop_panics_in_the_scopes_end_does_not_end_the_scope_early() {
    if !one_helper() {
        return;
    }
    let msg = with_the_helper_busy_reading(|s| drop(s.spawn(|| PanicOnDrop)));
    assert!(msg.contains("a result's drop panics"), "{msg}");
}

#[test]
fn a_waker_that_panics_in_the_scopes_end_does_not_end_the_scope_early() {
    if !one_helper() {
        return;
    }
    let msg = with_the_helper_busy_reading(|s| {
        let mut t = s.spawn(|| 1u32);
        let waker = Waker::from(Arc::new(PanicWake));
        assert!(Pin::new(&mut t)
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(t);
    });
    assert!(msg.contains("a waker panics"), "{msg}");
}

#[test]
fn a_result_whose_drop_panics_on_a_helper_neither_hangs_the_scope_nor_kills_the_helper() {
    if !one_helper() {
        return;
    }
    let (started_tx, started_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let p = catch_unwind(AssertUnwindSafe(|| {
        task_scope(|s| {
            drop(s.spawn(move || {
                started_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                PanicOnDrop
            }));
            started_rx.recv().unwrap(); // on the helper, its handle dropped: the helper drops the result
            go_tx.send(()).unwrap();
        })
    }))
    .expect_err("the panic is reported when the scope ends");
    assert!(
        message(&*p).contains("a result's drop panics"),
        "{}",
        message(&*p)
    );
    // The helper still takes tasks.
    let t = offload::spawn(|| 7);
    while !t.is_finished() {
        std::thread::yield_now();
    }
    assert_eq!(t.wait().unwrap(), 7);
}

#[test]
fn a_task_that_taskwaits_waits_for_its_children_not_for_itself() {
    if !one_helper() {
        return;
    }
    let n = AtomicUsize::new(0);
    let seen = task_scope(|s| {
        s.spawn(|| {
            drop(s.spawn(|| n.fetch_add(1, SeqCst)));
            s.taskwait();
            n.load(SeqCst)
        })
        .wait()
        .unwrap()
    });
    assert_eq!(seen, 1, "its child ended before its taskwait returned");
}

#[test]
fn a_task_on_the_only_helper_may_await_a_task_it_spawned() {
    if !one_helper() {
        return;
    }
    let (tx, rx) = mpsc::channel();
    let r = task_scope(|s| {
        let t = s.spawn(move || {
            tx.send(()).unwrap();
            block_on(s.spawn(|| 1)).unwrap() + 1 // queued: no helper is free to run it
        });
        rx.recv().unwrap(); // on the helper
        t.wait().unwrap()
    });
    assert_eq!(r, 2);
}

#[test]
fn sibling_tasks_that_both_taskwait_do_not_wait_for_each_other() {
    if !one_helper() {
        return;
    }
    let r = task_scope(|s| {
        let a = s.spawn(|| {
            s.taskwait();
            1
        });
        let b = s.spawn(|| {
            s.taskwait();
            2
        });
        a.wait().unwrap() + b.wait().unwrap()
    });
    assert_eq!(r, 3);
}

#[test]
fn a_task_of_an_inner_scope_may_taskwait_on_the_outer_scope() {
    if !one_helper() {
        return;
    }
    let r = task_scope(|outer| {
        outer
            .spawn(|| {
                task_scope(|inner| {
                    inner
                        .spawn(|| {
                            outer.taskwait(); // the outer task waits for this one: it may not wait for it
                            5
                        })
                        .wait()
                        .unwrap()
                })
            })
            .wait()
            .unwrap()
    });
    assert_eq!(r, 5);
}

#[test]
fn the_scopes_end_runs_every_queued_task_while_tasks_spawned_meanwhile_shorten_its_list() {
    if !one_helper() {
        return;
    }
    const QUEUED: usize = 40;
    let n = AtomicUsize::new(0);
    let (all_tx, all_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let count = |n: &AtomicUsize| {
        if n.fetch_add(1, SeqCst) + 1 == 2 * QUEUED {
            all_tx.send(()).unwrap();
        }
    };
    task_scope(|s| {
        // The helper's task waits for every other one: the scope's end must run them all itself.
        drop(s.spawn(move || {
            started_tx.send(()).unwrap();
            all_rx.recv().unwrap();
        }));
        started_rx.recv().unwrap();
        for _ in 0..QUEUED {
            drop(s.spawn(|| {
                drop(s.spawn(|| count(&n)));
                count(&n);
            }));
        }
    });
    assert_eq!(n.load(SeqCst), 2 * QUEUED);
}

#[test]
fn a_long_scopes_list_of_finished_tasks_stays_short() {
    if !one_helper() {
        return;
    }
    task_scope(|s| {
        for i in 0..300u32 {
            assert_eq!(s.spawn(move || i).wait().unwrap(), i);
        }
        let listed: usize = format!("{s:?}")
            .split(|c: char| !c.is_ascii_digit())
            .find(|w| !w.is_empty())
            .unwrap()
            .parse()
            .unwrap();
        assert!(listed <= 64, "{listed} tasks listed");
    });
}

#[test]
fn a_failure_in_a_task_spawned_after_the_closure_returned_is_reported() {
    if !one_helper() {
        return;
    }
    let p = catch_unwind(AssertUnwindSafe(|| {
        task_scope(|s| {
            drop(s.spawn(|| {
                for _ in 0..20 {
                    std::thread::yield_now();
                }
                drop(s.spawn(|| panic!("late child fails")));
            }));
        })
    }))
    .expect_err("reported");
    assert!(
        message(&*p).contains("late child fails"),
        "{}",
        message(&*p)
    );
}

#[test]
fn a_result_that_borrows_is_dropped_before_what_it_borrows() {
    if !one_helper() {
        return;
    }
    struct Touch<'a>(&'a [u64], &'a AtomicUsize);
    impl Drop for Touch<'_> {
        fn drop(&mut self) {
            self.1
                .fetch_add(self.0.iter().sum::<u64>() as usize, SeqCst);
        }
    }
    let dropped = AtomicUsize::new(0);
    {
        let data = vec![1u64; 3];
        task_scope(|s| {
            drop(s.spawn(|| Touch(&data, &dropped))); // dropped by the task itself
            let kept = s.spawn(|| Touch(&data, &dropped));
            while !kept.is_finished() {
                std::thread::yield_now();
            }
            drop(kept); // dropped here
            std::mem::forget(s.spawn(|| Touch(&data, &dropped))); // leaked, never dropped
        });
    }
    assert_eq!(dropped.load(SeqCst), 6);
}

#[derive(Mapper)]
pub struct Grid<'a> {
    u: &'a mut [u32],
    n: usize,
}

#[target]
fn bump_grid(g: &mut Grid<'_>) {
    for i in 0..g.n {
        g.u[i] += 1;
    }
}

#[target]
fn bump_grid_by_value(g: Grid<'_>) {
    for i in 0..g.n {
        g.u[i] += 1;
    }
}

#[test]
fn a_mapper_struct_built_outside_the_scope_goes_to_nowait_by_reference() {
    if !one_helper() {
        return;
    }
    let mut u = vec![0u32; 4];
    let mut g = Grid { u: &mut u, n: 4 };
    task_scope(|s| nowait_bump_grid(s, &mut g).wait().unwrap());
    task_scope(|s| {
        nowait_bump_grid_by_value(s, Grid { u: &mut *g.u, n: 4 })
            .wait()
            .unwrap()
    });
    assert_eq!(u, [2; 4]);
}

/// A generic region's element type.
trait Num:
    offload::DeviceCopy + Copy + PartialEq + core::fmt::Debug + core::ops::Add<Output = Self>
{
}
impl Num for u32 {}
impl Num for u64 {}

#[target(instantiate(u32, u64))]
fn add_to<T: Num>(y: &mut [T], k: T) {
    for v in y.iter_mut() {
        *v = *v + k;
    }
}

#[target]
fn copy_named<'a, 'b>(x: &'a [u32], y: &'b mut [u32]) {
    for (i, v) in y.iter_mut().enumerate() {
        *v = x[i];
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[offload::declare_target]
struct Counter {
    n: u32,
}

#[target]
impl Counter {
    #[target(map(tofrom: self))]
    fn bump(&mut self, by: u32) {
        self.n += by;
    }

    #[target(map(to: self))]
    fn get(&self) -> u32 {
        self.n
    }
}

#[test]
fn generic_named_lifetime_and_method_regions_go_to_nowait() {
    if !one_helper() {
        return;
    }
    let (mut a, mut b) = (vec![1u32; 4], vec![1u64; 4]);
    let x = vec![9u32; 4];
    let mut y = vec![0u32; 4];
    let mut c = Counter { n: 1 };
    task_scope(|s| {
        let ta = nowait_add_to::<u32>(s, &mut a, 2);
        let tb = nowait_add_to(s, &mut b, 3u64);
        let tc = nowait_copy_named(s, &x, &mut y);
        let td = c.nowait_bump(s, 4);
        ta.wait().unwrap();
        tb.wait().unwrap();
        tc.wait().unwrap();
        td.wait().unwrap();
    });
    let got = task_scope(|s| c.nowait_get(s).wait().unwrap());
    assert_eq!((a, b, y, got), (vec![3; 4], vec![4; 4], vec![9; 4], 5));
}
