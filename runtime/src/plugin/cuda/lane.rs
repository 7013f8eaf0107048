//! A lane of a CUDA device ([`crate::plugin::gpu::lanes`]): a non-blocking stream of its own, and, made on its first
//! copy, a pinned staging buffer in two halves with an event each. A host thread holds a lane for one operation,
//! so operations of different threads (tasks) overlap on the GPU; each operation synchronises its stream before it
//! returns, so to the host every copy, fill and launch is as synchronous as on the legacy default stream, and
//! operations of one thread stay in program order.
//!
//! Copies go through the staging buffer, as libomptarget's CUDA plugin does below its pinning threshold: the driver
//! copies asynchronously only from pinned memory (from pageable memory it stages itself, and overlaps nothing). The
//! host fills one half while the copy engine drains the other.

use super::error::fail;
use cudarc::driver::result::{self, event, stream};
use cudarc::driver::sys;
use std::ptr::NonNull;

/// Bytes in each half of a lane's staging buffer.
pub(super) const STAGING_HALF: usize = 2 << 20;

/// Must be made and used with its device's context current (so must its drop: the device's drop makes the context
/// current before its lanes go).
pub(super) struct Lane {
    pub(super) stream: sys::CUstream,
    staging: Option<Staging>,
}

struct Staging {
    /// Pinned host memory: two halves of [`STAGING_HALF`] bytes.
    host: NonNull<u8>,
    /// Recorded after the copy that uses each half.
    events: [sys::CUevent; 2],
}

// SAFETY: the stream, the events and the pinned memory belong to the context, not to a thread; a lane is used by one
// thread at a time (the pool hands it out whole).
unsafe impl Send for Lane {}

impl Lane {
    /// A lane with a new non-blocking stream (it does not wait for the legacy default stream, nor it for it).
    pub(super) fn new() -> Result<Lane, String> {
        let stream = stream::create(stream::StreamKind::NonBlocking)
            .map_err(|e| fail("cuStreamCreate", e))?;
        Ok(Lane {
            stream,
            staging: None,
        })
    }

    /// The staging buffer, made on first use.
    fn staging(&mut self) -> Result<&Staging, String> {
        if self.staging.is_none() {
            self.staging = Some(Staging::new()?);
        }
        Ok(self.staging.as_ref().expect("made above"))
    }

    /// Waits for everything on the stream; `call` names the operation for a failure.
    pub(super) fn wait(&self, call: &str) -> Result<(), String> {
        // SAFETY: the stream is live; the context is current (the type's contract).
        unsafe { stream::synchronize(self.stream) }.map_err(|e| fail(call, e))
    }

    /// Copies `size` bytes from host memory `src` to device memory `dst`, and waits for the copy.
    ///
    /// # Safety
    /// `src` is readable for `size` bytes; `dst..dst+size` lies in one allocation of this context.
    pub(super) unsafe fn copy_in(
        &mut self,
        dst: sys::CUdeviceptr,
        src: *const u8,
        size: usize,
    ) -> Result<(), String> {
        let stream = self.stream;
        let staging = self.staging()?;
        let copied = (|| {
            for (k, (at, n)) in chunks(size).enumerate() {
                let half = k % 2;
                if k >= 2 {
                    // The copy out of this half, two chunks back, has ended before the host refills it.
                    // SAFETY: the event was recorded on this stream.
                    unsafe { event::synchronize(staging.events[half]) }
                        .map_err(|e| fail("cuEventSynchronize", e))?;
                }
                let buf = staging.half(half);
                // SAFETY: per the contract `src..src+size` is readable; the half holds STAGING_HALF >= n bytes and no
                // copy reads it (waited for above, or never used).
                unsafe { std::ptr::copy_nonoverlapping(src.add(at), buf.as_ptr(), n) };
                // SAFETY: the half is pinned and stays valid and unwritten until its event says the copy has ended;
                // `dst + at .. + n` lies in the caller's allocation.
                unsafe {
                    result::memcpy_htod_async(
                        dst + at as u64,
                        std::slice::from_raw_parts(buf.as_ptr(), n),
                        stream,
                    )
                }
                .map_err(|e| fail("cuMemcpyHtoDAsync", e))?;
                // SAFETY: the event and the stream are live.
                unsafe { event::record(staging.events[half], stream) }
                    .map_err(|e| fail("cuEventRecord", e))?;
            }
            Ok(())
        })();
        // Also after a failure: no copy may still read the staging buffer when the lane is handed on.
        let waited = self.wait("cuStreamSynchronize");
        copied.and(waited)
    }

    /// Copies `size` bytes from device memory `src` to host memory `dst`, and waits for the copy.
    ///
    /// # Safety
    /// `dst` is writable for `size` bytes; `src..src+size` lies in one allocation of this context.
    pub(super) unsafe fn copy_out(
        &mut self,
        dst: *mut u8,
        src: sys::CUdeviceptr,
        size: usize,
    ) -> Result<(), String> {
        let stream = self.stream;
        let staging = self.staging()?;
        let parts: Vec<(usize, usize)> = chunks(size).collect();
        // Starts the copy of part `k` into its half.
        let start = |k: usize| -> Result<(), String> {
            let (at, n) = parts[k];
            let buf = staging.half(k % 2);
            // SAFETY: the half is pinned, holds STAGING_HALF >= n bytes, and the host reads it only after its event;
            // `src + at .. + n` lies in the caller's allocation.
            unsafe {
                result::memcpy_dtoh_async(
                    std::slice::from_raw_parts_mut(buf.as_ptr(), n),
                    src + at as u64,
                    stream,
                )
            }
            .map_err(|e| fail("cuMemcpyDtoHAsync", e))?;
            // SAFETY: the event and the stream are live.
            unsafe { event::record(staging.events[k % 2], stream) }
                .map_err(|e| fail("cuEventRecord", e))
        };
        let copied = (|| {
            for k in 0..parts.len().min(2) {
                start(k)?;
            }
            for (k, &(at, n)) in parts.iter().enumerate() {
                // SAFETY: recorded after this part's copy.
                unsafe { event::synchronize(staging.events[k % 2]) }
                    .map_err(|e| fail("cuEventSynchronize", e))?;
                // SAFETY: the copy into the half has ended; per the contract `dst..dst+size` is writable.
                unsafe {
                    std::ptr::copy_nonoverlapping(staging.half(k % 2).as_ptr(), dst.add(at), n)
                };
                if k + 2 < parts.len() {
                    start(k + 2)?;
                }
            }
            Ok(())
        })();
        let waited = self.wait("cuStreamSynchronize");
        copied.and(waited)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Failures (a lost context) leave nothing to do.
        if let Some(s) = self.staging.take() {
            // SAFETY: the stream was synchronised by the last operation; nothing uses the buffer or the events.
            unsafe {
                for e in s.events {
                    let _ = event::destroy(e);
                }
                let _ = result::free_host(s.host.as_ptr().cast());
            }
        }
        // SAFETY: no operation uses the stream any more.
        let _ = unsafe { stream::destroy(self.stream) };
    }
}

impl Staging {
    fn new() -> Result<Staging, String> {
        // SAFETY: the context is current (the lane's contract); the memory is ours alone.
        let host = unsafe { result::malloc_host(2 * STAGING_HALF, 0) }
            .map_err(|e| fail("cuMemHostAlloc", e))?;
        let Some(host) = NonNull::new(host.cast::<u8>()) else {
            return Err("cuMemHostAlloc returned no memory".into());
        };
        let mut events = [std::ptr::null_mut(); 2];
        for i in 0..2 {
            match event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING) {
                Ok(e) => events[i] = e,
                Err(e) => {
                    // SAFETY: made above, never used.
                    unsafe {
                        for made in &events[..i] {
                            let _ = event::destroy(*made);
                        }
                        let _ = result::free_host(host.as_ptr().cast());
                    }
                    return Err(fail("cuEventCreate", e));
                }
            }
        }
        Ok(Staging { host, events })
    }

    fn half(&self, half: usize) -> NonNull<u8> {
        // SAFETY: `half` is 0 or 1, within the 2 * STAGING_HALF bytes.
        unsafe { self.host.add(half * STAGING_HALF) }
    }
}

/// `(offset, length)` of each staging-sized chunk of `size` bytes.
fn chunks(size: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..size)
        .step_by(STAGING_HALF)
        .map(move |at| (at, (size - at).min(STAGING_HALF)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_a_copy_once_in_staging_sized_pieces() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(5).collect::<Vec<_>>(), [(0, 5)]);
        let big = 2 * STAGING_HALF + 3;
        assert_eq!(
            chunks(big).collect::<Vec<_>>(),
            [
                (0, STAGING_HALF),
                (STAGING_HALF, STAGING_HALF),
                (2 * STAGING_HALF, 3)
            ]
        );
    }
}
