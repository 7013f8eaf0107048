//! Host memory a GPU's loaded images point a global at (the panic record, the print buffer): what a protocol's block
//! is ([`Protocol`]), how a plugin gets at the block it allocated for it ([`HostBlock`]), and why an image's global
//! may not point at one ([`FirstReason`]). The host reads the block without the device, so a kernel that left its
//! context or queue unusable leaves it readable.

use std::ptr::NonNull;
use std::sync::Mutex;

/// A GPU protocol's block in host memory: the global each image has for it, its size, and how fresh memory is set
/// up for it.
#[derive(Clone, Copy, Debug)]
pub struct Protocol {
    /// The image's global that points at the block (`offload_model::gpu_panic::SYMBOL`,
    /// `offload_model::device_print::SYMBOL`).
    pub symbol: &'static str,
    /// The block's size in bytes.
    pub bytes: usize,
    /// The alignment its header needs (page-aligned memory has it).
    pub align: usize,
    /// Sets up a fresh block, as [`Protocol::init`] says.
    pub(super) init: unsafe fn(NonNull<u8>),
}

impl Protocol {
    /// Sets up a fresh block before anyone else knows of it.
    ///
    /// # Safety
    /// `p` is [`Protocol::bytes`] of zeroed memory aligned to [`Protocol::align`], that no one else knows of yet.
    pub unsafe fn init(&self, p: NonNull<u8>) {
        // SAFETY: per the contract, which is each protocol's `init`'s.
        unsafe { (self.init)(p) }
    }
}

/// How a plugin gets at the host memory it allocated for a protocol's block: CUDA's mapped pinned slot, AMD's
/// fine-grained host block (allocated when the first image that has the global is loaded), gpu-sim's plain memory.
/// The protocols' host sides read and reset the block through this alone.
pub trait HostBlock {
    /// The block's host address, once there is a block: [`Protocol::bytes`] set up by [`Protocol::init`], which
    /// stays at that address as long as `self` does.
    fn host_address(&self) -> Option<NonNull<u8>>;
}

/// A block, or none (it could not be set up).
impl<B: HostBlock> HostBlock for Option<B> {
    fn host_address(&self) -> Option<NonNull<u8>> {
        self.as_ref()?.host_address()
    }
}

/// The first reason noted of why a protocol may not work on a device (its block, or an image's pointer to it, could
/// not be set up), kept to be said with what it explains.
pub struct FirstReason(Mutex<Option<String>>);

impl FirstReason {
    pub fn new(reason: Option<String>) -> FirstReason {
        FirstReason(Mutex::new(reason))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // Each update is one assignment: a panic elsewhere cannot have left it half-changed.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes `why`, unless a reason was noted before.
    pub fn note(&self, why: String) {
        self.lock().get_or_insert(why);
    }

    /// The first reason noted, if any.
    pub fn get(&self) -> Option<String> {
        self.lock().clone()
    }
}

/// A block in plain host memory, zeroed and set up for its protocol: gpu-sim's (its device memory is the host's).
/// Never freed (but by tests): images keep its address for the life of the process, as devices live.
pub struct PlainBlock(NonNull<u8>);

impl PlainBlock {
    pub fn new(protocol: &Protocol) -> PlainBlock {
        let layout = Self::layout(protocol);
        // SAFETY: the layout has a non-zero size.
        let block = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        // SAFETY: fresh zeroed memory of the protocol's size and alignment, which no one else knows of yet.
        unsafe { protocol.init(block) };
        PlainBlock(block)
    }

    fn layout(protocol: &Protocol) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(protocol.bytes, protocol.align)
            .expect("a protocol's block has a size and alignment")
    }

    /// Frees the block.
    ///
    /// # Safety
    /// The block came from [`PlainBlock::new`] of `protocol`; nothing uses it any more (no image points at it), and
    /// it is not used again.
    #[cfg(test)]
    pub unsafe fn free(&self, protocol: &Protocol) {
        // SAFETY: per the contract, allocated by `new` with this layout, and unused.
        unsafe { std::alloc::dealloc(self.0.as_ptr(), Self::layout(protocol)) }
    }
}

impl HostBlock for PlainBlock {
    fn host_address(&self) -> Option<NonNull<u8>> {
        Some(self.0)
    }
}
