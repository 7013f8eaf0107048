//! The public API: OpenMP's device runtime routines, `DeviceBuffer`, the team queries and barrier as host code sees
//! them, and the float math. Thin: each call goes to the layer that does the work.

pub mod buffer;
pub mod math;
pub mod print;
pub mod routines;
pub mod team;
