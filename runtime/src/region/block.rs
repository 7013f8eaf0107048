//! What a `target_data!` block runs in: a closure, called at once inside the data environment's guards. A closure
//! cannot be suspended, so an `.await` in the block is rustc's own error (E0728), whatever macro wrote it, and no
//! future can stop the block between the entry and the exit. The control flow that leaves the block (`return`, `?`,
//! `break` and `continue` to a loop or labeled block outside it) is carried across the closure as a [`Flow`] value,
//! which the expansion turns back into the same `return`, `break` or `continue` once the closure has returned (the
//! guards then exit as they would have).

use std::convert::Infallible;
use std::ops::ControlFlow;

/// Runs a `target_data!` block. Called with the closure written in place, whose kind this makes `FnOnce`: the block
/// may move what it captures, and return references into what it borrows, as the block itself could.
#[inline(always)]
pub fn run_block<V>(block: impl FnOnce() -> V) -> V {
    block()
}

/// How a `target_data!` block's closure ended: with the block's value, or at a `return` or `?` (`Return`, the
/// enclosing function's value), or at a `break`/`continue` to a target outside the block (`ExitK`, one variant per
/// target, holding a `break`'s value). The expansion names the variants a block uses and makes the others
/// `Infallible`.
pub enum Flow<V, R, X0, X1, X2, X3, X4, X5, X6, X7> {
    /// The block's value.
    Value(V),
    /// `return r` (or a `?`'s residual, converted) from the enclosing function or closure.
    Return(R),
    /// The first `break`/`continue` target outside the block.
    Exit0(X0),
    /// The second.
    Exit1(X1),
    /// The third.
    Exit2(X2),
    /// The fourth.
    Exit3(X3),
    /// The fifth.
    Exit4(X4),
    /// The sixth.
    Exit5(X5),
    /// The seventh.
    Exit6(X6),
    /// The eighth.
    Exit7(X7),
}

/// `expr?` in a `target_data!` block, as `?` is on stable Rust (`Try::branch`): the value to go on with, or the
/// residual the enclosing function returns ([`FromBlockResidual`]).
#[diagnostic::on_unimplemented(
    message = "the `?` operator in a `target_data!` block takes a `Result`, an `Option` or a `ControlFlow`, not `{Self}`",
    label = "not a `Result`, `Option` or `ControlFlow`",
    note = "the block runs in a closure, across which offload carries `?` itself; for other types, match on the value \
            and `return` what the function should"
)]
pub trait BlockTry {
    /// What `expr?` evaluates to.
    type Output;
    /// What the enclosing function returns, converted by [`FromBlockResidual`].
    type Residual;
    /// Goes on with the value, or returns the residual.
    fn branch(self) -> Result<Self::Output, Self::Residual>;
}

impl<T, E> BlockTry for Result<T, E> {
    type Output = T;
    type Residual = Result<Infallible, E>;
    #[inline(always)]
    fn branch(self) -> Result<T, Result<Infallible, E>> {
        match self {
            Ok(v) => Ok(v),
            Err(e) => Err(Err(e)),
        }
    }
}

impl<T> BlockTry for Option<T> {
    type Output = T;
    type Residual = Option<Infallible>;
    #[inline(always)]
    fn branch(self) -> Result<T, Option<Infallible>> {
        match self {
            Some(v) => Ok(v),
            None => Err(None),
        }
    }
}

impl<B, C> BlockTry for ControlFlow<B, C> {
    type Output = C;
    type Residual = ControlFlow<B, Infallible>;
    #[inline(always)]
    fn branch(self) -> Result<C, ControlFlow<B, Infallible>> {
        match self {
            ControlFlow::Continue(c) => Ok(c),
            ControlFlow::Break(b) => Err(ControlFlow::Break(b)),
        }
    }
}

/// The enclosing function's value for a `?` in a `target_data!` block that did not go on: `Err(From::from(e))`,
/// `None` or `ControlFlow::Break(b)`, as `?` converts them.
#[diagnostic::on_unimplemented(
    message = "the `?` operator in a `target_data!` block returns from the enclosing function, whose return type \
               `{Self}` cannot take it",
    label = "a `?` in this block would return `{Self}` from the function",
    note = "as everywhere else, `?` on a `Result` needs a function returning `Result<_, F>` with `F: From<E>`, and on \
            an `Option` one returning `Option<_>`"
)]
pub trait FromBlockResidual<R> {
    /// The returned value.
    fn from_residual(residual: R) -> Self;
}

impl<T, E, F: From<E>> FromBlockResidual<Result<Infallible, E>> for Result<T, F> {
    #[inline(always)]
    fn from_residual(residual: Result<Infallible, E>) -> Self {
        match residual {
            Err(e) => Err(From::from(e)),
            Ok(never) => match never {},
        }
    }
}

impl<T> FromBlockResidual<Option<Infallible>> for Option<T> {
    #[inline(always)]
    fn from_residual(_: Option<Infallible>) -> Self {
        None
    }
}

impl<B, C> FromBlockResidual<ControlFlow<B, Infallible>> for ControlFlow<B, C> {
    #[inline(always)]
    fn from_residual(residual: ControlFlow<B, Infallible>) -> Self {
        match residual {
            ControlFlow::Break(b) => ControlFlow::Break(b),
            ControlFlow::Continue(never) => match never {},
        }
    }
}
