//! The helper threads that run tasks (libomp's hidden helper threads): at most `OFFLOAD_TASK_THREADS` of them,
//! started as tasks arrive and then kept, taking tickets from one queue in the order they were spawned.
//!
//! A ticket's work runs once, on whichever thread takes it first: a helper, or a thread that waits for it (the
//! task's `wait`, `taskwait`, the end of its scope, a task polling it as a future), which runs it itself instead of
//! blocking while it is queued.
//! So a task that waits for a task never waits for a helper thread to free up: however few helpers there are,
//! waiting cannot deadlock.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// Work erased to `'static`: see [`Ticket::new`] for why that is sound.
type Work = Box<dyn FnOnce() + Send + 'static>;

/// One task's work, until a thread takes it.
pub(crate) struct Ticket {
    work: Mutex<Option<Work>>,
}

impl Ticket {
    /// A ticket for `work`.
    ///
    /// # Safety
    /// Whatever `work` borrows outlives every run of it and every drop of it: the caller either gives `'static`
    /// work, or keeps everything `work` borrows alive until [`Ticket::claim`] has returned `false` (the work ran to
    /// its end, or another thread ran it, which the caller then waits for).
    pub(crate) unsafe fn new<'a>(work: Box<dyn FnOnce() + Send + 'a>) -> Arc<Ticket> {
        // SAFETY: only the lifetime changes (same layout); the caller keeps what `work` borrows alive for as long as
        // the ticket can run or drop it, per the contract.
        let work: Work =
            unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + 'a>, Work>(work) };
        Arc::new(Ticket {
            work: Mutex::new(Some(work)),
        })
    }

    /// Runs the work here if no thread has taken it yet; whether it did.
    pub(crate) fn claim(&self) -> bool {
        let work = self
            .work
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        match work {
            Some(work) => {
                work();
                true
            }
            None => false,
        }
    }
}

struct Queue {
    tickets: VecDeque<Arc<Ticket>>,
    /// Helper threads started so far, and how many of them wait for a ticket.
    started: usize,
    idle: usize,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue {
    tickets: VecDeque::new(),
    started: 0,
    idle: 0,
});
static READY: Condvar = Condvar::new();

/// Queues `ticket` for a helper thread, starting one if none is idle and the limit allows. If no helper thread
/// exists and none can be started (the process is at its thread limit), the work runs here, now: a task is never
/// left with no thread to run it.
pub(crate) fn submit(ticket: Arc<Ticket>) {
    submit_to(ticket, crate::env::icv().task_threads);
}

/// [`submit`] with at most `limit` helper threads.
fn submit_to(ticket: Arc<Ticket>, limit: usize) {
    let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
    q.tickets.push_back(ticket.clone());
    let start = (q.idle < q.tickets.len() && q.started < limit).then(|| {
        q.started += 1;
        q.started - 1
    });
    let no_helpers = q.started == 0;
    if no_helpers {
        // Never queued: no helper would ever take it off the queue.
        q.tickets.pop_back();
    }
    drop(q);
    READY.notify_one();
    if let Some(k) = start {
        let spawned = std::thread::Builder::new()
            .name(format!("offload-task-{k}"))
            .spawn(helper);
        if spawned.is_err() {
            let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
            q.started -= 1;
            if q.started == 0 {
                // No helper exists: this ticket, and any other thread queued meanwhile counting on the helper
                // this one was to start, run here.
                let stranded = std::mem::take(&mut q.tickets);
                drop(q);
                for t in stranded {
                    t.claim();
                }
            }
        }
    } else if no_helpers {
        ticket.claim();
    }
}

/// A helper thread: takes tickets in order and runs the ones no waiter has taken.
fn helper() {
    loop {
        let ticket = {
            let mut q = QUEUE.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if let Some(t) = q.tickets.pop_front() {
                    break t;
                }
                q.idle += 1;
                q = READY.wait(q).unwrap_or_else(PoisonError::into_inner);
                q.idle -= 1;
            }
        };
        ticket.claim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    #[test]
    fn with_no_helper_threads_a_task_runs_when_submitted_and_stays_in_no_queue() {
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        // SAFETY: the work is 'static.
        let ticket = unsafe { Ticket::new(Box::new(move || r.store(true, SeqCst))) };
        submit_to(ticket.clone(), 0);
        assert!(ran.load(SeqCst), "it ran on the submitting thread");
        assert_eq!(
            Arc::strong_count(&ticket),
            1,
            "the queue keeps no copy of it"
        );
    }
}
