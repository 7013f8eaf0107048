//! Tasks: host code, regions included, run asynchronously on helper threads (OpenMP's `target nowait`, `taskgroup`
//! and `taskwait`; libomp runs target tasks on its hidden helper threads the same way).
//!
//! - [`task_scope`] / [`TaskScope`]: tasks that may borrow, every one ended when the scope returns.
//! - [`TaskScope::spawn`], a region's `nowait_f(s, ..)` (written by `#[target]` beside `f` and `try_f`), and
//!   [`spawn`] for `'static` work: each returns a [`Task`], which [`Task::wait`] waits for and which is a `Future`.
//! - The helper threads (`pool`): at most `OFFLOAD_TASK_THREADS` (default 8), started as tasks arrive; a task that is
//!   still queued when someone waits for it runs on the waiting thread instead.
//!
//! # Why safe code cannot misuse a task
//!
//! A scoped task borrows for `'scope`, and `task_scope` does not return, or unwind, before every task spawned in it
//! has ended: it first runs, on its own thread, every task still queued, then waits until each running one has
//! counted itself out, which a task does after it has stored its result and dropped its last reference to anything
//! the closure borrowed. Forgetting a [`Task`] (`mem::forget`) leaks only its handle; the scope does not consult
//! handles. So no task can touch data after the scope ends, whatever the program does with handles (the argument of
//! `std::thread::scope`). Results the scope still holds are dropped inside `task_scope`, before the data they may
//! borrow. The borrow checker does the rest: a task holding `&mut y` excludes every other use of `y` until the scope
//! (or the task's handle, which borrows for `'scope`) ends.
//!
//! The one `unsafe` step is erasing the work's lifetime to queue it for a `'static` helper thread
//! ([`pool::Ticket::new`]); its contract is exactly the waiting above.

mod cell;
mod current;
mod handle;
mod pool;
mod scope;

pub use handle::Task;
pub use scope::{spawn, task_scope, TaskScope};
