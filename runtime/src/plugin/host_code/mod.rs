//! What the plugins of host-compiled images share (host-elf, and gpu-sim, which runs the GPU lowering on the host):
//! loading a shared object from memory, calling a kernel with a run-time argument count, device memory on the
//! host's heap, and a host image's kernel run as teams of threads (which LLVM's host plugin uses too).

pub mod call;
pub mod image;
pub mod memory;
pub mod teams;
