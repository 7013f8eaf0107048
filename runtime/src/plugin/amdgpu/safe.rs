//! The safe layer (cudarc's `safe`): each HSA object the plugin makes is owned by a value that destroys it when
//! dropped (signals, queues, memory pool blocks, code object readers, executables), so an error path only has to
//! return. Ownership is what makes the `unsafe` functions of [`super::result`] safe to call here: an owned handle
//! is live until its owner drops it.
//!
//! Every type holds the runtime's `&'static Hsa`: the runtime is loaded once and never unloaded.

use super::result::{self, Result};
// Agents and memory pools live as long as the runtime (the process): their `result` functions are safe already.
pub use super::result::{agent, info, init, system_get_info, HsaError, Info};
use super::sys::*;
use std::ffi::{c_void, CStr};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Registers `callback` for the runtime's system events, for the rest of the process.
pub fn register_system_event_handler(hsa: &Hsa, callback: SystemEventCallback) -> Result<()> {
    // SAFETY: no data; the callback is a plain function, so it lives (and may run on any thread) for the whole
    // process.
    unsafe { result::register_system_event_handler(hsa, callback, std::ptr::null_mut()) }
}

/// A signal, destroyed on drop.
#[derive(Debug)]
pub struct OwnedSignal {
    hsa: &'static Hsa,
    signal: Signal,
}

impl OwnedSignal {
    pub fn new(hsa: &'static Hsa, initial_value: SignalValue) -> Result<OwnedSignal> {
        Ok(OwnedSignal {
            hsa,
            signal: result::signal::create(hsa, initial_value)?,
        })
    }

    /// The handle, for a packet or a copy that signals it. Valid while `self` lives.
    pub fn handle(&self) -> Signal {
        self.signal
    }

    pub fn store_relaxed(&self, value: SignalValue) {
        // SAFETY: the signal is live while `self` is.
        unsafe { result::signal::store_relaxed(self.hsa, self.signal, value) }
    }

    /// Waits (about `ticks` timestamp ticks at most) for the value to drop below `below`; returns the value seen.
    pub fn wait_below(&self, below: SignalValue, ticks: u64, state: u32) -> SignalValue {
        // SAFETY: the signal is live while `self` is.
        unsafe {
            result::signal::wait_scacquire(
                self.hsa,
                self.signal,
                HSA_SIGNAL_CONDITION_LT,
                below,
                ticks,
                state,
            )
        }
    }
}

impl Drop for OwnedSignal {
    fn drop(&mut self) {
        // SAFETY: owned, so live; whatever used it (a dispatch or copy) was waited for by its user, which borrowed
        // it. A failure leaves nothing to do.
        let _ = unsafe { result::signal::destroy(self.hsa, self.signal) };
    }
}

/// A block of a memory pool, freed on drop.
#[derive(Debug)]
pub struct PoolBlock {
    hsa: &'static Hsa,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the block is plain memory the runtime handed out, usable and freeable from any thread; who may touch its
// bytes is governed by `&mut` and the `unsafe` methods' contracts, not by the thread.
unsafe impl Send for PoolBlock {}

impl PoolBlock {
    pub fn allocate(hsa: &'static Hsa, pool: MemoryPool, len: usize) -> Result<PoolBlock> {
        Ok(PoolBlock {
            hsa,
            ptr: result::memory::pool_allocate(hsa, pool, len)?,
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Lets `agent` use the block (a block of another agent's pool).
    pub fn allow_access(&self, agent: Agent) -> Result<()> {
        // SAFETY: the block is live while `self` is.
        unsafe { result::memory::agents_allow_access(self.hsa, &[agent], self.as_ptr()) }
    }

    /// Fills the block's first `words` 32-bit words with `value`, synchronously.
    pub fn fill(&mut self, value: u32, words: usize) -> Result<()> {
        assert!(
            words.checked_mul(4).is_some_and(|n| n <= self.len),
            "the fill stays in the block"
        );
        // SAFETY: in bounds (checked), pool blocks are page-aligned, and `&mut self` means nothing else uses it.
        unsafe { result::memory::fill(self.hsa, self.as_ptr(), value, words) }
    }

    /// Copies `bytes` to the start of the block (a `MaybeUninit` source: its bytes are copied, never read).
    ///
    /// # Safety
    /// No dispatch or copy that uses the block is in flight.
    pub unsafe fn write(&self, bytes: &[MaybeUninit<u8>]) {
        assert!(bytes.len() <= self.len, "the bytes fit the block");
        // SAFETY: in bounds (checked); nothing else uses the block, per the contract.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<u8>(), self.as_ptr(), bytes.len())
        }
    }

    /// Gives the block up without freeing it: device memory the runtime frees with [`free_raw`].
    pub fn into_raw(self) -> *mut u8 {
        let p = self.as_ptr();
        std::mem::forget(self);
        p
    }
}

/// Frees a block given up by [`PoolBlock::into_raw`]. A failure (a lost device) leaves nothing to do.
///
/// # Safety
/// `ptr` came from [`PoolBlock::into_raw`] and is not used afterwards.
pub unsafe fn free_raw(hsa: &Hsa, ptr: *mut u8) {
    // SAFETY: per the contract.
    let _ = unsafe { result::memory::pool_free(hsa, ptr) };
}

impl Drop for PoolBlock {
    fn drop(&mut self) {
        // SAFETY: owned, so live and not freed; whatever used it was waited for by its user. A failure leaves
        // nothing to do.
        let _ = unsafe { result::memory::pool_free(self.hsa, self.as_ptr()) };
    }
}

/// Starts a copy of `size` bytes from `src` to `dst` by `agent`'s copy engine; `completion` drops by one when it is
/// done (below zero if it failed).
///
/// # Safety
/// `dst..dst+size` and `src..src+size` are memory `agent` can reach, and stay valid (and untouched by anyone else)
/// until the caller has waited for `completion`.
pub unsafe fn async_copy(
    hsa: &Hsa,
    agent: Agent,
    dst: *mut u8,
    src: *const u8,
    size: usize,
    completion: &OwnedSignal,
) -> Result<()> {
    // SAFETY: per the contract; the signal is live while borrowed.
    unsafe { result::memory::async_copy(hsa, dst, agent, src, agent, size, completion.signal) }
}

/// An AQL queue, destroyed on drop, with the first asynchronous error the runtime reported for it.
#[derive(Debug)]
pub struct OwnedQueue {
    hsa: &'static Hsa,
    queue: NonNull<Queue>,
    /// The first error status the queue's callback reported (0: none): a `Box` the queue owns, held as a raw pointer
    /// because the runtime holds one too (the callback's data). Freed after `hsa_queue_destroy`, which ROCr
    /// sequences with the queue's error handlers: no callback runs once it has returned.
    error: NonNull<AtomicU32>,
}

// SAFETY: HSA queues may be used from any thread: the index and doorbell operations are atomic, and the ring is
// written only through `unsafe` methods whose callers serialise.
unsafe impl Send for OwnedQueue {}
// SAFETY: as above.
unsafe impl Sync for OwnedQueue {}

/// Where a queue's packets go: `size` 64-byte packets from `base`, and the doorbell.
#[derive(Clone, Copy, Debug)]
pub struct Ring {
    pub base: *mut KernelDispatchPacket,
    /// A power of two (the runtime's promise), checked non-zero.
    pub size: u64,
    pub doorbell: Signal,
}

impl OwnedQueue {
    /// A queue of `size` packets (a power of two) on `agent`.
    pub fn new(hsa: &'static Hsa, agent: Agent, size: u32) -> Result<OwnedQueue> {
        let error = NonNull::from(Box::leak(Box::new(AtomicU32::new(HSA_STATUS_SUCCESS))));
        // SAFETY: the callback only stores into `error`, an atomic that lives until the queue is destroyed (freed
        // below if there is no queue, else by `drop` after destroying it).
        let queue = unsafe {
            result::queue::create(hsa, agent, size, on_queue_error, error.as_ptr().cast())
        };
        match queue {
            Ok(queue) => Ok(OwnedQueue { hsa, queue, error }),
            Err(e) => {
                // SAFETY: from `Box::leak` above; no queue holds it.
                drop(unsafe { Box::from_raw(error.as_ptr()) });
                Err(e)
            }
        }
    }

    /// The first error the queue reported; the queue is unusable after one.
    pub fn error(&self) -> Option<Status> {
        // SAFETY: the slot lives as long as `self`.
        match unsafe { self.error.as_ref() }.load(Ordering::Acquire) {
            HSA_STATUS_SUCCESS => None,
            s => Some(s),
        }
    }

    /// The ring, or `None` if the runtime's queue struct has none.
    pub fn ring(&self) -> Option<Ring> {
        // SAFETY: the runtime's queue struct is readable while the queue lives; these fields never change.
        let (base, size, doorbell) = unsafe {
            let q = self.queue.as_ptr();
            (
                (*q).base_address,
                u64::from((*q).size),
                (*q).doorbell_signal,
            )
        };
        (!base.is_null() && size != 0).then(|| Ring {
            base: base.cast(),
            size,
            doorbell,
        })
    }

    /// Reserves the next packet slot; returns its index.
    pub fn reserve(&self) -> u64 {
        // SAFETY: the queue is live while `self` is.
        unsafe { result::queue::add_write_index_relaxed(self.hsa, self.queue, 1) }
    }

    /// The index of the next packet the packet processor will take.
    pub fn read_index(&self) -> u64 {
        // SAFETY: the queue is live while `self` is.
        unsafe { result::queue::load_read_index_scacquire(self.hsa, self.queue) }
    }

    /// Tells the packet processor that packet `index` is ready.
    ///
    /// # Safety
    /// The packet at `index` is published, and what it refers to stays valid until it completes.
    pub unsafe fn ring_doorbell(&self, ring: Ring, index: u64) {
        // SAFETY: the doorbell lives as long as the queue; the packet is ready per the contract.
        unsafe { result::signal::store_screlease(self.hsa, ring.doorbell, index as SignalValue) }
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        // SAFETY: owned, so live; every dispatch on it was waited for by its launch. A failure leaves nothing to do.
        let _ = unsafe { result::queue::destroy(self.hsa, self.queue) };
        // SAFETY: from `Box::leak` in `new`; the queue that could call back with it is destroyed.
        drop(unsafe { Box::from_raw(self.error.as_ptr()) });
    }
}

/// A queue's error callback: records the first error in the queue's slot (`data`), for the launch waiting on it.
unsafe extern "C" fn on_queue_error(status: Status, _queue: *mut Queue, data: *mut c_void) {
    if data.is_null() || status == HSA_STATUS_SUCCESS {
        return;
    }
    // SAFETY: `data` is the queue's `AtomicU32`, which lives until the queue is destroyed.
    let slot = unsafe { &*(data as *const AtomicU32) };
    let _ = slot.compare_exchange(
        HSA_STATUS_SUCCESS,
        status,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
}

/// A code object reader over bytes it borrows, destroyed on drop.
#[derive(Debug)]
pub struct OwnedReader<'a> {
    hsa: &'static Hsa,
    reader: CodeObjectReader,
    _bytes: PhantomData<&'a [u8]>,
}

impl<'a> OwnedReader<'a> {
    pub fn from_memory(hsa: &'static Hsa, bytes: &'a [u8]) -> Result<OwnedReader<'a>> {
        Ok(OwnedReader {
            hsa,
            // SAFETY: the reader borrows `bytes` for its life ('a).
            reader: unsafe { result::executable::reader_create_from_memory(hsa, bytes) }?,
            _bytes: PhantomData,
        })
    }
}

impl Drop for OwnedReader<'_> {
    fn drop(&mut self) {
        // SAFETY: owned, so live. A failure leaves nothing to do.
        let _ = unsafe { result::executable::reader_destroy(self.hsa, self.reader) };
    }
}

/// An executable being built, destroyed on drop unless [`OwnedExecutable::keep`] hands it over for good.
#[derive(Debug)]
pub struct OwnedExecutable {
    hsa: &'static Hsa,
    executable: Executable,
}

impl OwnedExecutable {
    pub fn new(hsa: &'static Hsa, profile: u32) -> Result<OwnedExecutable> {
        Ok(OwnedExecutable {
            hsa,
            executable: result::executable::create_alt(hsa, profile)?,
        })
    }

    pub fn load(&self, agent: Agent, reader: &OwnedReader<'_>) -> Result<()> {
        // SAFETY: both are live while borrowed.
        unsafe {
            result::executable::load_agent_code_object(
                self.hsa,
                self.executable,
                agent,
                reader.reader,
            )
        }
        .map(drop)
    }

    pub fn freeze(&self) -> Result<()> {
        // SAFETY: live while `self` is.
        unsafe { result::executable::freeze(self.hsa, self.executable) }
    }

    /// 0 if valid, else the runtime's reason bits.
    pub fn validate(&self) -> Result<u32> {
        // SAFETY: live while `self` is.
        unsafe { result::executable::validate(self.hsa, self.executable) }
    }

    /// Keeps the executable for the rest of the process: its kernel objects are what dispatch packets point at,
    /// and the runtime's kernel handles must stay valid (debuggers also find loaded code objects by address).
    pub fn keep(self) -> KeptExecutable {
        let kept = KeptExecutable {
            hsa: self.hsa,
            executable: self.executable,
        };
        std::mem::forget(self);
        kept
    }
}

impl Drop for OwnedExecutable {
    fn drop(&mut self) {
        // SAFETY: owned, so live, and never handed out (no dispatch of it can run). A failure leaves nothing to do.
        let _ = unsafe { result::executable::destroy(self.hsa, self.executable) };
    }
}

/// An executable that lives for the rest of the process.
#[derive(Clone, Copy, Debug)]
pub struct KeptExecutable {
    hsa: &'static Hsa,
    executable: Executable,
}

impl KeptExecutable {
    /// The symbol `name` for `agent`.
    pub fn symbol(&self, name: &CStr, agent: Agent) -> Result<KeptSymbol> {
        // SAFETY: a kept executable is never destroyed.
        let symbol = unsafe {
            result::executable::get_symbol_by_name(self.hsa, self.executable, name, agent)
        }?;
        Ok(KeptSymbol {
            hsa: self.hsa,
            symbol,
        })
    }
}

/// A symbol of a kept executable, so valid for the rest of the process.
#[derive(Clone, Copy, Debug)]
pub struct KeptSymbol {
    hsa: &'static Hsa,
    symbol: ExecutableSymbol,
}

impl KeptSymbol {
    pub fn info<T: Copy>(&self, attribute: Info<info::Symbol, T>) -> Result<T> {
        // SAFETY: the symbol's executable is kept, so never destroyed.
        unsafe { result::executable::symbol_info(self.hsa, self.symbol, attribute) }
    }
}
