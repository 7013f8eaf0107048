//! A reduction variable's initial value in the host fallback: the expansion rewrites `let mut s = init;` to
//! `__reduce_init`, which records `init` (combined once, at the end) and starts the thread's private copy at the
//! operator's identity.

use offload_model::reduce::ReduceOp;
use std::any::Any;
use std::cell::RefCell;

thread_local! {
    /// The initial value of this thread's reduction variable, recorded by [`reduce_init`].
    static REDUCE_INIT: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

/// What a reduction variable's initial value is rewritten to.
#[doc(hidden)]
pub fn reduce_init<Op: ReduceOp<T>, T: 'static>(init: T) -> T {
    REDUCE_INIT.with(|r| *r.borrow_mut() = Some(Box::new(init)));
    Op::identity()
}

/// Runs `body` and returns its value with the initial value it recorded, if any. No initial value recorded before
/// counts for it (pool threads outlive a region), and one the caller's own thread recorded for an enclosing reduction
/// survives it.
pub(crate) fn recording<T: 'static, R>(body: impl FnOnce() -> R) -> (R, Option<T>) {
    let outer = REDUCE_INIT.with(|r| r.borrow_mut().take());
    let value = body();
    let init = REDUCE_INIT
        .with(|r| std::mem::replace(&mut *r.borrow_mut(), outer))
        .and_then(|b| b.downcast::<T>().ok());
    (value, init.map(|b| *b))
}
