//! A lane of a CUDA device ([`crate::plugin::gpu::lanes`]): a non-blocking stream of its own, and, made on its first
//! copy, a pinned staging buffer in two halves with an event each. A host thread holds a lane for one operation,
//! so operations of different threads (tasks) overlap on the GPU; each operation synchronises its stream before it
//! returns, so to the host every copy, fill and launch is as synchronous as on the legacy default stream, and
//! operations of one thread stay in program order.
//!
//! Copies go through the staging buffer: the driver's copies from pageable memory stage through a buffer of its own
//! and return only when the host side is done, so a thread's copy would hold its host thread through the driver's
//! staging; here the host fills one half while the copy engine drains the other. Where pinned memory cannot be had
//! (a capped container), copies go straight from the caller's memory on the lane's stream, as the driver allows.

use super::error::fail;
use cudarc::driver::result::{self, event, stream};
use cudarc::driver::sys;
use std::ptr::NonNull;

/// Bytes in each half of a lane's staging buffer.
pub(super) const STAGING_HALF: usize = 2 << 20;

/// Must be made and used with its device's context current; its drop runs after the device's drop made the context
/// current (where it could: otherwise the driver's calls fail, and nothing is left to do).
pub(super) struct Lane {
    pub(super) stream: sys::CUstream,
    staging: Staging,
}

/// The staging buffer: not made yet, made, or not to be had (copies then go direct).
enum Staging {
    Unmade,
    Made(Buffer),
    Unavailable,
}

struct Buffer {
    /// Pinned host memory, zero-filled: two halves of [`STAGING_HALF`] bytes.
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
            staging: Staging::Unmade,
        })
    }

    /// The staging buffer, made on first use; `None` where pinned memory cannot be had (tried once per lane).
    fn staging(&mut self) -> Option<&Buffer> {
        if let Staging::Unmade = self.staging {
            self.staging = match Buffer::new() {
                Ok(b) => Staging::Made(b),
                Err(_) => Staging::Unavailable,
            };
        }
        match &self.staging {
            Staging::Made(b) => Some(b),
            _ => None,
        }
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
        let copied = match self.staging() {
            // SAFETY: per the contract; the stream is waited for below, before `src` may go.
            None => unsafe { direct_htod(dst, src, size, stream) },
            // SAFETY: per the contract.
            Some(staging) => unsafe { staging.copy_in(dst, src, size, stream) },
        };
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
        let copied = match self.staging() {
            // SAFETY: per the contract; the stream is waited for below, before `dst` may go.
            None => unsafe { direct_dtoh(dst, src, size, stream) },
            // SAFETY: per the contract.
            Some(staging) => unsafe { staging.copy_out(dst, src, size, stream) },
        };
        // Also after a failure: no copy may still write the staging buffer (or `dst`) when the lane is handed on.
        let waited = self.wait("cuStreamSynchronize");
        copied.and(waited)
    }
}

/// `cuMemcpyHtoDAsync` of `n` bytes; raw pointers, so no slice is made over memory that may be uninitialised.
///
/// # Safety
/// `src` is readable for `n` bytes until the stream has been waited for; `dst..dst+n` lies in one allocation.
unsafe fn direct_htod(
    dst: sys::CUdeviceptr,
    src: *const u8,
    n: usize,
    stream: sys::CUstream,
) -> Result<(), String> {
    // SAFETY: per the contract.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), n, stream) }
        .result()
        .map_err(|e| fail("cuMemcpyHtoDAsync", e))
}

/// `cuMemcpyDtoHAsync` of `n` bytes.
///
/// # Safety
/// `dst` is writable for `n` bytes, and nothing else uses it, until the stream has been waited for; `src..src+n`
/// lies in one allocation.
unsafe fn direct_dtoh(
    dst: *mut u8,
    src: sys::CUdeviceptr,
    n: usize,
    stream: sys::CUstream,
) -> Result<(), String> {
    // SAFETY: per the contract.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, n, stream) }
        .result()
        .map_err(|e| fail("cuMemcpyDtoHAsync", e))
}

impl Buffer {
    /// Copies in through the halves; the caller waits for the stream.
    ///
    /// # Safety
    /// As [`Lane::copy_in`]; `stream` is the lane's.
    unsafe fn copy_in(
        &self,
        dst: sys::CUdeviceptr,
        src: *const u8,
        size: usize,
        stream: sys::CUstream,
    ) -> Result<(), String> {
        for (k, (at, n)) in chunks(size).enumerate() {
            let half = k % 2;
            if k >= 2 {
                // The copy out of this half, two chunks back, has ended before the host refills it.
                // SAFETY: the event was recorded on this stream.
                unsafe { event::synchronize(self.events[half]) }
                    .map_err(|e| fail("cuEventSynchronize", e))?;
            }
            let buf = self.half(half);
            // SAFETY: per the contract `src..src+size` is readable; the half holds STAGING_HALF >= n bytes and no
            // copy reads it (waited for above, or never used).
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), buf.as_ptr(), n) };
            // SAFETY: the half is pinned and stays valid and unwritten until its event says the copy has ended;
            // `dst + at .. + n` lies in the caller's allocation.
            unsafe { direct_htod(dst + at as u64, buf.as_ptr(), n, stream) }?;
            // SAFETY: the event and the stream are live.
            unsafe { event::record(self.events[half], stream) }
                .map_err(|e| fail("cuEventRecord", e))?;
        }
        Ok(())
    }

    /// Copies out through the halves; the caller waits for the stream.
    ///
    /// # Safety
    /// As [`Lane::copy_out`]; `stream` is the lane's.
    unsafe fn copy_out(
        &self,
        dst: *mut u8,
        src: sys::CUdeviceptr,
        size: usize,
        stream: sys::CUstream,
    ) -> Result<(), String> {
        let parts: Vec<(usize, usize)> = chunks(size).collect();
        // Starts the copy of part `k` into its half.
        let start = |k: usize| -> Result<(), String> {
            let (at, n) = parts[k];
            let buf = self.half(k % 2);
            // SAFETY: the half is pinned, holds STAGING_HALF >= n bytes, and the host reads it only after its event;
            // `src + at .. + n` lies in the caller's allocation.
            unsafe { direct_dtoh(buf.as_ptr(), src + at as u64, n, stream) }?;
            // SAFETY: the event and the stream are live.
            unsafe { event::record(self.events[k % 2], stream) }
                .map_err(|e| fail("cuEventRecord", e))
        };
        for k in 0..parts.len().min(2) {
            start(k)?;
        }
        for (k, &(at, n)) in parts.iter().enumerate() {
            // SAFETY: recorded after this part's copy.
            unsafe { event::synchronize(self.events[k % 2]) }
                .map_err(|e| fail("cuEventSynchronize", e))?;
            // SAFETY: the copy into the half has ended; per the contract `dst..dst+size` is writable.
            unsafe { std::ptr::copy_nonoverlapping(self.half(k % 2).as_ptr(), dst.add(at), n) };
            if k + 2 < parts.len() {
                start(k + 2)?;
            }
        }
        Ok(())
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        // Failures (a lost context) leave nothing to do.
        if let Staging::Made(s) = std::mem::replace(&mut self.staging, Staging::Unavailable) {
            // Whatever became of the last operation's wait, nothing may run on the buffer once it is freed.
            // SAFETY: the stream is live.
            let _ = unsafe { stream::synchronize(self.stream) };
            // SAFETY: nothing uses the buffer or the events any more.
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

impl Buffer {
    fn new() -> Result<Buffer, String> {
        // SAFETY: the context is current (the lane's contract); the memory is ours alone.
        let host = unsafe { result::malloc_host(2 * STAGING_HALF, 0) }
            .map_err(|e| fail("cuMemHostAlloc", e))?;
        let Some(host) = NonNull::new(host.cast::<u8>()) else {
            return Err("cuMemHostAlloc returned no memory".into());
        };
        // SAFETY: ours alone; zeroed once, so the halves are always initialised bytes.
        unsafe { host.write_bytes(0, 2 * STAGING_HALF) };
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
        Ok(Buffer { host, events })
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
