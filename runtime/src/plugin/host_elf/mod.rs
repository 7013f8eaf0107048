//! `host-elf`: the host as an offload device, like libomptarget's x86_64 host plugin. Images are x86_64 shared
//! objects loaded from memory (a memfd, never a temporary file); device memory is a separate, zero-filled heap
//! allocation, so every missing or extra copy is observable.

mod call;

use crate::env::icv;
use crate::host::geometry::{
    host_default_geometry, host_max_teams, host_max_threads, HOST_LIMITS_WHY,
};
use crate::host::{run_teams, TeamBarrier};
use crate::plugin::error::PluginError;
use crate::plugin::interface::{
    Arg, Device, DeviceDescription, DevicePtr, Discovered, Kernel, LaunchParams, LoadedImage,
    LoadedImageOps, Plugin,
};
use crate::registry::Image;
use offload_model::abi::{HostFailure, HostLaunchEnv};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_void, CStr, CString};
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

pub struct HostElf;

/// Alignment of every allocation, and the size of the header that remembers its length.
const ALIGN: usize = 64;

/// The most alignment an allocation may ask for (a page): above it, `alloc_aligned` fails rather than misalign.
const MAX_ALIGN: usize = 4096;

/// An x86_64 huge page: blocks at least this large come from [`map_huge`].
const HUGE_PAGE: usize = 2 << 20;

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

impl Plugin for HostElf {
    fn name(&self) -> &'static str {
        offload_model::device::DeviceKind::Host.plugin()
    }

    fn discover(&self) -> Result<Discovered, PluginError> {
        if cfg!(miri) {
            // Miri interprets the host fallback; it cannot load an image from memory.
            return Err(PluginError::Unavailable {
                reason: "not under Miri".into(),
            });
        }
        // Like LLVM's host plugin, which offers several devices, the count is configurable (`OFFLOAD_HOST_DEVICES`)
        // so `device(n)` can be exercised.
        let icv = icv();
        Ok(Discovered {
            devices: (0..icv.host_devices)
                .map(|_| Box::new(HostElfDevice::new(icv.host_memory)) as Box<dyn Device>)
                .collect(),
            notes: Vec::new(),
        })
    }
}

struct HostElfDevice {
    /// Bytes of device memory allocated (headers included), against `capacity`.
    in_use: AtomicUsize,
    /// `OFFLOAD_HOST_MEMORY`: how much device memory the device offers, like a GPU's memory size (unlimited
    /// unless set, so out-of-memory paths can be exercised).
    capacity: usize,
}

impl HostElfDevice {
    fn new(capacity: usize) -> Self {
        HostElfDevice {
            in_use: AtomicUsize::new(0),
            capacity,
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
}

struct HostElfImage {
    handle: *mut c_void,
}

// SAFETY: a dlopen handle may be used from any thread.
unsafe impl Send for HostElfImage {}
unsafe impl Sync for HostElfImage {}

impl LoadedImageOps for HostElfImage {
    fn kernel(&self, symbol: &CStr) -> Result<Option<Kernel>, PluginError> {
        // SAFETY: `handle` is a live dlopen handle (RTLD_NODELETE: never unloaded).
        let p = unsafe { libc::dlsym(self.handle, symbol.as_ptr()) };
        Ok((!p.is_null()).then_some(Kernel(p as usize)))
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns a thread-local message or null.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-null dlerror results are NUL-terminated.
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

impl Device for HostElfDevice {
    fn describe(&self) -> DeviceDescription {
        DeviceDescription {
            name: format!(
                "the host as an offload device ({} hardware threads)",
                host_default_geometry(true).1
            ),
            arch: std::env::consts::ARCH.to_string(),
            memory: host_memory(),
        }
    }

    /// An image for an x86-64 level ranks by its level, if this CPU has every feature of it: `host:x86-64-v3,x86-64`
    /// runs AVX2 code where there is AVX2 and the baseline elsewhere. An image built with the program's own CPU flags
    /// runs where the program does.
    fn rank(&self, image: &Image) -> Option<u32> {
        let mut parts = image.triple.split('-');
        if parts.next() != Some(std::env::consts::ARCH)
            || !image.triple.contains(std::env::consts::OS)
            || image.format != offload_model::fatbin::ImageFormat::SharedObject
        {
            return None;
        }
        match offload_model::device::x86_64_level(image.arch) {
            Some((level, mut features)) => features
                .all(|f| cpu_has(f) == Some(true))
                .then_some(1 + level as u32),
            None => Some(1),
        }
    }

    fn default_geometry(&self, spmd: bool) -> (u32, u32) {
        host_default_geometry(spmd)
    }

    fn max_teams(&self) -> u32 {
        host_max_teams()
    }

    fn max_threads(&self) -> u32 {
        host_max_threads()
    }

    fn limits_why(&self) -> (&'static str, &'static str) {
        HOST_LIMITS_WHY
    }

    fn load_image(&self, image: &Image) -> Result<LoadedImage, PluginError> {
        let load = |reason: String| PluginError::Load { reason };
        if image.bytes.get(..4) != Some(b"\x7fELF") {
            return Err(load("not an ELF shared object".into()));
        }
        let name = CString::new(format!("offload-image-{}", image.package)).unwrap_or_default();
        // SAFETY: memfd_create returns a new descriptor that we own.
        let mut file = unsafe {
            let fd = libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC);
            if fd < 0 {
                return Err(load(format!(
                    "memfd_create: {}",
                    std::io::Error::last_os_error()
                )));
            }
            std::fs::File::from_raw_fd(fd)
        };
        file.write_all(image.bytes)
            .map_err(|e| load(format!("writing the image to a memfd: {e}")))?;
        let path = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap_or_default();
        // SAFETY: loads our own image; RTLD_NODELETE keeps it (and its kernels) for the life of the process.
        let handle = unsafe {
            libc::dlopen(
                path.as_ptr(),
                libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE,
            )
        };
        if handle.is_null() {
            return Err(load(dlerror()));
        }
        // The memfd stays open too: glibc finds an already-loaded object by its path, so a closed descriptor's
        // number reused for the next image's `/proc/self/fd/N` would hand back this image instead.
        let _ = file.into_raw_fd();
        Ok(Box::new(HostElfImage { handle }))
    }

    fn alloc(&self, size: usize) -> Result<DevicePtr, PluginError> {
        self.alloc_aligned(size, ALIGN)
    }

    fn alloc_align(&self) -> usize {
        ALIGN
    }

    /// The block starts `head = max(align, ALIGN)` bytes into an allocation aligned to `head`; the two words just
    /// before it remember the size and the head, which `free` needs to rebuild the layout.
    fn alloc_aligned(&self, size: usize, align: usize) -> Result<DevicePtr, PluginError> {
        if !align.is_power_of_two() || align > MAX_ALIGN {
            return Err(PluginError::Alignment {
                align,
                max: MAX_ALIGN,
            });
        }
        let head = align.max(ALIGN);
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

    unsafe fn free(&self, ptr: DevicePtr) {
        let block = ptr as *mut u8;
        // SAFETY: `ptr` came from `alloc_aligned`, which wrote the size and the head just before it.
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

    unsafe fn launch(
        &self,
        kernel: Kernel,
        args: &[Arg],
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        if args.len() > call::MAX_ARGS {
            return Err(PluginError::Launch {
                reason: format!(
                    "the kernel takes {} arguments; the host-elf device passes at most {} (pass fewer arguments, \
                     or group them in a `#[declare_target]` struct)",
                    args.len(),
                    call::MAX_ARGS
                ),
            });
        }
        // The runtime clamps the geometry; a caller that did not gets the same bounds here, not a huge allocation.
        let teams = params.num_teams.clamp(1, host_max_teams());
        let threads = params.num_threads.clamp(1, self.max_threads());
        // Team-shared memory: one zeroed block per team, in 16-byte units so any slot type is aligned.
        let units = params.team_shared.div_ceil(16);
        let shared: Vec<std::sync::Mutex<Vec<u128>>> = (0..if units > 0 { teams } else { 0 })
            .map(|_| std::sync::Mutex::new(vec![0u128; units]))
            .collect();
        let shared_ptr = |t: u32| -> (*mut u8, usize) {
            match shared.get(t as usize) {
                // The block outlives the launch; its threads coordinate their accesses with the team barrier.
                Some(m) => (
                    m.lock().unwrap_or_else(|p| p.into_inner()).as_mut_ptr() as *mut u8,
                    units * 16,
                ),
                None => (std::ptr::null_mut(), 0),
            }
        };
        // `schedule(dynamic)`'s chunk counter, shared by the launch's threads.
        let chunks = std::sync::atomic::AtomicUsize::new(0);
        if teams == 1 && threads == 1 {
            // SAFETY: per the trait's contract.
            return unsafe { run_thread(kernel, args, (0, 1, 0, 1), None, shared_ptr(0), &chunks) };
        }
        run_teams(teams, threads, &|t, i, b| {
            // SAFETY: per the trait's contract; `b`, the team's block and the counter outlive the kernel call.
            unsafe {
                run_thread(
                    kernel,
                    args,
                    (t, teams, i, threads),
                    Some(b),
                    shared_ptr(t),
                    &chunks,
                )
            }
        })
        .map(drop)
    }
}

/// Runs one thread of a kernel: team `g.0` of `g.1`, thread `g.2` of `g.3`.
///
/// # Safety
/// As [`Device::launch`].
unsafe fn run_thread(
    kernel: Kernel,
    args: &[Arg],
    g: (u32, u32, u32, u32),
    barrier: Option<&TeamBarrier>,
    shared: (*mut u8, usize),
    chunks: &std::sync::atomic::AtomicUsize,
) -> Result<(), PluginError> {
    let mut failure = MaybeUninit::<HostFailure>::uninit();
    // SAFETY: only `failed` is read unless the kernel set it, after writing the rest.
    unsafe { std::ptr::addr_of_mut!((*failure.as_mut_ptr()).failed).write(0) };
    let mut env = HostLaunchEnv {
        team_num: g.0,
        num_teams: g.1,
        thread_num: g.2,
        num_threads: g.3,
        team_shared: shared.0,
        team_shared_len: shared.1,
        failure: failure.as_mut_ptr(),
        barrier: barrier.map(|_| TeamBarrier::wait_c as unsafe extern "C" fn(*const c_void) -> u32),
        barrier_ctx: barrier.map_or(std::ptr::null(), |b| {
            b as *const TeamBarrier as *const c_void
        }),
        chunks,
    };
    // SAFETY: per the contract; the image's entry catches every panic, so nothing unwinds into us.
    unsafe {
        call::call(
            kernel.0 as *const c_void,
            &mut env as *mut HostLaunchEnv as *mut c_void,
            args,
        )
    };
    // SAFETY: `failed` was initialised above.
    let failed = unsafe { std::ptr::addr_of!((*failure.as_ptr()).failed).read() };
    if failed == 0 {
        return Ok(());
    }
    // SAFETY: the kernel wrote the lengths and those prefixes of the buffers before setting `failed`.
    let (message, file, line, column) = unsafe { read_failure(failure.as_ptr()) };
    Err(PluginError::Panic {
        message,
        location: (!file.is_empty()).then_some((file, line, column)),
    })
}

/// Reads a failure record whose buffers are written only up to their recorded lengths:
/// (message, file, line, column).
///
/// # Safety
/// `p` points to a record `HostFailure::record` filled.
unsafe fn read_failure(p: *const HostFailure) -> (String, String, u32, u32) {
    use offload_model::abi::{FAILURE_FILE_CAP, FAILURE_MESSAGE_CAP};
    use std::ptr::addr_of;
    // SAFETY: per the contract, each buffer's prefix of its recorded length is initialised.
    unsafe {
        let text = |buf: *const u8, len: u32, cap: usize| {
            String::from_utf8_lossy(std::slice::from_raw_parts(buf, (len as usize).min(cap)))
                .into_owned()
        };
        let message = text(
            addr_of!((*p).message).cast(),
            addr_of!((*p).message_len).read(),
            FAILURE_MESSAGE_CAP,
        );
        let file = text(
            addr_of!((*p).file).cast(),
            addr_of!((*p).file_len).read(),
            FAILURE_FILE_CAP,
        );
        (
            message,
            file,
            addr_of!((*p).line).read(),
            addr_of!((*p).column).read(),
        )
    }
}

/// Physical memory: what host-elf device memory comes from.
fn host_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(size.max(0) as u64)
}

/// Whether this CPU has a feature of [`offload_model::device::X86_64_LEVELS`] (which `is_x86_feature_detected!` needs
/// spelled out); `None` for a feature this table does not know, whose image is then not run.
fn cpu_has(feature: &str) -> Option<bool> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        Some(match feature {
            "cmpxchg16b" => has!("cmpxchg16b"),
            "popcnt" => has!("popcnt"),
            "sse3" => has!("sse3"),
            "sse4.1" => has!("sse4.1"),
            "sse4.2" => has!("sse4.2"),
            "ssse3" => has!("ssse3"),
            "avx" => has!("avx"),
            "avx2" => has!("avx2"),
            "bmi1" => has!("bmi1"),
            "bmi2" => has!("bmi2"),
            "f16c" => has!("f16c"),
            "fma" => has!("fma"),
            "lzcnt" => has!("lzcnt"),
            "movbe" => has!("movbe"),
            "xsave" => has!("xsave"),
            "avx512f" => has!("avx512f"),
            "avx512bw" => has!("avx512bw"),
            "avx512cd" => has!("avx512cd"),
            "avx512dq" => has!("avx512dq"),
            "avx512vl" => has!("avx512vl"),
            _ => return None,
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = feature;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::{Device, HostElf, Plugin, ALIGN, HUGE_PAGE};

    #[test]
    // Miri has no mmap.
    #[cfg_attr(miri, ignore)]
    fn device_memory_is_zeroed_aligned_and_writable_on_both_sides_of_the_huge_page_path() {
        let device = HostElf
            .discover()
            .expect("host-elf devices")
            .devices
            .remove(0);
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
                let p = device.alloc(size).expect("allocation");
                assert_eq!(p % ALIGN as u64, 0, "{size}");
                // SAFETY: `p` is `size` bytes of device memory, which host-elf keeps in this process.
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
        let device = super::HostElfDevice::new(usize::MAX);
        // Miri has no mmap: the huge-page path only natively.
        let sizes: &[usize] = if cfg!(miri) {
            &[1, 200]
        } else {
            &[1, 200, 3 * HUGE_PAGE]
        };
        for &size in sizes {
            for align in [1, 8, 64, 128, 256, super::MAX_ALIGN] {
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
        let e = device.alloc_aligned(8, 2 * super::MAX_ALIGN).unwrap_err();
        assert!(matches!(e, super::PluginError::Alignment { .. }), "{e}");
    }

    #[test]
    fn device_memory_is_limited_to_its_capacity() {
        let device = super::HostElfDevice::new(1000);
        let p = device.alloc(500).expect("fits");
        assert!(
            matches!(
                device.alloc(500),
                Err(super::PluginError::OutOfMemory { .. })
            ),
            "500 + headers exceed 1000 bytes"
        );
        // SAFETY: allocated above, freed once.
        unsafe { device.free(p) };
        let p = device.alloc(500).expect("fits again");
        // SAFETY: as above.
        unsafe { device.free(p) };
    }

    #[test]
    fn every_level_feature_is_detected() {
        // A feature `cpu_has` does not spell out would make its level unloadable everywhere.
        for (level, features) in offload_model::device::X86_64_LEVELS {
            for f in features {
                assert!(
                    super::cpu_has(f).is_some(),
                    "{level} needs {f}, which is not detected"
                );
            }
        }
        assert_eq!(
            super::cpu_has("avx2"),
            Some(std::arch::is_x86_feature_detected!("avx2"))
        );
    }
}
