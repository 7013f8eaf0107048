//! One task's outcome: its result, typed, for its handle ([`Cell`]), and its [`Status`], untyped and `'static`,
//! which its scope and its waiters watch. The scope holds only statuses, so no value of the task's result type, which
//! may borrow for `'scope`, is ever dropped by the scope or after it.

use crate::region::Error;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

/// Whether a task has ended, a failure of it nobody has taken yet, and who waits.
#[derive(Default)]
pub(crate) struct Status {
    state: Mutex<State>,
    ended: Condvar,
}

#[derive(Default)]
struct State {
    ended: bool,
    /// The message of the task's failure, until its handle takes the result.
    untaken_failure: Option<String>,
    /// The future that polled last, woken when the task ends.
    waker: Option<Waker>,
}

impl Status {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.state().ended
    }

    /// Blocks until the task has ended.
    pub(crate) fn wait(&self) {
        let mut s = self.state();
        while !s.ended {
            s = self.ended.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Whether the task has ended; if not, keeps `waker` to wake when it does.
    fn ended_or_wake(&self, waker: &Waker) -> bool {
        let mut s = self.state();
        if !s.ended {
            match &mut s.waker {
                Some(w) if w.will_wake(waker) => {}
                w => *w = Some(waker.clone()),
            }
        }
        s.ended
    }

    pub(crate) fn untaken_failure(&self) -> Option<String> {
        self.state().untaken_failure.clone()
    }
}

/// A task's result, until its handle takes it, and its status.
pub(crate) struct Cell<R> {
    result: Mutex<Option<Result<R, Error>>>,
    pub(crate) status: Arc<Status>,
}

impl<R> Cell<R> {
    pub(crate) fn new() -> Cell<R> {
        Cell {
            result: Mutex::new(None),
            status: Arc::default(),
        }
    }

    /// The task's end: stores its outcome, then wakes every waiting thread and the last future that polled.
    pub(crate) fn finish(&self, out: Result<R, Error>) {
        let failure = out.as_ref().err().map(Error::to_string);
        *self.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
        let waker = {
            let mut s = self.status.state();
            s.ended = true;
            s.untaken_failure = failure;
            self.status.ended.notify_all();
            s.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The outcome of an ended task (`None` if it was taken already); a failure is no longer untaken.
    fn take(&self) -> Option<Result<R, Error>> {
        let out = self
            .result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.status.state().untaken_failure = None;
        out
    }

    /// Blocks until the task has ended, then takes its outcome.
    pub(crate) fn wait_take(&self) -> Option<Result<R, Error>> {
        self.status.wait();
        self.take()
    }

    /// The outcome if the task has ended (`Some(None)`: taken already); else keeps `waker` to wake when it ends.
    pub(crate) fn poll_take(&self, waker: &Waker) -> Option<Option<Result<R, Error>>> {
        self.status.ended_or_wake(waker).then(|| self.take())
    }
}
