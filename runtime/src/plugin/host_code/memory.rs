//! Device memory of the host-compiled devices (host-elf, gpu-sim): separate, zero-filled heap blocks (so every
//! missing or extra copy is observable), huge pages for large ones, and a capacity (`OFFLOAD_HOST_MEMORY`) so
//! out-of-memory paths can be exercised.

use crate::plugin::error::PluginError;
use crate::plugin::interface::{DeviceMemory, DevicePtr};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Alignment of every allocation, and the size of the header that remembers its length.
pub const ALIGN: usize = 64;

/// The most alignment an allocation may ask for (a page): above it, `alloc_aligned` fails rather than misalign.
pub const MAX_ALIGN: usize = 4096;

/// An x86_64 huge page: blocks at least this large come from [`map_huge`].
pub const HUGE_PAGE: usize = 2 << 20;

/// A zero-filled block of `len` bytes at a huge-page boundary, backed by transparent huge pages where the kernel has
/// them, as a GPU driver backs device memory with large pages: a kernel streaming through 256 MiB then takes 128 TLB
/// misses instead of 65536. The advice comes before the first touch (the allocator's own zeroing would fault in small
/// pages first), and the kernel's fresh pages are already zero. Without THP it is plain zeroed memory.
fn map_huge(len: usize) -> Option<*mut u8> {
    let span = len.checked_add(HUGE_PAGE)?;
    // SAFETY: an anonymous private mapping with no address hint touches nothing of ours.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let (base, start) = (p as usize, (p as usize).next_multiple_of(HUGE_PAGE));
    // What stays mapped ends at the page after the block, which is where `free` unmaps to.
    let (kept_end, map_end) = ((start + len).next_multiple_of(page_size()), base + span);
    // SAFETY: the head and tail trimmed are parts of the mapping just made that nothing refers to; the advice changes
    // no contents.
    unsafe {
        if start > base {
            libc::munmap(p, start - base);
        }
        if kept_end < map_end {
            libc::munmap(kept_end as *mut c_void, map_end - kept_end);
        }
        libc::madvise(start as *mut c_void, len, libc::MADV_HUGEPAGE);
    }
    Some(start as *mut u8)
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// A host-compiled device's memory: blocks from the host's heap (or huge-page mappings), counted against a capacity.
/// It is the device's [`DeviceMemory`], which is the host's ([`DeviceMemory::memory_is_host`]).
pub struct HostMemory {
    /// Bytes of device memory allocated (headers included), against `capacity`.
    in_use: AtomicUsize,
    /// `OFFLOAD_HOST_MEMORY`: how much device memory the device offers, like a GPU's memory size (unlimited
    /// unless set, so out-of-memory paths can be exercised).
    capacity: usize,
    /// The alignment every block has (at least [`ALIGN`]).
    align: usize,
    /// The most alignment a block may be asked for (at most [`MAX_ALIGN`]).
    max_align: usize,
}

impl HostMemory {
    /// `capacity` bytes of device memory whose every block is aligned to `align` (at least [`ALIGN`]), and which
    /// aligns a block to at most `max_align` (at most [`MAX_ALIGN`]; host-elf's, while gpu-sim aligns as CUDA does).
    pub fn new(capacity: usize, align: usize, max_align: usize) -> Self {
        HostMemory {
            in_use: AtomicUsize::new(0),
            capacity,
            align: align.max(ALIGN),
            max_align: max_align.min(MAX_ALIGN),
        }
    }

    /// Takes `bytes` of the device's memory, if that much is left.
    fn reserve(&self, bytes: usize) -> bool {
        self.in_use
            .fetch_update(Relaxed, Relaxed, |u| {
                u.checked_add(bytes).filter(|&t| t <= self.capacity)
            })
            .is_ok()
    }

    /// Zero-filled device memory aligned to `align` (at most the memory's most). The block starts `head =
    /// max(align, the memory's alignment)` bytes into an allocation aligned to `head`; the two words just before it
    /// remember the size and the head, which `free` needs to rebuild the layout.
    fn block(&self, size: usize, align: usize) -> Result<DevicePtr, PluginError> {
        if !align.is_power_of_two() || align > self.max_align {
            return Err(PluginError::Alignment {
                align,
                max: self.max_align,
            });
        }
        let head = align.max(self.align);
        let failed = |reason: String| PluginError::Alloc {
            bytes: size,
            reason,
        };
        let total = size
            .checked_add(head)
            .ok_or_else(|| failed("the size overflows".into()))?;
        let layout = Layout::from_size_align(total, head).map_err(|e| failed(e.to_string()))?;
        if !self.reserve(total) {
            return Err(PluginError::OutOfMemory {
                bytes: size,
                detail: format!(
                    "{} bytes in use of {}; OFFLOAD_HOST_MEMORY",
                    self.in_use.load(Relaxed),
                    self.capacity
                ),
            });
        }
        let p = if total >= HUGE_PAGE {
            // A huge-page boundary is aligned for any `head` up to MAX_ALIGN.
            map_huge(total).unwrap_or(std::ptr::null_mut())
        } else {
            // SAFETY: the layout has a non-zero size.
            unsafe { alloc_zeroed(layout) }
        };
        if p.is_null() {
            self.in_use.fetch_sub(total, Relaxed);
            return Err(PluginError::OutOfMemory {
                bytes: size,
                detail: "the host has no memory left".into(),
            });
        }
        // SAFETY: the two header words lie in the first `head` (at least 64) bytes of the block, aligned for usize.
        unsafe {
            let block = p.add(head);
            (block as *mut usize).sub(2).write(size);
            (block as *mut usize).sub(1).write(head);
            Ok(block as u64)
        }
    }
}

impl DeviceMemory for HostMemory {
    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError> {
        self.block(size, self.align)
    }

    fn alloc_align(&self) -> usize {
        self.align
    }

    fn alloc_aligned(&self, size: usize, align: usize) -> Result<DevicePtr, PluginError> {
        self.block(size, align)
    }

    unsafe fn free(&self, ptr: DevicePtr) {
        let block = ptr as *mut u8;
        // SAFETY: per the trait's contract `ptr` came from `alloc` or `alloc_aligned`, whose `block` wrote the size
        // and the head just before it.
        unsafe {
            let size = (block as *const usize).sub(2).read();
            let head = (block as *const usize).sub(1).read();
            let (base, len) = (block.sub(head), size + head);
            self.in_use.fetch_sub(len, Relaxed);
            if len >= HUGE_PAGE {
                // The tail `map_huge` kept reaches the next page boundary.
                libc::munmap(base as *mut c_void, len.next_multiple_of(page_size()));
            } else {
                dealloc(base, Layout::from_size_align_unchecked(len, head));
            }
        }
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        size: usize,
    ) -> Result<(), PluginError> {
        // SAFETY: per the trait's contract; host and device memory never overlap.
        unsafe { std::ptr::copy_nonoverlapping(src, dst as *mut u8, size) };
        Ok(())
    }

    unsafe fn copy_from_device(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        size: usize,
    ) -> Result<(), PluginError> {
        // SAFETY: per the trait's contract.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst, size) };
        Ok(())
    }

    fn memory_is_host(&self) -> bool {
        true
    }
}

/// Physical memory: what host-compiled devices' memory comes from.
pub fn physical_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::{HostMemory, ALIGN, HUGE_PAGE, MAX_ALIGN};
    use crate::plugin::error::PluginError;
    use crate::plugin::interface::DeviceMemory;

    #[test]
    // Miri has no mmap.
    #[cfg_attr(miri, ignore)]
    fn device_memory_is_zeroed_aligned_and_writable_on_both_sides_of_the_huge_page_path() {
        let device = HostMemory::new(usize::MAX, ALIGN, MAX_ALIGN);
        // Whole huge pages inside a large block may get huge pages wherever the kernel offers THP to this process.
        // Kernels before 5.0 print no `THPeligible`; a container may turn THP off for its processes.
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let off_here = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .any(|l| l.split_whitespace().eq(["THP_enabled:", "0"]))
        });
        let thp_here = !thp.contains("[never]") && !thp.is_empty() && !off_here;
        for size in [
            1,
            HUGE_PAGE - ALIGN - 1,
            HUGE_PAGE - ALIGN,
            5 * HUGE_PAGE + 3,
            64 << 20,
        ] {
            // Twice: a block freed and allocated again starts zeroed too.
            for _ in 0..2 {
                let p = device.alloc_aligned(size, ALIGN).expect("allocation");
                assert_eq!(p % ALIGN as u64, 0, "{size}");
                // SAFETY: `p` is `size` bytes of device memory, which is in this process.
                let block = unsafe { std::slice::from_raw_parts_mut(p as *mut u8, size) };
                assert!(block.iter().step_by(4093).all(|&b| b == 0), "{size}");
                assert_eq!(block[size - 1], 0, "{size}");
                block[0] = 1;
                block[size - 1] = 2;
                if size >= HUGE_PAGE && thp_here {
                    if let Some(eligible) = thp_eligible(p as usize) {
                        assert!(eligible, "{size}");
                    }
                }
                // SAFETY: allocated above, freed once.
                unsafe { device.free(p) };
            }
        }
    }

    /// `THPeligible` of the mapping holding `addr`, from /proc/self/smaps.
    fn thp_eligible(addr: usize) -> Option<bool> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(v) = line.strip_prefix("THPeligible:") {
                    return Some(v.trim() == "1");
                }
            }
        }
        None
    }

    #[test]
    fn allocations_honour_the_alignment_asked_for_up_to_the_maximum() {
        let device = HostMemory::new(usize::MAX, ALIGN, MAX_ALIGN);
        // Miri has no mmap: the huge-page path only natively.
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 200]
        } else {
            &[1, 200, 3 * HUGE_PAGE]
        };
        for &size in sizes {
            for align in [1, 8, 64, 128, 256, MAX_ALIGN] {
                let p = device.alloc_aligned(size, align).expect("allocation");
                assert_eq!(
                    p % align.max(ALIGN) as u64,
                    0,
                    "{size} bytes, {align}-aligned"
                );
                // SAFETY: `p` is `size` bytes of device memory in this process.
                unsafe { (p as *mut u8).add(size - 1).write(1) };
                // SAFETY: allocated above, freed once.
                unsafe { device.free(p) };
            }
        }
        let e = device.alloc_aligned(8, 2 * MAX_ALIGN).unwrap_err();
        assert!(matches!(e, PluginError::Alignment { .. }), "{e}");
    }

    #[test]
    fn device_memory_is_limited_to_its_capacity() {
        let device = HostMemory::new(1000, ALIGN, MAX_ALIGN);
        let p = device.alloc_aligned(500, ALIGN).expect("fits");
        assert!(
            matches!(
                device.alloc_aligned(500, ALIGN),
                Err(PluginError::OutOfMemory { .. })
            ),
            "500 + headers exceed 1000 bytes"
        );
        // SAFETY: allocated above, freed once.
        unsafe { device.free(p) };
        let p = device.alloc_aligned(500, ALIGN).expect("fits again");
        // SAFETY: as above.
        unsafe { device.free(p) };
    }
}
