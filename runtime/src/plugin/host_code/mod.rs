//! What the plugins of host-compiled images share (host-elf, and gpu-sim, which runs the GPU lowering on the host):
//! loading a shared object from memory, calling a kernel with a run-time argument count, and device memory on the
//! host's heap.

pub mod call;
pub mod image;
pub mod memory;
