//! LLVM's libomptarget as the device layer under `OFFLOAD_RUNTIME=llvm`: the library opened at run time
//! ([`active`], on first use), and the fat binary's host images and entries registered with it, so that its host
//! plugin runs our kernels and its present table, the one C and C++ code compiled by clang uses, maps our data.
//!
//! [`Libomptarget::open`] loads `libomptarget.so.22` (or `OFFLOAD_LIBOMPTARGET`'s path) and checks every entry point
//! it needs; [`Libomptarget::register`] hands it one binary descriptor per host image (a package may have several:
//! its library's, its tests'), each with the entries that image defines (LLVM matches a kernel to its host entry by
//! the entry's index, and a kernel the image lacks would be called through a null address): kernels only, not device
//! globals, which stay the images' own copies. With `OFFLOAD_LLVM_GPU=1`, the package's cubins and HSA code objects
//! that define those kernels go into the same descriptor (PTX does not: LLVM's CUDA plugin loads ELF only), for
//! LLVM's CUDA and AMD plugins. [`Libomptarget::kernel`] launches one with the map list libomptarget maps, and the
//! data calls map, unmap and update. Our map-type bits are LLVM's (`offload_model::abi::map_type`); the region
//! layer's `on_llvm` translates the rest. We launch with `KernelArgsTy` version 2, which has no implicit argument,
//! and pass the kernel's `dyn_ptr` ourselves. LLVM's host plugin calls a kernel once, on the calling thread:
//! `dyn_ptr` is our launch description ([`LlvmLaunch`]), and the image's entry (`offload-device`'s `entry`) hands the
//! kernel's body to the plan, which runs it on our host team executor as host-elf does. A GPU plugin runs our kernel
//! as a bare kernel (it has no OpenMP kernel environment) on the grid and team-shared memory we give, with a null
//! `dyn_ptr`, as our CUDA plugin does; that path has never run on a GPU.

use crate::host::geometry::{host_limits, LaunchLimits};
use crate::plugin::error::PluginError;
use crate::plugin::gpu;
use crate::plugin::host_code::teams;
use crate::registry::{self, Image};
use offload_model::abi::{LlvmLaunch, LlvmThread};
use offload_model::device_kind::{x86_64_level, DeviceKind};
use offload_model::fatbin::{ImageFormat, OffloadEntry};
use std::collections::BTreeSet;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The multiprocessors (SMs, CUs) a GPU of LLVM's plugins is taken to have, for the teams of a launch whose clauses
/// leave them open: libomptarget does not say, and a work-shared loop is a grid-stride loop whatever the count.
pub const GPU_MULTIPROCESSORS: u32 = 128;

/// Where Debian's `liboffload-22-dev` puts the library.
pub const DEFAULT_PATH: &str = "/usr/lib/llvm-22/lib/libomptarget.so.22.1";

/// `__tgt_device_image`: one image and the entries it implements.
#[repr(C)]
pub struct DeviceImage {
    image_start: *const u8,
    image_end: *const u8,
    entries_begin: *const OffloadEntry,
    entries_end: *const OffloadEntry,
}

/// `__tgt_bin_desc`: a library's images and its host entries.
#[repr(C)]
pub struct BinDesc {
    num_device_images: i32,
    device_images: *const DeviceImage,
    host_entries_begin: *const OffloadEntry,
    host_entries_end: *const OffloadEntry,
}

/// LLVM's `KernelArgsTy` (LLVM 19 to 22), its launch record. We pass version 2, with which the plugin adds no
/// implicit first argument: our own first argument, the launch description (`offload_model::abi::LlvmLaunch`), takes
/// `dyn_ptr`'s place.
#[repr(C)]
pub struct KernelArgsTy {
    version: u32,
    num_args: u32,
    arg_base_ptrs: *const *mut c_void,
    arg_ptrs: *const *mut c_void,
    arg_sizes: *const i64,
    arg_types: *const i64,
    arg_names: *const *const c_void,
    arg_mappers: *const *const c_void,
    tripcount: u64,
    flags: u64,
    num_teams: [u32; 3],
    thread_limit: [u32; 3],
    dyn_cgroup_mem: u32,
}

const _: () = {
    assert!(size_of::<OffloadEntry>() == 56);
    assert!(size_of::<DeviceImage>() == 32);
    assert!(size_of::<BinDesc>() == 32);
    assert!(size_of::<KernelArgsTy>() == 104);
    assert!(std::mem::offset_of!(KernelArgsTy, tripcount) == 56);
    assert!(std::mem::offset_of!(KernelArgsTy, num_teams) == 72);
    assert!(std::mem::offset_of!(KernelArgsTy, dyn_cgroup_mem) == 96);
};

/// Why libomptarget cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LlvmError {
    /// The library could not be loaded.
    #[error(
        "cannot load LLVM's libomptarget from {path}: {source} (install `liboffload-22-dev`, or name the library with \
         OFFLOAD_LIBOMPTARGET)"
    )]
    Load {
        /// The library's path.
        path: PathBuf,
        /// Why.
        source: libloading::Error,
    },
    /// An entry point is missing.
    #[error("{path} has no `{symbol}`: it is not LLVM 22's libomptarget")]
    Symbol {
        /// The library's path.
        path: PathBuf,
        /// The entry point.
        symbol: &'static str,
    },
    /// Nothing to register.
    #[error("the program has no x86-64 image for LLVM's host plugin to run")]
    NoImage,
}

type RegisterLib = unsafe extern "C" fn(*mut BinDesc);
type TargetKernel =
    unsafe extern "C" fn(*mut c_void, i64, i32, i32, *mut c_void, *mut KernelArgsTy) -> i32;
type DataMapper = unsafe extern "C" fn(
    *mut c_void,
    i64,
    i32,
    *mut *mut c_void,
    *mut *mut c_void,
    *mut i64,
    *mut i64,
    *mut *const c_void,
    *mut *const c_void,
);
type MappedPtr = unsafe extern "C" fn(*const c_void, i32) -> *mut c_void;
type IsPresent = unsafe extern "C" fn(*const c_void, i32) -> i32;
type NumDevices = unsafe extern "C" fn() -> i32;
type TargetAlloc = unsafe extern "C" fn(usize, i32) -> *mut c_void;
type TargetFree = unsafe extern "C" fn(*mut c_void, i32);
type TargetMemcpy =
    unsafe extern "C" fn(*mut c_void, *const c_void, usize, usize, usize, i32, i32) -> i32;
type AssociatePtr = unsafe extern "C" fn(*const c_void, *const c_void, usize, usize, i32) -> i32;
type DisassociatePtr = unsafe extern "C" fn(*const c_void, i32) -> i32;
type UidFromDevice = unsafe extern "C" fn(i32) -> *const std::ffi::c_char;

/// The library, open, with the entry points this layer calls.
pub struct Libomptarget {
    register_lib: RegisterLib,
    target_kernel: TargetKernel,
    data_begin: DataMapper,
    data_end: DataMapper,
    data_update: DataMapper,
    mapped_ptr: MappedPtr,
    is_present: IsPresent,
    num_devices: NumDevices,
    uid_from_device: UidFromDevice,
    /// What each device asked was found to be: the host plugin's or not.
    on_host: std::sync::Mutex<Vec<(i32, bool)>>,
    /// OpenMP's device memory routines, as libomptarget answers them for its devices.
    pub memory: MemoryRoutines,
    // Last: the functions above point into it.
    _lib: libloading::Library,
}

pub use offload_model::abi::map_type::{ALWAYS, DELETE, FROM, TO};
use offload_model::abi::map_type::{LITERAL, TARGET_PARAM};

/// libomptarget's `omp_target_alloc`, `omp_target_free`, `omp_target_memcpy`, `omp_target_associate_ptr` and
/// `omp_target_disassociate_ptr`, with their C signatures (the API layer's routines forward to them for its devices).
pub struct MemoryRoutines {
    /// `omp_target_alloc(size, device)`.
    pub alloc: TargetAlloc,
    /// `omp_target_free(ptr, device)`.
    pub free: TargetFree,
    /// `omp_target_memcpy(dst, src, length, dst_offset, src_offset, dst_device, src_device)`.
    pub memcpy: TargetMemcpy,
    /// `omp_target_associate_ptr(host, device_ptr, size, device_offset, device)`.
    pub associate: AssociatePtr,
    /// `omp_target_disassociate_ptr(host, device)`.
    pub disassociate: DisassociatePtr,
}

/// One map-list entry as libomptarget takes it: base address (a literal's bits, which may hold padding), begin, size
/// in bytes, map type.
#[derive(Clone, Copy, Debug)]
pub struct Map {
    base: MaybeUninit<*mut c_void>,
    begin: *mut c_void,
    size: i64,
    map_type: i64,
}

impl Map {
    /// A data construct's entry for `size` bytes at `begin`, of the object (slice) at `base`.
    pub fn data(base: *mut c_void, begin: *mut c_void, size: usize, map_type: u64) -> Map {
        Map {
            base: MaybeUninit::new(base),
            begin,
            size: size as i64,
            map_type: map_type as i64,
        }
    }

    /// A data construct's entry for the slice `s`.
    pub fn slice_data<T>(s: *mut [T], map_type: u64) -> Map {
        Map::data(s.cast(), s.cast(), s.len() * size_of::<T>(), map_type)
    }

    /// The same entry as a kernel argument (the kernel gets the device address of its base).
    pub fn argument(self) -> Map {
        Map {
            map_type: self.map_type | TARGET_PARAM as i64,
            ..self
        }
    }

    /// The entry as it enters (a data construct's entry, a kernel's argument) on `device` of `lib`: a `from` or
    /// `alloc` entry is also copied in. libomptarget's host plugin allocates with `malloc`, so region code reading
    /// such a copy before writing it would read uninitialised memory, which safe Rust must never do (our runtime
    /// zero-fills device memory); with `to` it starts as the host's values, a value OpenMP leaves unspecified anyway.
    /// Literals and present entries are not copied (an `always` entry is asked: `always` would copy present data).
    fn initialised(self, lib: &Libomptarget, device: i32) -> Map {
        let bits = self.map_type as u64;
        if bits & (LITERAL | TO) != 0 || (bits & ALWAYS != 0 && lib.is_present(self.begin, device))
        {
            return self;
        }
        Map {
            map_type: self.map_type | TO as i64,
            ..self
        }
    }

    /// The entry without the map-type bits `bits` (an exit on unwind, which copies nothing back).
    pub fn clear(&mut self, bits: u64) {
        self.map_type &= !(bits as i64);
    }

    /// A kernel argument passed as is: its 8 bytes (a length, a value of 8 bytes or less, padding included).
    pub fn literal(bits: MaybeUninit<u64>) -> Map {
        Map {
            // SAFETY: both are 8 bytes that may be uninitialised; libomptarget passes them on unread.
            base: unsafe {
                std::mem::transmute::<MaybeUninit<u64>, MaybeUninit<*mut c_void>>(bits)
            },
            begin: std::ptr::null_mut(),
            size: 0,
            map_type: (LITERAL | TARGET_PARAM) as i64,
        }
    }
}

static ACTIVE: OnceLock<Result<Libomptarget, LlvmError>> = OnceLock::new();

/// Which host data the running kernels and data operations use, per range, as our present tables track it.
static IN_USE: InUse = InUse {
    uses: std::sync::Mutex::new(Vec::new()),
    changed: std::sync::Condvar::new(),
};

/// The host ranges running kernels and data operations use. A data operation (which copies) waits only for those
/// using its data, and holds it alone while it runs; a kernel waits only for a data operation running on its data
/// (never for one that waits: kernels that wait for each other, as kernels of tasks may, all start) and, where it
/// copies into a copy others use (an `always` map), is refused instead, as our runtime refuses it: waiting could
/// deadlock with a kernel that waits for it.
struct InUse {
    uses: std::sync::Mutex<Vec<Use>>,
    changed: std::sync::Condvar,
}

/// One running kernel's or data operation's host ranges.
struct Use {
    id: usize,
    ranges: Vec<(usize, usize)>,
    data: bool,
}

/// A kernel's or data operation's use in [`IN_USE`], by id, until dropped.
struct Held(usize);

fn overlap(a: &[(usize, usize)], b: &[(usize, usize)]) -> bool {
    a.iter()
        .any(|&(x, y)| b.iter().any(|&(u, v)| x < v && u < y))
}

/// The host ranges of `maps`' data (literals have none): each entry's whole object and the part mapped.
fn ranges(maps: &[Map]) -> Vec<(usize, usize)> {
    maps.iter()
        .filter(|m| m.map_type as u64 & LITERAL == 0 && m.size > 0)
        .map(|m| {
            // SAFETY: a data entry's base is an initialised pointer (only literals carry other bits).
            let base = unsafe { m.base.assume_init() } as usize;
            let begin = m.begin as usize;
            (base.min(begin), begin + m.size as usize)
        })
        .collect()
}

static NEXT_USE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

impl InUse {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Use>> {
        self.uses.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A kernel over `ranges` starts; `copies`: it copies into present data (an `always` map). `Err` says why not.
    fn kernel(&self, ranges: Vec<(usize, usize)>, copies: bool) -> Result<Held, String> {
        let mut uses = self.lock();
        loop {
            if uses.iter().any(|u| u.data && overlap(&u.ranges, &ranges)) {
                uses = self.changed.wait(uses).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            if copies && uses.iter().any(|u| overlap(&u.ranges, &ranges)) {
                return Err("an `always` map would copy into a device copy that a running region on another \
                            thread uses, and race with it (wait for that region to return first)"
                    .into());
            }
            return Ok(self.hold(&mut uses, ranges, false));
        }
    }

    /// A data operation over `ranges` starts, once nothing else uses them.
    fn data(&self, ranges: Vec<(usize, usize)>) -> Held {
        let mut uses = self.lock();
        while uses.iter().any(|u| overlap(&u.ranges, &ranges)) {
            uses = self.changed.wait(uses).unwrap_or_else(|p| p.into_inner());
        }
        self.hold(&mut uses, ranges, true)
    }

    fn hold(&self, uses: &mut Vec<Use>, ranges: Vec<(usize, usize)>, data: bool) -> Held {
        let id = NEXT_USE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        uses.push(Use { id, ranges, data });
        Held(id)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut uses = IN_USE.lock();
        if let Some(k) = uses.iter().position(|u| u.id == self.0) {
            uses.swap_remove(k);
        }
        drop(uses);
        IN_USE.changed.notify_all();
    }
}

/// Under `OFFLOAD_RUNTIME=llvm`, the library, opened and the program registered with it on first use (or why it
/// cannot be); `None` under our own runtime.
pub fn active() -> Option<Result<&'static Libomptarget, &'static LlvmError>> {
    let icv = crate::env::icv();
    if icv.runtime != crate::env::Runtime::Llvm {
        return None;
    }
    let lib = ACTIVE.get_or_init(|| {
        let lib = Libomptarget::open(icv.libomptarget.as_deref())?;
        let registered = lib.register(icv.llvm_gpu)?;
        crate::observe::plugin_note(
            crate::observe::Watch::now(),
            "llvm",
            &format!("registered with libomptarget: {}", registered.join(", ")),
        );
        Ok(lib)
    });
    Some(lib.as_ref())
}

/// The entry of the kernel named `symbol` in the program's table.
pub fn entry(symbol: &str) -> Option<&'static OffloadEntry> {
    registry::descriptor()
        .entries
        .iter()
        .find(|e| registry::entry_symbol(e).to_bytes() == symbol.as_bytes())
}

impl Libomptarget {
    /// Opens the library at `path` (default [`DEFAULT_PATH`]) and looks up its entry points.
    pub fn open(path: Option<&Path>) -> Result<Libomptarget, LlvmError> {
        let path = path.map_or_else(|| PathBuf::from(DEFAULT_PATH), Path::to_path_buf);
        // SAFETY: libomptarget's initialisers only set up its own state.
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|source| LlvmError::Load {
            path: path.clone(),
            source,
        })?;
        macro_rules! get {
            ($name:literal) => {
                // SAFETY: the types above are LLVM 22's signatures of these symbols.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }.map_err(|_| {
                    LlvmError::Symbol {
                        path: path.clone(),
                        symbol: $name,
                    }
                })?
            };
        }
        Ok(Libomptarget {
            register_lib: get!("__tgt_register_lib"),
            target_kernel: get!("__tgt_target_kernel"),
            data_begin: get!("__tgt_target_data_begin_mapper"),
            data_end: get!("__tgt_target_data_end_mapper"),
            data_update: get!("__tgt_target_data_update_mapper"),
            mapped_ptr: get!("omp_get_mapped_ptr"),
            is_present: get!("omp_target_is_present"),
            num_devices: get!("omp_get_num_devices"),
            uid_from_device: get!("omp_get_uid_from_device"),
            on_host: std::sync::Mutex::new(Vec::new()),
            memory: MemoryRoutines {
                alloc: get!("omp_target_alloc"),
                free: get!("omp_target_free"),
                memcpy: get!("omp_target_memcpy"),
                associate: get!("omp_target_associate_ptr"),
                disassociate: get!("omp_target_disassociate_ptr"),
            },
            _lib: lib,
        })
    }

    /// Registers the fat binary's images: one descriptor per x86-64 image (with the entries it defines), holding it
    /// and the package's GPU images that define them too; returns what it registered (each image's architecture and
    /// format), for `OFFLOAD_INFO`. The descriptors live as long as the program: libomptarget keeps pointers into
    /// them.
    pub fn register(&self, with_gpus: bool) -> Result<Vec<String>, LlvmError> {
        let desc = registry::descriptor();
        // A package may have several host images (its library's, its tests' and benches'), each built for one or
        // more x86-64 levels: of the images with the same kernels, the baseline's (the lowest level, which every
        // x86-64 CPU runs).
        let level = |i: &Image| x86_64_level(i.arch).map_or(0, |(l, _)| l as u32);
        let mut host: Vec<(&Image, BTreeSet<&[u8]>)> = Vec::new();
        for i in desc.images.iter().filter(|i| {
            i.format == ImageFormat::SharedObject
                && i.triple.starts_with("x86_64")
                && DeviceKind::of_image(i.triple, i.arch) == Some(DeviceKind::Host)
        }) {
            let kernels = kernels_in(i);
            match host
                .iter_mut()
                .find(|(h, k)| h.package_tag == i.package_tag && *k == kernels)
            {
                Some((h, _)) if level(i) < level(h) => *h = i,
                Some(_) => {}
                None => host.push((i, kernels)),
            }
        }
        // The GPU images LLVM's CUDA and AMD plugins can load: cubins (not PTX, which they cannot compile) and HSA
        // code objects, with the kernels each holds. Only when asked (`OFFLOAD_LLVM_GPU=1`): a GPU whose plugin
        // cannot load one of them, or that meets a descriptor without an image for it (a C library built for the
        // host alone), stops the process at its first use, and even `omp_get_uid_from_device` uses it.
        let gpu: Vec<(&Image, BTreeSet<&[u8]>)> = desc
            .images
            .iter()
            .filter(|i| with_gpus && matches!(i.format, ImageFormat::Cubin | ImageFormat::Hsaco))
            .map(|i| (i, kernels_in(i)))
            .collect();
        // Each entry with the one image that defines it: LLVM pairs an image's kernels with its entries by index,
        // and a kernel the image lacks would be called through a null address.
        let mut taken = BTreeSet::new();
        let mut registered = Vec::new();
        for (image, kernels) in &host {
            let entries: Vec<OffloadEntry> = desc
                .entries
                .iter()
                .filter(|e| {
                    let name = registry::entry_symbol(e).to_bytes();
                    // Kernels only. Device globals stay the images' own copies: libomptarget would pair an
                    // immutable static with its copy in the image's read-only memory, which an update writes.
                    e.data == image.package_tag
                        && !e.is_global()
                        && kernels.contains(name)
                        && taken.insert(name)
                })
                .map(|e| OffloadEntry { data: 0, ..*e })
                .collect();
            if entries.is_empty() {
                continue;
            }
            // The image's entries, as one array for the host table and each image's.
            let entries: &'static [OffloadEntry] = Vec::leak(entries);
            let range = entries.as_ptr_range();
            // With the package's GPU images that hold every one of these kernels, in the same descriptor: a host
            // entry belongs to one descriptor, and each device takes the first image it can run.
            let images: Vec<&Image> = std::iter::once(*image)
                .chain(
                    gpu.iter()
                        .filter(|(g, k)| {
                            g.package_tag == image.package_tag
                                && entries
                                    .iter()
                                    .all(|e| k.contains(registry::entry_symbol(e).to_bytes()))
                        })
                        .map(|(g, _)| *g),
                )
                .collect();
            registered.extend(images.iter().map(|i| format!("{} {}", i.arch, i.format)));
            let images: Vec<DeviceImage> = images
                .into_iter()
                .map(|i| DeviceImage {
                    image_start: i.bytes.as_ptr(),
                    image_end: i.bytes.as_ptr_range().end,
                    entries_begin: range.start,
                    entries_end: range.end,
                })
                .collect();
            let images: &'static [DeviceImage] = Vec::leak(images);
            let bin = Box::leak(Box::new(BinDesc {
                num_device_images: images.len() as i32,
                device_images: images.as_ptr(),
                host_entries_begin: range.start,
                host_entries_end: range.end,
            }));
            // SAFETY: a descriptor over static image bytes and leaked (so static) entries, as the function takes.
            unsafe { (self.register_lib)(bin) };
        }
        if registered.is_empty() {
            return Err(LlvmError::NoImage);
        }
        Ok(registered)
    }

    /// What a launch on `device` takes: its host plugin's device is the host, as host-elf's is, with the host's
    /// limits; a GPU plugin's takes our GPU plugins' defaults (for [`GPU_MULTIPROCESSORS`]) and limits.
    pub fn limits(&self, device: i32) -> LaunchLimits {
        if self.runs_on_host(device) {
            return host_limits();
        }
        gpu::limits(
            GPU_MULTIPROCESSORS,
            gpu::MAX_BLOCK_THREADS,
            (
                "the most blocks a launch of ours takes",
                "the most threads a GPU block has",
            ),
        )
    }

    /// Whether `device` is one of libomptarget's host plugin (its UID names the host's architecture, `x86_64-0`),
    /// whose kernels run our launch description on the host's cores; else a GPU plugin's, which runs a kernel as a
    /// grid. Asked once per device (a C library may have registered GPU images of its own, whatever
    /// `OFFLOAD_LLVM_GPU` says), which initialises it.
    pub fn runs_on_host(&self, device: i32) -> bool {
        let mut known = self.on_host.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(_, h)) = known.iter().find(|(d, _)| *d == device) {
            return h;
        }
        // SAFETY: a lookup by device number (a valid one: the callers' devices are libomptarget's). It initialises
        // the device, loading its images.
        let uid = unsafe { (self.uid_from_device)(device) };
        forget_image_files(device);
        // SAFETY: a non-null UID is a C string libomptarget keeps for the device's lifetime.
        let host = !uid.is_null()
            && unsafe { std::ffi::CStr::from_ptr(uid) }
                .to_bytes()
                .starts_with(std::env::consts::ARCH.as_bytes());
        known.push((device, host));
        host
    }

    /// `omp_get_num_devices()` as libomptarget answers it.
    pub fn num_devices(&self) -> i32 {
        // SAFETY: no arguments; callable once the library is initialised (registration does it).
        unsafe { (self.num_devices)() }
    }

    /// `omp_get_mapped_ptr(p, device)`.
    #[allow(clippy::not_unsafe_ptr_arg_deref)] // a key of the present table: libomptarget never reads through it
    pub fn mapped_ptr(&self, p: *const c_void, device: i32) -> *mut c_void {
        // SAFETY: a lookup in the present table; `p` is not dereferenced.
        unsafe { (self.mapped_ptr)(p, device) }
    }

    /// `omp_target_is_present(p, device)`.
    #[allow(clippy::not_unsafe_ptr_arg_deref)] // a key of the present table: libomptarget never reads through it
    pub fn is_present(&self, p: *const c_void, device: i32) -> bool {
        // SAFETY: a lookup in the present table; `p` is not dereferenced.
        unsafe { (self.is_present)(p, device) != 0 }
    }

    /// `target update` of `maps` on `device`.
    ///
    /// # Safety
    /// As [`Libomptarget::exit`].
    pub unsafe fn update(&self, device: i32, maps: &[Map]) {
        // SAFETY: forwarded.
        unsafe { self.data(self.data_update, device, maps) }
    }

    /// `target enter data` of `maps` on `device`.
    ///
    /// # Safety
    /// Every entry describes host memory valid for its size until the matching exit.
    pub unsafe fn enter(&self, device: i32, maps: &[Map]) {
        let maps: Vec<Map> = maps.iter().map(|m| m.initialised(self, device)).collect();
        // SAFETY: forwarded.
        unsafe { self.data(self.data_begin, device, &maps) }
    }

    /// `target exit data` of `maps` on `device`.
    ///
    /// # Safety
    /// As [`Libomptarget::enter`], and writable where the map type has `FROM`.
    pub unsafe fn exit(&self, device: i32, maps: &[Map]) {
        // SAFETY: forwarded.
        unsafe { self.data(self.data_end, device, maps) }
    }

    unsafe fn data(&self, f: DataMapper, device: i32, maps: &[Map]) {
        // Alone on its data: a copy must not meet a kernel another thread runs on the same data.
        let _alone = IN_USE.data(ranges(maps));
        let (mut base, mut begin, mut size, mut types) = split(maps.iter());
        // SAFETY: four arrays of `maps.len()` entries, no names or mappers (null is allowed).
        unsafe {
            f(
                std::ptr::null_mut(),
                device as i64,
                maps.len() as i32,
                base.as_mut_ptr().cast(),
                begin.as_mut_ptr(),
                size.as_mut_ptr(),
                types.as_mut_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        forget_image_files(device);
    }

    /// Launches the kernel of `entry` on `device` with the map list `maps` (in kernel-argument order) as `teams` teams
    /// of `threads` threads with `team_shared` bytes of team-shared memory each, run on our host team executor
    /// (the plan the kernel gets as its first argument); `Err` if libomptarget did not run it or the region failed.
    /// After a failure libomptarget copies nothing back: the plan clears the `FROM` bits of the map types before
    /// libomptarget maps the arguments out, so it only releases them, as our runtime does.
    ///
    /// # Safety
    /// `entry` was registered, and every entry of `maps` describes memory valid for its size (writable where `FROM`)
    /// until the call returns.
    pub unsafe fn kernel(
        &self,
        device: i32,
        entry: &OffloadEntry,
        maps: &[Map],
        (teams, threads, team_shared): (u32, u32, usize),
    ) -> Result<(), Launched> {
        // The plan first, in `dyn_ptr`'s place, as a literal (a GPU kernel's `dyn_ptr` is null, as our CUDA plugin
        // passes it); then the map list.
        let on_host = self.runs_on_host(device);
        let first = Map::literal(MaybeUninit::new(0));
        let maps: Vec<Map> = maps.iter().map(|m| m.initialised(self, device)).collect();
        let (mut base, begin, size, mut types) = split(std::iter::once(&first).chain(&maps));
        // One pointer for libomptarget and the plan: both read or write the map types through it.
        let types_ptr = types.as_mut_ptr();
        let plan = Plan {
            head: LlvmLaunch {
                magic: LlvmLaunch::MAGIC,
                run: run_plan,
            },
            teams,
            threads,
            team_shared,
            // SAFETY: one past the plan's own entry, inside the vector.
            types: unsafe { types_ptr.add(1) },
            count: maps.len(),
            outcome: std::sync::Mutex::new(None),
        };
        // The host plugin calls the kernel once, and the plan runs its teams; a GPU plugin launches our geometry
        // itself, as a bare kernel (ours have no OpenMP kernel environment), with its team-shared memory.
        let (grid, dyn_cgroup_mem) = if on_host {
            base[0] = MaybeUninit::new(LlvmLaunch::tagged(&plan.head) as *mut c_void);
            ((1, 1), 0)
        } else {
            // 15 more: our AMD kernels start team-shared memory at their static LDS rounded up to 16 bytes, where
            // LLVM's AMD plugin adds the dynamic amount to the static size as it is.
            let padded = if team_shared > 0 { team_shared + 15 } else { 0 };
            let shared = u32::try_from(padded).map_err(|_| {
                Launched::Refused(format!("{team_shared} bytes of team-shared memory"))
            })?;
            ((teams, threads), shared)
        };
        let mut args = KernelArgsTy {
            version: 2,
            num_args: maps.len() as u32 + 1,
            arg_base_ptrs: base.as_ptr().cast(),
            arg_ptrs: begin.as_ptr(),
            arg_sizes: size.as_ptr(),
            arg_types: types_ptr,
            arg_names: std::ptr::null(),
            arg_mappers: std::ptr::null(),
            tripcount: 0,
            flags: 0,
            num_teams: [grid.0, 1, 1],
            thread_limit: [grid.1, 1, 1],
            dyn_cgroup_mem,
        };
        let copies = maps
            .iter()
            .any(|m| m.map_type as u64 & (LITERAL | ALWAYS) == ALWAYS);
        let _running = IN_USE
            .kernel(ranges(&maps), copies)
            .map_err(Launched::Busy)?;
        // SAFETY: the arrays and the plan outlive the call; `entry.address` is the host key registered for the
        // kernel, whose entry hands its body to the plan.
        let status = unsafe {
            (self.target_kernel)(
                std::ptr::null_mut(),
                device as i64,
                grid.0 as i32,
                grid.1 as i32,
                entry.address.cast_mut(),
                &mut args,
            )
        };
        forget_image_files(device);
        let outcome = plan
            .outcome
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        match (status, outcome) {
            (0, Some(Ok(()))) => Ok(()),
            // A GPU kernel's failure (a trap) is libomptarget's to report: it stops the process.
            (0, None) if !on_host => Ok(()),
            (_, Some(Err(e))) => Err(Launched::Failed(e)),
            (0, None) => Err(Launched::Failed(PluginError::Launch {
                reason:
                    "the kernel ran without our launch description (an image from another build?)"
                        .into(),
            })),
            (status, _) => Err(Launched::NotRun(status)),
        }
    }
}

/// How a launch through libomptarget went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Launched {
    /// libomptarget did not run the kernel (its status).
    #[error("libomptarget did not launch it (status {0})")]
    NotRun(i32),
    /// The region failed while it ran.
    #[error("{0}")]
    Failed(PluginError),
    /// The call was refused before anything ran, for this reason.
    #[error("{0}")]
    Refused(String),
    /// Its data is in use by a running region, for this reason; nothing ran.
    #[error("{0}")]
    Busy(String),
}

/// Our launch description ([`LlvmLaunch`] first, which the kernel's entry reads) and what only the runtime reads.
#[repr(C)]
struct Plan {
    head: LlvmLaunch,
    teams: u32,
    threads: u32,
    team_shared: usize,
    /// The map types libomptarget maps the arguments out with (`count` of them), whose `FROM` bits a failure clears.
    types: *mut i64,
    count: usize,
    outcome: std::sync::Mutex<Option<Result<(), PluginError>>>,
}

/// [`LlvmLaunch::run`]: the kernel's threads on the host team executor, as host-elf runs them.
///
/// # Safety
/// `plan` is a [`Plan`]'s head, and `thread(body, ..)` runs the kernel's body for a thread.
unsafe extern "C" fn run_plan(
    plan: *const LlvmLaunch,
    body: *const c_void,
    thread: LlvmThread,
    kind: u32,
) {
    // SAFETY: per the contract (`head` is the plan's first field).
    let plan = unsafe { &*(plan as *const Plan) };
    // The entry's body is `Sync`: its threads may share it.
    let body = body as usize;
    // Nothing may unwind into libomptarget; the executor's own failures are results.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: per the contract; the environment is the thread's for the call.
        unsafe {
            teams::run(plan.teams, plan.threads, plan.team_shared, &|env| {
                thread(body as *const c_void, env, kind)
            })
        }
    }))
    .unwrap_or_else(|p| {
        Err(PluginError::Launch {
            reason: format!(
                "the host team executor panicked: {}",
                crate::host::panic::panic_message(&*p)
            ),
        })
    });
    if outcome.is_err() {
        // SAFETY: `types` holds `count` map types that libomptarget reads again only after this call returns.
        let types = unsafe { std::slice::from_raw_parts_mut(plan.types, plan.count) };
        for t in types {
            *t &= !(FROM as i64);
        }
    }
    *plan.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
}

/// Removes the files LLVM's host plugin wrote our images to, once a device has loaded them (on its first use): it
/// writes each image to `/tmp/tmpfile_*` (a fixed directory, whatever `$TMPDIR` says), opens it with `dlopen` and
/// never deletes it (6 MB a run for the test package). The loaded library stays mapped after the name is gone. Only
/// files this process has mapped executable go.
fn forget_image_files(device: i32) {
    static DONE: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if done.contains(&device) {
        return;
    }
    done.push(device);
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    let mut seen = BTreeSet::new();
    for line in maps.lines() {
        // `start-end perms offset dev inode path`
        let mut fields = line.split_whitespace();
        let perms = fields.nth(1).unwrap_or("");
        let Some(path) = fields.nth(3).map(Path::new) else {
            continue;
        };
        let ours = perms.contains('x')
            && path.parent() == Some(Path::new("/tmp"))
            && path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("tmpfile_"));
        if ours && seen.insert(path) {
            // Best effort: another device's first use may have removed it already.
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The kernels a host image exports (its dynamic symbols named as our entries are; device globals too, which
/// registration leaves out).
fn kernels_in(image: &Image) -> BTreeSet<&'static [u8]> {
    use object::{Object, ObjectSymbol};
    let Ok(file) = object::File::parse(image.bytes) else {
        return BTreeSet::new();
    };
    // A host image and an HSA code object export their kernels; a cubin lists them in its symbol table.
    let symbols: Vec<_> = if image.format == ImageFormat::Cubin {
        file.symbols().collect()
    } else {
        file.dynamic_symbols().collect()
    };
    symbols
        .into_iter()
        .filter(|s| s.is_definition())
        .filter_map(|s| s.name_bytes().ok())
        .filter(|n| n.starts_with(b"__omp_offloading_"))
        .collect()
}

type Arrays = (
    Vec<MaybeUninit<*mut c_void>>,
    Vec<*mut c_void>,
    Vec<i64>,
    Vec<i64>,
);

fn split<'a>(maps: impl Iterator<Item = &'a Map> + Clone) -> Arrays {
    (
        maps.clone().map(|m| m.base).collect(),
        maps.clone().map(|m| m.begin).collect(),
        maps.clone().map(|m| m.size).collect(),
        maps.map(|m| m.map_type).collect(),
    )
}
