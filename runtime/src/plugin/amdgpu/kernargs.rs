//! Kernel arguments: the calling convention `(dyn_ptr, a0, .., ak)`, 8 bytes each with no hidden arguments, in a
//! block of host memory the GPU reads (a kernarg pool's), reused from launch to launch and replaced by a larger one
//! when a kernel needs more.

use super::error::Error;
use super::memory::allocate;
use super::safe::PoolBlock;
use super::sys::{Agent, Hsa, MemoryPool};
use crate::plugin::KernelArgs;
use std::mem::MaybeUninit;

/// The kernel-argument block of a launch: the packed arguments' bytes (`dyn_ptr`, 0, first), at least the kernel's
/// kernarg segment (the rest zero). The bytes are copied, never read as numbers (a small by-value argument's padding
/// is uninitialised).
pub fn kernarg_bytes(args: &KernelArgs, segment_size: usize) -> Vec<MaybeUninit<u8>> {
    let packed = args.bytes();
    let mut block = vec![MaybeUninit::new(0u8); packed.len().max(segment_size)];
    block[..packed.len()].copy_from_slice(packed);
    block
}

/// The size of a new buffer for a `len`-byte block: a power of two of at least 256 bytes, so it is rarely replaced.
pub fn buffer_size(len: usize) -> usize {
    len.max(256).next_power_of_two()
}

/// A launch lane's kernel-argument buffer: allocated from the GPU's kernarg pool on the lane's first launch, reused
/// while it is large enough. Used by the lane's holder, so only one launch at a time writes it.
pub struct Kernargs {
    hsa: &'static Hsa,
    agent: Agent,
    pool: MemoryPool,
    /// The pool is a CPU agent's: the GPU needs access granted to each buffer.
    from_host: bool,
    buffer: Option<PoolBlock>,
}

impl Kernargs {
    /// No buffer yet: the first launch allocates one from `pool`, of the host (`from_host`) or of GPU `agent`.
    pub fn new(hsa: &'static Hsa, agent: Agent, pool: MemoryPool, from_host: bool) -> Kernargs {
        Kernargs {
            hsa,
            agent,
            pool,
            from_host,
            buffer: None,
        }
    }

    /// The kernel-argument buffer for a block of `len` bytes: the one the lane's launches before used while it is large
    /// enough, else a new one. The old one is then freed (its last dispatch completed: every launch waits for its
    /// dispatch while holding the lane that `self` is borrowed from); if no new one can be had, the old one stays.
    pub fn buffer(&mut self, len: usize) -> Result<&PoolBlock, Error> {
        let buffer = match self.buffer.take() {
            Some(b) if b.len() >= len => b,
            old => match self.new_buffer(len) {
                Ok(fresh) => fresh,
                Err(e) => {
                    self.buffer = old;
                    return Err(e);
                }
            },
        };
        Ok(self.buffer.insert(buffer))
    }

    fn new_buffer(&self, len: usize) -> Result<PoolBlock, Error> {
        let fresh = allocate(
            self.hsa,
            self.agent,
            self.pool,
            buffer_size(len),
            self.from_host,
        )?;
        // HSA requires a kernarg segment aligned to at least 16 bytes.
        if !fresh.as_ptr().cast::<u128>().is_aligned() {
            return Err(Error::MisalignedKernargs);
        }
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init(bytes: &[MaybeUninit<u8>]) -> Vec<u8> {
        // SAFETY: only called on blocks whose arguments are fully initialised.
        bytes.iter().map(|b| unsafe { b.assume_init() }).collect()
    }

    #[test]
    fn kernel_arguments_follow_dyn_ptr_8_bytes_each() {
        let args = [
            MaybeUninit::new(0x1122_3344_5566_7788),
            MaybeUninit::new(42),
        ];
        let block = kernarg_bytes(&KernelArgs::from(&args[..]), 0);
        let bytes = init(&block);
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[..8], &[0; 8], "dyn_ptr is null");
        assert_eq!(&bytes[8..16], &0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(&bytes[16..24], &42u64.to_le_bytes());
    }

    #[test]
    fn the_block_covers_the_kernels_kernarg_segment_with_zeros() {
        let block = kernarg_bytes(&KernelArgs::from(&[MaybeUninit::new(7)][..]), 64);
        let bytes = init(&block);
        assert_eq!(bytes.len(), 64);
        assert_eq!(&bytes[8..16], &7u64.to_le_bytes());
        assert!(bytes[16..].iter().all(|&b| b == 0));
        // A segment smaller than the arguments never truncates them.
        let two = [MaybeUninit::new(1), MaybeUninit::new(2)];
        assert_eq!(kernarg_bytes(&KernelArgs::from(&two[..]), 8).len(), 24);
        assert_eq!(kernarg_bytes(&KernelArgs::default(), 0).len(), 8);
    }

    /// Under Miri: an argument with uninitialised padding is copied, not read.
    #[test]
    fn arguments_with_uninitialised_bytes_are_copied_without_reading_them() {
        let mut partial = MaybeUninit::<u64>::uninit();
        // SAFETY: writes the low 4 bytes; the others stay uninitialised, like a small struct's padding.
        unsafe { partial.as_mut_ptr().cast::<u32>().write(0xdead_beef) };
        let block = kernarg_bytes(&KernelArgs::from(&[partial][..]), 0);
        assert_eq!(block.len(), 16);
        // SAFETY: bytes 8..12 came from the initialised half.
        let low: Vec<u8> = block[8..12]
            .iter()
            .map(|b| unsafe { b.assume_init() })
            .collect();
        assert_eq!(low, 0xdead_beefu32.to_le_bytes());
    }

    #[test]
    fn buffers_are_powers_of_two_of_at_least_256_bytes() {
        assert_eq!(buffer_size(0), 256);
        assert_eq!(buffer_size(40), 256);
        assert_eq!(buffer_size(256), 256);
        assert_eq!(buffer_size(257), 512);
        assert_eq!(buffer_size(328), 512);
    }
}
