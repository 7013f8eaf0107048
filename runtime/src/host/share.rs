//! The share of a work-shared loop's iterations this host thread runs (the host fallback's threads; the host image
//! has its twins in offload-device). The outliner and the macro wrap the loop's range (or a `collapse(n)` nest's tuple of ranges) in these.

use super::thread::{chunk_counter, host_geometry};
use offload_model::abi::{flat_share, FlatBlock, Nest};
use offload_model::lanes::ChunkShare;

/// `schedule(static)`: the block of iterations this thread runs.
#[doc(hidden)]
pub fn share<I: offload_model::abi::Share>(it: I) -> I::Part {
    let (t, n, i, m) = host_geometry();
    it.share((t * m + i) as usize, (n * m) as usize)
}

/// `schedule(dynamic, c)`: the chunks of `c` iterations this thread claims as it goes, from the launch's counter.
#[doc(hidden)]
pub fn share_dynamic<I: ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let counter = chunk_counter();
    if counter.is_null() {
        return share_chunks(it, chunk);
    }
    // SAFETY: the fallback's counter for this launch, shared by its threads alone, alive until they have all
    // finished.
    unsafe { it.dynamic(chunk, &*counter) }
}

/// `schedule(static, c)`: the chunks of `c` iterations this thread runs, dealt round-robin over every thread.
#[doc(hidden)]
pub fn share_chunks<I: ChunkShare>(it: I, chunk: usize) -> I::Chunked {
    let (t, n, i, m) = host_geometry();
    it.chunks(chunk, (t * m + i) as usize, (n * m) as usize)
}

/// The share of a `collapse(n)` loop nest `(a, b, ..)` this thread runs: a block of the flattened iteration space,
/// as `(i, j, ..)` tuples.
#[doc(hidden)]
pub fn share_nest<N: Nest>(nest: N) -> FlatBlock<N> {
    let (t, n, i, m) = host_geometry();
    flat_share(nest, (t * m + i) as usize, (n * m) as usize)
}
