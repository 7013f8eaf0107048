//! [`Task`]: the handle of one task, to wait for, poll or await.

use super::cell::Cell;
use super::pool::Ticket;
use crate::region::Error;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A task spawned by [`TaskScope::spawn`](crate::TaskScope::spawn), a region's `nowait_f`, or [`spawn`](crate::spawn):
/// wait for its result with [`wait`](Task::wait), or `.await` it from any executor.
///
/// Dropping or forgetting the handle neither cancels nor detaches a scoped task: its scope still waits for it, and
/// a failure nobody took makes the scope panic at its end.
#[must_use = "a task's result says whether it failed: `wait` for it, or its scope reports the failure at its end"]
pub struct Task<'scope, R> {
    pub(crate) cell: Arc<Cell<R>>,
    pub(crate) ticket: Arc<Ticket>,
    pub(crate) scope: PhantomData<&'scope ()>,
}

impl<R> Task<'_, R> {
    /// Waits for the task and returns its result: what its closure returned, what `try_f` returns for a region's
    /// `nowait_f`, or [`Error::TaskPanicked`] with the panic's message. A task still queued runs on this thread, so
    /// waiting never waits for a helper thread to free up.
    pub fn wait(self) -> Result<R, Error> {
        self.ticket.claim();
        self.cell.wait_take().unwrap_or_else(|| {
            panic!("offload: the task's result was taken already, by polling it")
        })
    }

    /// Whether the task has ended (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.cell.status.is_ended()
    }
}

/// A task as a future: ready with the task's result when it ends. The runtime wakes the last waker that polled when
/// the task ends, so an executor polls it only when it may be ready. Polled from inside a task, a task still queued
/// runs there and then, as `wait` runs it: a task that blocks on an executor holds its thread, and if every helper
/// thread did so, a queued task would have no thread left to run it.
impl<R> Future for Task<'_, R> {
    type Output = Result<R, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if super::current::in_task() {
            self.ticket.claim();
        }
        match self.cell.poll_take(cx.waker()) {
            None => Poll::Pending,
            Some(Some(out)) => Poll::Ready(out),
            Some(None) => panic!("offload: a task polled again after it returned its result"),
        }
    }
}

impl<R> std::fmt::Debug for Task<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task")
            .field("finished", &self.is_finished())
            .finish()
    }
}
