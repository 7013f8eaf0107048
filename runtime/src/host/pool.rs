//! The host threads that run teams' threads (host-elf launches and the host fallback), kept parked between launches
//! as libomp keeps its pool: a 16-element work-shared region of two teams took about 100 us when each launch
//! started its threads, and about 1.2 us on parked ones (`cargo bench -p offload-examples --bench launch`).
//!
//! [`run`] hands `n - 1` indices to parked workers (starting new ones when none is idle, so every index runs at
//! once, as a team barrier needs) and runs index 0 on the calling thread. It returns only after every index has
//! finished, so the work may borrow from the caller.

use super::wait::spin_until;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Work for a worker; it calls its argument (which parks the worker again) once it no longer runs user code, before
/// it releases its caller.
type Task = Box<dyn FnOnce(Requeue) + Send + 'static>;
type Requeue = Box<dyn FnOnce()>;

/// A parked worker: it waits on its slot (spinning a while first, as `OMP_WAIT_POLICY` and the machine's load say:
/// [`super::wait`]), runs what lands there, and parks again.
struct Worker {
    slot: Mutex<Slot>,
    /// The slot is full: what a spinning worker watches.
    full: AtomicBool,
    wake: Condvar,
}

struct Slot {
    task: Option<Task>,
    /// The worker sleeps on `wake` (a spinning one needs no system call to wake it).
    asleep: bool,
}

/// Workers waiting for work.
static IDLE: Mutex<Vec<Arc<Worker>>> = Mutex::new(Vec::new());

/// Counts finished indices; the caller waits (spinning a while first) for all of them.
struct Latch {
    left: AtomicUsize,
    /// The caller sleeps on `done`.
    asleep: Mutex<bool>,
    done: Condvar,
}

impl Latch {
    fn count_down(&self) {
        if self.left.fetch_sub(1, AcqRel) == 1 {
            // Under the lock, so a waiter between its check and its sleep cannot miss this.
            let asleep = self.asleep.lock().unwrap_or_else(PoisonError::into_inner);
            if *asleep {
                self.done.notify_all();
            }
        }
    }

    fn wait(&self) {
        if spin_until(|| self.left.load(Acquire) == 0) {
            return;
        }
        let mut asleep = self.asleep.lock().unwrap_or_else(PoisonError::into_inner);
        while self.left.load(Acquire) > 0 {
            *asleep = true;
            asleep = self
                .done
                .wait(asleep)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *asleep = false;
    }
}

/// A host thread for a team could not be started (the process is at its thread limit, or out of memory). Nothing of
/// the [`run`] that needed it ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "cannot start a host thread for a team ({reason}); the process may be at its thread limit (`ulimit -u`) or out \
     of memory: ask for fewer threads (`thread_limit`, `num_teams`) or end other threads"
)]
pub struct SpawnError {
    reason: String,
}

/// Runs `f(0)`, .., `f(n - 1)` at the same time, each on its own thread (index 0 on this one). A panic in any index
/// is resumed here, after every index has finished. If a thread cannot be started, nothing runs.
pub fn run(n: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), SpawnError> {
    if n <= 1 {
        if n == 1 {
            f(0);
        }
        return Ok(());
    }
    let latch = Arc::new(Latch {
        left: AtomicUsize::new(n - 1),
        asleep: Mutex::new(false),
        done: Condvar::new(),
    });
    let panicked: Arc<Mutex<Option<Box<dyn std::any::Any + Send>>>> = Arc::new(Mutex::new(None));
    // Every worker first, so a thread that cannot start stops the launch before any index borrowed `f`.
    let workers = workers(n - 1)?;
    // A raw pointer, not a reference: a task is a closure its worker is still inside when it counts the latch down,
    // and a reference it captured would stay protected (as a by-value argument's field) while this caller, released,
    // frees what `f` borrows.
    // SAFETY: only the lifetime changes; see the use below.
    let f_raw = SendPtr(unsafe {
        std::mem::transmute::<
            *const (dyn Fn(usize) + Sync + '_),
            *const (dyn Fn(usize) + Sync + 'static),
        >(f)
    });
    for (index, worker) in (1..n).zip(workers) {
        let (latch, panicked) = (latch.clone(), panicked.clone());
        worker.give(Box::new(move |requeue: Requeue| {
            let f_raw = f_raw;
            // SAFETY: the task uses `f` only before it counts the latch down, and this function does not return (nor
            // unwind) before the latch reaches zero, so `f` outlives the use.
            let run = || unsafe { (*f_raw.0)(index) };
            if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)) {
                panicked
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(p);
            }
            // Idle before the caller is released, so its next launch finds this worker rather than starting one.
            requeue();
            latch.count_down();
        }));
    }
    let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(0)));
    latch.wait();
    if let Err(p) = mine {
        std::panic::resume_unwind(p);
    }
    let theirs = panicked
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(p) = theirs {
        std::panic::resume_unwind(p);
    }
    Ok(())
}

/// `f` for the workers: `Fn + Sync`, so calling it from other threads is what it is made for.
#[derive(Clone, Copy)]
struct SendPtr(*const (dyn Fn(usize) + Sync + 'static));
// SAFETY: the pointee is `Sync`; see `run` for its lifetime.
unsafe impl Send for SendPtr {}

#[cfg(test)]
thread_local! {
    /// How many more workers this thread may take before the next one cannot be started (`None`: no limit).
    static SPAWNS_LEFT: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Lets this thread take `n` more workers before the next one cannot be started (`None`: no limit), so tests reach
/// the path of a process at its thread limit.
#[cfg(test)]
pub(crate) fn refuse_spawns_after(n: Option<usize>) {
    SPAWNS_LEFT.set(n);
}

/// `n` workers, idle ones first; if one cannot be started, those taken go back to the idle list.
fn workers(n: usize) -> Result<Vec<Arc<Worker>>, SpawnError> {
    let mut taken = Vec::with_capacity(n);
    for _ in 0..n {
        match idle_or_new() {
            Ok(w) => taken.push(w),
            Err(e) => {
                IDLE.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(taken);
                return Err(e);
            }
        }
    }
    Ok(taken)
}

/// An idle worker, or a new one.
fn idle_or_new() -> Result<Arc<Worker>, SpawnError> {
    #[cfg(test)]
    if let Some(left) = SPAWNS_LEFT.get() {
        if left == 0 {
            return Err(SpawnError {
                reason: "a test refused it".into(),
            });
        }
        SPAWNS_LEFT.set(Some(left - 1));
    }
    let idle = IDLE.lock().unwrap_or_else(PoisonError::into_inner).pop();
    if let Some(w) = idle {
        return Ok(w);
    }
    let w = Arc::new(Worker {
        slot: Mutex::new(Slot {
            task: None,
            asleep: false,
        }),
        full: AtomicBool::new(false),
        wake: Condvar::new(),
    });
    let mine = w.clone();
    std::thread::Builder::new()
        .name("offload-team".into())
        .spawn(move || park(mine))
        .map_err(|e| SpawnError {
            reason: e.to_string(),
        })?;
    Ok(w)
}

impl Worker {
    fn give(&self, task: Task) {
        let mut slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.task = Some(task);
        self.full.store(true, Release);
        if slot.asleep {
            self.wake.notify_one();
        }
    }
}

/// A worker's life: run what lands in the slot, then wait in the idle list for more.
fn park(me: Arc<Worker>) {
    loop {
        spin_until(|| me.full.load(Acquire));
        let task = {
            let mut slot = me.slot.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(t) = slot.task.take() {
                    // Under the lock that `give` sets it under, so the flag always tells whether the slot is full.
                    me.full.store(false, Relaxed);
                    slot.asleep = false;
                    break t;
                }
                // Under the lock `give` fills the slot under: it sees this before it decides whether to wake.
                slot.asleep = true;
                slot = me.wake.wait(slot).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let again = me.clone();
        task(Box::new(move || {
            IDLE.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(again)
        }));
    }
}

#[cfg(test)]
// The pool's threads outlive a test by design, which Miri reports as a leak.
#[cfg(not(miri))]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_at_once_on_borrowed_data() {
        // A barrier for all n indices deadlocks unless each has its own thread at the same time.
        let n = 6;
        let barrier = std::sync::Barrier::new(n);
        let sum = AtomicUsize::new(0);
        for _ in 0..3 {
            run(n, &|i| {
                barrier.wait();
                sum.fetch_add(i, Relaxed);
            })
            .unwrap();
        }
        assert_eq!(sum.load(Relaxed), 3 * (0..n).sum::<usize>());
    }

    #[test]
    fn a_panic_reaches_the_caller_after_every_index_finished() {
        let finished = AtomicUsize::new(0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(4, &|i| {
                if i == 2 {
                    panic!("index two");
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
                finished.fetch_add(1, Relaxed);
            })
            .unwrap()
        }));
        let p = r.expect_err("the panic is resumed");
        assert_eq!(p.downcast_ref::<&str>(), Some(&"index two"));
        assert_eq!(finished.load(Relaxed), 3);
    }

    #[test]
    fn workers_are_reused() {
        // Threads named by the pool, counted through the ids they report.
        let ids = Mutex::new(std::collections::HashSet::new());
        for _ in 0..50 {
            run(3, &|_| {
                ids.lock().unwrap().insert(std::thread::current().id());
            })
            .unwrap();
        }
        // This thread, and a few workers (other tests run at the same time and take idle ones), not 100.
        assert!(
            ids.lock().unwrap().len() < 20,
            "{:?}",
            ids.lock().unwrap().len()
        );
    }

    #[test]
    fn a_thread_that_cannot_start_stops_the_launch_before_anything_runs() {
        let ran = AtomicUsize::new(0);
        SPAWNS_LEFT.set(Some(2));
        let r = run(5, &|_| {
            ran.fetch_add(1, Relaxed);
        });
        SPAWNS_LEFT.set(None);
        let e = r.expect_err("the third worker is refused");
        assert!(
            e.to_string()
                .contains("cannot start a host thread for a team"),
            "{e}"
        );
        assert_eq!(ran.load(Relaxed), 0);
        // The workers taken went back to the idle list: the next launch runs.
        run(3, &|_| {
            ran.fetch_add(1, Relaxed);
        })
        .unwrap();
        assert_eq!(ran.load(Relaxed), 3);
    }
}
