//! The ways out of a data region the tests take: functions that leave one by `return`, `?` or `break`, a
//! destructor that runs one during an unwind, and a future that is pending once, to stop an `async` block between
//! its `.await`s.

use super::{first, inc};
use offload::target_data;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Leaves the block by `?`.
pub fn early(y: &mut Vec<i64>) -> Option<()> {
    target_data!(map(tofrom: y) => {
        inc(y);
        None?;
        Some(())
    })
}

/// Returns from the function inside the block when `early`, else gives the block's value.
pub fn ret(y: &mut Vec<i64>, early: bool) -> i64 {
    target_data!(map(tofrom: y) => {
        inc(y);
        if early {
            return -1;
        }
        first(y)
    })
}

/// `?` converting the error as everywhere (here into a `Box<dyn Error>`), in the block and in `assert_eq!`'s
/// arguments.
pub fn parse(y: &mut Vec<i64>, s: &str) -> Result<i64, Box<dyn std::error::Error>> {
    let n = target_data!(map(tofrom: y) => {
        inc(y);
        assert_eq!(s.parse::<i64>()? + 1, first(y) - 1);
        let n: i64 = s.parse()?;
        n + first(y)
    });
    Ok(n)
}

/// `break` and `?` out of two nested data regions: the third round breaks, finding `stop` in `x` returns `None`.
pub fn nested(y: &mut Vec<i64>, x: &[i64], stop: i64) -> Option<u32> {
    let mut k = 0;
    loop {
        target_data!(map(tofrom: y) => {
            target_data!(map(to: x) => {
                inc(y);
                k += 1;
                if k == 3 {
                    break;
                }
                x.iter().position(|&v| v == stop)?;
            });
        });
    }
    Some(k)
}

/// Runs a data region on its vector when dropped, and checks it copied back.
pub struct CopiesBackOnDrop(pub Vec<i64>);

impl Drop for CopiesBackOnDrop {
    fn drop(&mut self) {
        let y = &mut self.0;
        target_data!(map(tofrom: y) => { inc(y); });
        assert_eq!(
            y[0], 1,
            "a data region inside a destructor copies back even during an unwind"
        );
    }
}

/// Pending once.
pub struct Yield(pub bool);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// Polls once, with a waker that does nothing.
pub fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}
