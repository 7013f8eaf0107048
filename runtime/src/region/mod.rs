//! Regions and data constructs: what `#[target]` and the data macros expand to. A region call selects a device, maps
//! its arguments (the map-list walk), launches its kernel and unmaps, or runs the host fallback; the data constructs
//! map and unmap on their own. The types that say what may cross into a region and the public `Error` live here too.

mod backend;
pub mod block;
pub mod call;
pub mod data;
pub mod error;
pub mod maplist;
pub mod mapped;
pub mod mapper;
mod on_llvm;
mod on_ours;
mod run;
pub mod scope;
pub mod source;
pub mod types;
pub mod update;

pub use data::{MapOwner, Mapped, ToView};
pub use error::Error;
pub use mapper::{Fixed, MutArg};
pub use scope::{data_scope, DataScope, ScopedMapped, ScopedSource};
pub use types::{DeviceCopy, DevicePtr, Firstprivate};
