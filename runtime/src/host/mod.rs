//! The host team executor: the thread pool, teams of host threads with their barriers, and what a host thread runs as
//! inside a region (team numbers, shares of a loop, a reduction's initial value). The host-elf plugin runs kernels on
//! it and the host fallback runs region bodies on it; it imports nothing of the device and region layers above.

pub mod barrier;
pub mod fallback;
pub mod geometry;
pub mod panic;
pub mod pool;
pub mod reduce;
pub mod share;
pub mod teams;
pub mod thread;
pub(crate) mod wait;

pub use barrier::TeamBarrier;
pub use fallback::{run_fallback, run_fallback_reduce};
pub use geometry::Launch;
pub use reduce::reduce_init;
pub use share::{share, share_chunks, share_dynamic, share_nest};
pub use teams::run_teams;
