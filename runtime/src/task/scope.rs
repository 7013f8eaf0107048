//! [`task_scope`] and [`TaskScope`]: tasks that may borrow, all finished when their scope ends; and [`spawn`] for
//! `'static` tasks.

use super::cell::{Cell, Status};
use super::current;
use super::handle::Task;
use super::pool::{self, Ticket};
use crate::region::Error;
use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Runs `f` with a scope for tasks (OpenMP's `taskgroup`) and returns what `f` returns once every task spawned in it
/// has ended, whatever became of its handle (waited for, dropped, forgotten).
///
/// Tasks borrow for `'scope`, so none can outlive the data it uses, and while a task holds `&mut y` the host cannot
/// touch `y`: both are compile errors. A task that failed (a panic, a region's error) and whose result nobody took
/// makes `task_scope` panic at its end with the task's message, and so does a panic after a task stored its
/// result (a waker's `wake`, the result's `Drop` run by the task); a panic in `f` itself is re-raised after the tasks
/// have ended.
///
/// ```
/// use offload::{target, task_scope};
///
/// #[target(teams_distribute_parallel_for)]
/// fn scale(k: f32, y: &mut [f32]) {
///     for i in 0..y.len() {
///         y[i] *= k;
///     }
/// }
///
/// let (mut a, mut b) = (vec![1.0f32; 1000], vec![1.0f32; 1000]);
/// let sum = task_scope(|s| {
///     let ta = nowait_scale(s, 2.0, &mut a); // the region `scale`, as a task
///     let tb = s.spawn(|| {
///         scale(3.0, &mut b); // any host code: regions, data constructs, ...
///         b.iter().sum::<f32>()
///     });
///     ta.wait().expect("scale on a");
///     tb.wait().expect("the task on b")
/// });
/// assert_eq!(sum, 3000.0);
/// assert!(a.iter().all(|&v| v == 2.0));
/// ```
pub fn task_scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope TaskScope<'scope, 'env>) -> T,
{
    let scope = TaskScope {
        running: Arc::new(Running::default()),
        tasks: Mutex::new(Vec::new()),
        scope: PhantomData,
        env: PhantomData,
    };
    let out = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    scope.wait_all();
    let mut failures: Vec<String> = scope
        .tasks()
        .iter()
        .filter_map(|t| t.status.untaken_failure())
        .collect();
    failures.append(
        &mut scope
            .running
            .late
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    match out {
        Err(p) => resume_unwind(p),
        Ok(_) if !failures.is_empty() => panic!(
            "offload: {} failure(s) in the tasks of a task_scope that nobody took: {}",
            failures.len(),
            failures.join("; ")
        ),
        Ok(v) => v,
    }
}

/// The scope [`task_scope`] hands its closure: [`spawn`](TaskScope::spawn) tasks into it, a region's `nowait_f(s, ..)`
/// too; [`taskwait`](TaskScope::taskwait) for those spawned so far.
pub struct TaskScope<'scope, 'env: 'scope> {
    running: Arc<Running>,
    tasks: Mutex<Vec<Spawned>>,
    // As `std::thread::Scope`: invariant in both, so the borrow checker cannot shrink or stretch them.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// A task of the scope: its work, to run if it is still queued, and its status, to wait for and check for a failure.
/// Both are `'static` types: the scope holds nothing that borrows. `parent`: the task that spawned it (0: code outside
/// tasks), whose `taskwait` waits for it.
struct Spawned {
    ticket: Arc<Ticket>,
    status: Arc<Status>,
    parent: u64,
}

/// How many of a scope's tasks have not ended; `'static`, so a task's last act (counting itself out) touches
/// nothing the scope's borrows could have freed. Also the panics of its tasks' wakers and results' drops, which
/// happen after a task stored its outcome, for the scope to report.
#[derive(Default)]
struct Running {
    n: Mutex<usize>,
    zero: Condvar,
    late: Mutex<Vec<String>>,
}

impl Running {
    fn add(&self) {
        *self.n.lock().unwrap_or_else(PoisonError::into_inner) += 1;
    }
    fn done(&self) {
        let mut n = self.n.lock().unwrap_or_else(PoisonError::into_inner);
        *n -= 1;
        if *n == 0 {
            self.zero.notify_all();
        }
    }
    fn wait_zero(&self) {
        let mut n = self.n.lock().unwrap_or_else(PoisonError::into_inner);
        while *n > 0 {
            n = self.zero.wait(n).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl<'scope, 'env> TaskScope<'scope, 'env> {
    /// Spawns `f` as a task: any host code (regions, data constructs, device memory calls), its steps in program
    /// order, run on a helper thread. [`Task::wait`] returns what `f` returned, or the panic's message as
    /// [`Error::TaskPanicked`].
    pub fn spawn<F, R>(&'scope self, f: F) -> Task<'scope, R>
    where
        F: FnOnce() -> R + Send + 'scope,
        R: Send + 'scope,
    {
        self.__spawn_try(move || Ok(f()))
    }

    /// Spawns `f` as a task whose result is `f`'s (a region's `nowait_f` spawns its `try_f`).
    #[doc(hidden)]
    pub fn __spawn_try<F, R>(&'scope self, f: F) -> Task<'scope, R>
    where
        F: FnOnce() -> Result<R, Error> + Send + 'scope,
        R: Send + 'scope,
    {
        let cell = Arc::new(Cell::new());
        let running = self.running.clone();
        running.add();
        let work = work(f, cell.clone(), Some(running));
        let parent = current::current();
        // SAFETY: the work borrows for 'scope; the scope outlives every run and drop of it: `task_scope` does not
        // return (nor unwind) before `wait_all` has claimed every ticket and seen every task count itself out,
        // which a task does after its last use of anything it borrows (`work`).
        let ticket = unsafe { Ticket::new(Box::new(work)) };
        self.tasks().push(Spawned {
            ticket: ticket.clone(),
            status: cell.status.clone(),
            parent,
        });
        self.forget_finished();
        pool::submit(ticket.clone());
        Task {
            cell,
            ticket,
            scope: PhantomData,
        }
    }

    /// Waits for the tasks spawned in the scope so far (OpenMP's `taskwait`): called from code outside tasks (the
    /// scope's closure), for every one; called from a task (or from a scope's closure that runs in a task), for the
    /// tasks that task spawned, its children, as OpenMP's `taskwait` does: never for itself, nor for a sibling or an
    /// enclosing task that may be waiting for it. Tasks still queued run on this thread. Their results stay with
    /// their handles.
    pub fn taskwait(&self) {
        let me = current::current();
        let so_far: Vec<(Arc<Ticket>, Arc<Status>)> = self
            .tasks()
            .iter()
            .filter(|t| me == 0 || t.parent == me)
            .map(|t| (t.ticket.clone(), t.status.clone()))
            .collect();
        for (ticket, _) in &so_far {
            ticket.claim();
        }
        for (_, status) in &so_far {
            status.wait();
        }
    }

    /// The end of the scope: runs every task still queued here (those spawned meanwhile too), then waits for the
    /// rest.
    fn wait_all(&self) {
        // Passes over the list until one runs nothing: a task run here may spawn more, and a spawn may shorten the
        // list (`forget_finished`), so walking it by index would skip queued tasks.
        loop {
            let listed: Vec<Arc<Ticket>> = self.tasks().iter().map(|t| t.ticket.clone()).collect();
            let mut ran = false;
            for ticket in &listed {
                ran |= ticket.claim();
            }
            if !ran {
                break;
            }
        }
        self.running.wait_zero();
    }

    fn tasks(&self) -> std::sync::MutexGuard<'_, Vec<Spawned>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps a long scope's list short: drops the tasks that ended without a failure (their handles keep their
    /// results), each time the list doubles.
    fn forget_finished(&self) {
        let mut tasks = self.tasks();
        if tasks.len() >= 64 && tasks.len().is_power_of_two() {
            tasks.retain(|t| !t.status.is_ended() || t.status.untaken_failure().is_some());
        }
    }
}

impl std::fmt::Debug for TaskScope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskScope")
            .field("tasks", &self.tasks().len())
            .finish()
    }
}

/// Spawns a `'static` task: owned data moved in and handed back through its result. Nothing waits for it unless its
/// handle does; a failure nobody takes is lost with the handle, as a detached thread's panic is.
///
/// ```
/// let t = offload::spawn(|| (0..10u64).sum::<u64>());
/// assert_eq!(t.wait().unwrap(), 45);
/// ```
pub fn spawn<F, R>(f: F) -> Task<'static, R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let cell = Arc::new(Cell::new());
    let work = work(move || Ok(f()), cell.clone(), None);
    // SAFETY: the work is 'static.
    let ticket = unsafe { Ticket::new(Box::new(work)) };
    pool::submit(ticket.clone());
    Task {
        cell,
        ticket,
        scope: PhantomData,
    }
}

/// A task's work: runs `f` (a panic becomes its error) with the spawning thread's default device (OpenMP's tasks
/// inherit their generating task's default-device-var), stores the outcome in `cell`, and then, its last act, counts
/// itself out of its scope's `running`.
fn work<F, R>(f: F, cell: Arc<Cell<R>>, running: Option<Arc<Running>>) -> impl FnOnce() + Send
where
    F: FnOnce() -> Result<R, Error> + Send,
    R: Send,
{
    let device = crate::env::default_device();
    let id = current::new_task();
    move || {
        // The thread may be a waiter running the task itself: its own default device and task come back afterwards.
        let own = crate::env::default_device();
        crate::env::set_default_device(device);
        let outer = current::enter(id);
        let out = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
            Err(Error::TaskPanicked {
                message: panic_message(p),
            })
        });
        current::enter(outer);
        crate::env::set_default_device(own);
        // Nothing may unwind past here before the task counts itself out: a waker's `wake` (in `finish`) or the
        // result's `Drop` that panics would otherwise leave the scope waiting forever (on a helper thread, which
        // the panic would also end) or unwind it early, out of the scope's end that runs this task (`wait_all`),
        // while other tasks still use what it borrows. Such a panic becomes a failure the scope reports.
        let mut late = Vec::new();
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| cell.finish(out))) {
            late.push(format!(
                "a waker of the task panicked: {}",
                panic_message(p)
            ));
        }
        // Before counting out: once counted out, the scope may end and free what this task's result borrows.
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(cell))) {
            late.push(format!(
                "the task's result panicked when dropped: {}",
                panic_message(p)
            ));
        }
        if let Some(r) = running {
            r.late
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(late);
            r.done();
        }
    }
}

/// A panic payload's message; the payload is dropped here (a payload whose drop panics is ignored, not unwound).
fn panic_message(p: Box<dyn Any + Send>) -> String {
    let message = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into());
    let _ = catch_unwind(AssertUnwindSafe(move || drop(p)));
    message
}
