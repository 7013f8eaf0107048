//! Which task this thread runs: a number per task, so `taskwait` inside a task waits for that task's children and a
//! poll from inside a task may run the task it awaits.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The next task's number (0 is no task).
static NEXT_TASK: AtomicU64 = AtomicU64::new(1);

/// A number for a new task.
pub(crate) fn new_task() -> u64 {
    NEXT_TASK.fetch_add(1, Relaxed)
}

/// The task this thread runs (the innermost, when a waiting task runs another), 0 outside tasks. The observer keeps
/// it, so that launch lines can say which task they ran in.
pub(crate) fn current() -> u64 {
    crate::observe::current_task()
}

/// Whether this thread runs a task now.
pub(crate) fn in_task() -> bool {
    current() != 0
}

/// Makes `task` this thread's; returns the one it replaces, for the caller to put back.
pub(crate) fn enter(task: u64) -> u64 {
    crate::observe::running_task(task)
}
