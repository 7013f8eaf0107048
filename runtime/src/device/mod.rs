//! Devices: the device table (every plugin's devices, numbered; where a construct runs), the one wrapper through
//! which every plugin call is made and observed, and each device's present table. Above this layer nobody holds a
//! plugin device.

pub mod backend;
pub mod directory;
pub mod entry;
#[cfg(test)]
pub mod fake;
pub mod llvm;
pub mod observed;
pub mod present;
pub mod table;

pub use backend::{backend, initial_device, is_initial, select, Selection, Target};
pub use entry::{DeviceEntry, LoadedKernel};
pub use present::{MapError, Range, RefKind};
pub use table::{default_device, devices, inventory, Host, PluginReport, OMP_INITIAL_DEVICE};
