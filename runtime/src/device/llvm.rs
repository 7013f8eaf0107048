//! LLVM's libomptarget as the device layer under `OFFLOAD_RUNTIME=llvm` (issue 29): the library opened at run time
//! ([`active`], on first use), and the fat binary's host images and entries registered with it, so that its host
//! plugin runs our kernels and its present table, the one C and C++ code compiled by clang uses, maps our data.
//!
//! [`Libomptarget::open`] loads `libomptarget.so.22` (or `OFFLOAD_LIBOMPTARGET`'s path) and checks every entry point
//! it needs; [`Libomptarget::register`] hands it one binary descriptor per package, built from the registry's x86-64
//! image and that package's entries (LLVM matches a kernel to its host entry by the entry's index, so each
//! descriptor lists only the kernels its image holds); [`Libomptarget::kernel`] launches one with the map list
//! libomptarget maps, and the data calls map, unmap and update. Our map-type bits are LLVM's
//! (`offload_model::abi::map_type`); the region layer's `on_llvm` translates the rest. Its host plugin calls a kernel
//! once, on the calling thread, with no launch environment of ours: the image's entry then runs it as one team of one
//! thread (`offload-device`'s `entry`). Not yet: teams on the host's cores, reductions and team-shared memory there,
//! and the GPU images (LLVM's host plugin aborts on an image it cannot take, so only x86-64 ones are registered).

use crate::registry::{self, Image};
use offload_model::device_kind::{x86_64_level, DeviceKind};
use offload_model::fatbin::{ImageFormat, OffloadEntry};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

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

/// `KernelArgsTy`, version 3 (LLVM 19 to 22): with it the plugin passes the kernel its implicit first argument.
#[repr(C)]
pub struct KernelArgs {
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
    assert!(size_of::<KernelArgs>() == 104);
    assert!(std::mem::offset_of!(KernelArgs, tripcount) == 56);
    assert!(std::mem::offset_of!(KernelArgs, num_teams) == 72);
    assert!(std::mem::offset_of!(KernelArgs, dyn_cgroup_mem) == 96);
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
    /// Device globals are not paired with libomptarget's copies yet.
    #[error(
        "the program has device globals (`#[declare_target] static`), which are not paired with LLVM's \
         libomptarget yet: its regions would use the image's own copies, which `target_update!` does not reach"
    )]
    Globals,
}

type RegisterLib = unsafe extern "C" fn(*mut BinDesc);
type TargetKernel =
    unsafe extern "C" fn(*mut c_void, i64, i32, i32, *mut c_void, *mut KernelArgs) -> i32;
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
    // Last: the functions above point into it.
    _lib: libloading::Library,
}

pub use offload_model::abi::map_type::{ALWAYS, DELETE, FROM, TO};
use offload_model::abi::map_type::{LITERAL, TARGET_PARAM};

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

/// Kernels run holding it shared, data operations (which copy) alone.
static IN_USE: RwLock<()> = RwLock::new(());

/// Under `OFFLOAD_RUNTIME=llvm`, the library, opened and the program registered with it on first use (or why it
/// cannot be); `None` under our own runtime.
pub fn active() -> Option<Result<&'static Libomptarget, &'static LlvmError>> {
    let icv = crate::env::icv();
    if icv.runtime != crate::env::Runtime::Llvm {
        return None;
    }
    let lib = ACTIVE.get_or_init(|| {
        let lib = Libomptarget::open(icv.libomptarget.as_deref())?;
        lib.register()?;
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
            _lib: lib,
        })
    }

    /// Registers the fat binary's x86-64 images, one descriptor per package (with that package's entries), and
    /// returns how many it registered. The descriptors live as long as the program: libomptarget keeps pointers
    /// into them.
    pub fn register(&self) -> Result<usize, LlvmError> {
        let desc = registry::descriptor();
        if desc.has_globals {
            return Err(LlvmError::Globals);
        }
        // Per package its baseline host image (the lowest x86-64 level, which every x86-64 CPU runs).
        let level = |i: &Image| x86_64_level(i.arch).map_or(0, |(l, _)| l as u32);
        let mut host: Vec<&Image> = Vec::new();
        for i in desc.images.iter().filter(|i| {
            i.format == ImageFormat::SharedObject
                && i.triple.starts_with("x86_64")
                && DeviceKind::of_image(i.triple, i.arch) == Some(DeviceKind::Host)
        }) {
            match host.iter_mut().find(|h| h.package_tag == i.package_tag) {
                Some(h) if level(i) < level(h) => *h = i,
                Some(_) => {}
                None => host.push(i),
            }
        }
        if host.is_empty() {
            return Err(LlvmError::NoImage);
        }
        for image in &host {
            // The package's entries, as one array for the host table and the image's: LLVM pairs them by index.
            let entries: &'static [OffloadEntry] = Vec::leak(
                desc.entries
                    .iter()
                    .filter(|e| e.data == image.package_tag && !e.is_global())
                    .map(|e| OffloadEntry { data: 0, ..*e })
                    .collect(),
            );
            let range = entries.as_ptr_range();
            let device_image = Box::leak(Box::new(DeviceImage {
                image_start: image.bytes.as_ptr(),
                image_end: image.bytes.as_ptr_range().end,
                entries_begin: range.start,
                entries_end: range.end,
            }));
            let bin = Box::leak(Box::new(BinDesc {
                num_device_images: 1,
                device_images: device_image,
                host_entries_begin: range.start,
                host_entries_end: range.end,
            }));
            // SAFETY: a descriptor over static image bytes and leaked (so static) entries, as the function takes.
            unsafe { (self.register_lib)(bin) };
        }
        Ok(host.len())
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
        // SAFETY: forwarded.
        unsafe { self.data(self.data_begin, device, maps) }
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
        // Alone: a copy must not meet a kernel another thread runs on the same data (our runtime refuses that per
        // buffer; here every data operation waits for the running kernels, and they for it).
        let _alone = IN_USE.write().unwrap_or_else(|p| p.into_inner());
        let (mut base, mut begin, mut size, mut types) = split(maps);
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
        }
    }

    /// Launches the kernel of `entry` on `device` with the map list `maps` (in kernel-argument order); returns
    /// libomptarget's status (0: it ran).
    ///
    /// # Safety
    /// `entry` was registered, and every entry of `maps` describes memory valid for its size (writable where `FROM`)
    /// until the call returns.
    pub unsafe fn kernel(&self, device: i32, entry: &OffloadEntry, maps: &[Map]) -> i32 {
        let (base, begin, size, types) = split(maps);
        let mut args = KernelArgs {
            version: 3,
            num_args: maps.len() as u32,
            arg_base_ptrs: base.as_ptr().cast(),
            arg_ptrs: begin.as_ptr(),
            arg_sizes: size.as_ptr(),
            arg_types: types.as_ptr(),
            arg_names: std::ptr::null(),
            arg_mappers: std::ptr::null(),
            tripcount: 0,
            flags: 0,
            num_teams: [1, 0, 0],
            thread_limit: [1, 0, 0],
            dyn_cgroup_mem: 0,
        };
        let _running = IN_USE.read().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the arrays outlive the call; `entry.address` is the host key registered for the kernel.
        unsafe {
            (self.target_kernel)(
                std::ptr::null_mut(),
                device as i64,
                1,
                1,
                entry.address.cast_mut(),
                &mut args,
            )
        }
    }
}

type Arrays = (
    Vec<MaybeUninit<*mut c_void>>,
    Vec<*mut c_void>,
    Vec<i64>,
    Vec<i64>,
);

fn split(maps: &[Map]) -> Arrays {
    (
        maps.iter().map(|m| m.base).collect(),
        maps.iter().map(|m| m.begin).collect(),
        maps.iter().map(|m| m.size).collect(),
        maps.iter().map(|m| m.map_type).collect(),
    )
}
