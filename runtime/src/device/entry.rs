//! An entry of the device table: an observed device with what the runtime keeps for it (its kernels, loaded on
//! first use, its present table, whether it was lost).

use super::directory::Directory;
use super::observed::ObservedDevice;
use super::present::MappingTable;
use crate::host::geometry::Launch;
use crate::observe::{self, ImageName, Watch};
use crate::plugin::{Kernel, KernelArgs, LaunchLimits, LaunchParams, LoadedImageOps, PluginError};
use crate::registry::{descriptor, entry_symbol, Image};
use offload_model::abi::map_type::HOST_ATOMIC_SHIFT;
use offload_model::fatbin::OffloadEntry;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub struct DeviceEntry {
    dev: ObservedDevice,
    /// Kernel per offload entry (by entry index), filled when the device first runs a region.
    kernels: OnceLock<Vec<Option<Kernel>>>,
    mapping: Mutex<MappingTable>,
    lost: AtomicBool,
}

/// An entry is its device: its number, plugin, and observed operations.
impl Deref for DeviceEntry {
    type Target = ObservedDevice;
    #[inline]
    fn deref(&self) -> &ObservedDevice {
        &self.dev
    }
}

/// A kernel loaded on a device, what a region call launches: the plugin's handle with its device, whose launch
/// limits it takes ([`LoadedKernel::geometry`]) and whose launch template runs it ([`LoadedKernel::launch`]).
#[derive(Clone, Copy)]
pub struct LoadedKernel<'d> {
    dev: &'d DeviceEntry,
    handle: Kernel,
}

impl LoadedKernel<'_> {
    /// The limits a launch of the kernel takes: its device's.
    #[inline]
    pub fn limits(&self) -> &LaunchLimits {
        self.dev.limits()
    }

    /// (teams, threads per team) a launch asked as `launch` gets: the one geometry, within [`LoadedKernel::limits`].
    #[inline]
    pub fn geometry(&self, launch: Launch) -> (u32, u32) {
        launch.geometry(self.limits())
    }

    /// Runs the kernel for `region` with `args` as `params` says (its geometry from [`LoadedKernel::geometry`]) and
    /// waits, through the device's launch template ([`ObservedDevice`]'s: argument checks, reporting, printing); `asked`
    /// is what the region's clauses asked for. `region` is the region's name, `entry` its offload entry.
    ///
    /// # Safety
    /// `args` match the kernel's parameters.
    #[inline]
    pub unsafe fn launch(
        &self,
        w: Watch,
        (region, entry): (&'static str, &OffloadEntry),
        asked: Launch,
        args: &KernelArgs,
        params: LaunchParams,
    ) -> Result<(), PluginError> {
        // SAFETY: the handle came from an image loaded on this device; forwarded.
        unsafe {
            self.dev
                .launch(w, region, entry, asked, self.handle, args, params)
        }
    }
}

impl DeviceEntry {
    pub fn new(dev: ObservedDevice) -> Self {
        let number = dev.number;
        DeviceEntry {
            dev,
            kernels: OnceLock::new(),
            mapping: Mutex::new(MappingTable::new(number, Directory::global().clone())),
            lost: AtomicBool::new(false),
        }
    }

    /// The kernel for the entry at `index`, loading this device's images on first use.
    #[inline]
    pub fn kernel(&self, index: usize) -> Option<LoadedKernel<'_>> {
        let handle = self
            .kernels
            .get_or_init(|| self.load_images())
            .get(index)
            .copied()
            .flatten()?;
        Some(LoadedKernel { dev: self, handle })
    }

    /// Loads compatible images best first (a GPU target carries one per architecture and format); an image ranked
    /// below one of its package already loaded only while some entry of the package still has no kernel. One bad
    /// image disables itself, not the device or the other images.
    fn load_images(&self) -> Vec<Option<Kernel>> {
        let desc = descriptor();
        let mut kernels = vec![None; desc.entries.len()];
        let mut ranked: Vec<(u32, &Image)> = desc
            .images
            .iter()
            .filter_map(|i| Some((self.rank(i)?, i)))
            .collect();
        ranked.sort_by_key(|(rank, _)| std::cmp::Reverse(*rank));
        let mut loaded: Vec<(u64, u32)> = Vec::new();
        // Globals paired (by entry index): each with the first loaded image of its package that has it.
        let mut paired = vec![false; desc.entries.len()];
        for (rank, image) in ranked {
            let outranked = loaded
                .iter()
                .any(|&(tag, r)| tag == image.package_tag && r > rank);
            let missing = kernels
                .iter()
                .zip(desc.entries)
                .any(|(k, e)| k.is_none() && !e.is_global() && e.data == image.package_tag);
            if outranked && !missing {
                continue;
            }
            loaded.push((image.package_tag, rank));
            let w = Watch::now();
            let start = w.start();
            let result = self.load_image(image);
            let name = ImageName {
                triple: image.triple,
                arch: image.arch,
                package: image.package,
                bytes: image.bytes.len(),
            };
            let failed = result.as_ref().err().map(|e| e as &dyn std::fmt::Display);
            observe::image_loaded(start, self.number, self.plugin, name, failed);
            let Ok(loaded) = result else { continue };
            for ((slot, entry), paired) in kernels.iter_mut().zip(desc.entries).zip(&mut paired) {
                if entry.is_global() {
                    if !*paired && entry.data == image.package_tag {
                        match self.map_global(&*loaded, entry, desc.entries) {
                            Ok(found) => *paired = found,
                            Err(e) => {
                                *paired = true;
                                // Regions would silently use a copy that updates never reach: always said.
                                observe::warning(format_args!(
                                    "device {} ({}): the device global {} is not paired with its host static, so \
                                     regions there use the image's own copy, which `target_update!` does not reach: \
                                     {e}",
                                    self.number,
                                    self.plugin,
                                    entry_symbol(entry).to_string_lossy()
                                ));
                            }
                        }
                    }
                    continue;
                }
                // Another package's image may hold a kernel of the same name (two versions of a crate).
                if slot.is_none() && entry.data == image.package_tag {
                    *slot = loaded
                        .kernel(entry_symbol(entry))
                        .unwrap_or_else(|e: PluginError| {
                            observe::kernel_lookup_failed(w, self.number, self.plugin, &e);
                            None
                        });
                }
            }
        }
        kernels
    }

    /// Makes a device global (OpenMP's `declare target` variable) present: the host static at the entry's address
    /// maps to `image`'s copy, which starts from the host value. A static without interior mutability never changes,
    /// so the image's copy (its initializer, which may be in read-only memory) is what regions read, and the present
    /// mapping is a copy of its own that updates may write harmlessly. `Ok(false)` if the image has no copy (another
    /// image of the package may: a package has an image per kind of target).
    fn map_global(
        &self,
        image: &dyn LoadedImageOps,
        entry: &OffloadEntry,
        entries: &[OffloadEntry],
    ) -> Result<bool, PluginError> {
        let symbol = entry_symbol(entry);
        let (host, size) = (entry.address as usize, entry.size as usize);
        let lookup = |reason: String| PluginError::Global { reason };
        // Two statics of one name in one module (one in a function's body) would share a symbol, and the device
        // copy's size: neither is paired.
        let twins = entries
            .iter()
            .filter(|e| e.is_global() && e.data == entry.data && entry_symbol(e) == symbol)
            .count();
        if twins > 1 {
            return Err(lookup(
                "two `#[declare_target] static`s have this name in one module (one inside a function?): a device \
                 global must be a module's item"
                    .into(),
            ));
        }
        let Some(global) = image.global(symbol)? else {
            return Ok(false);
        };
        match global.size {
            Some(s) if s == size => {}
            Some(s) => {
                return Err(lookup(format!(
                    "the image's copy is {s} bytes, the host's static {size} (does a `cfg` make them differ?)"
                )))
            }
            None => return Err(lookup("the image does not say the size of its copy".into())),
        }
        let atomic = u64::from(entry.host_atomic());
        let tgt = if atomic != 0 {
            global.address
        } else {
            self.alloc(size, entry.align())?
        };
        // SAFETY: the host static is `size` readable bytes (its atomics read atomically, per the map type's bits),
        // and `tgt` is the image's copy of it or an allocation of `size` bytes.
        unsafe { self.submit(tgt, host, size, atomic << HOST_ATOMIC_SHIFT)? };
        let mut table = self.mapping.lock().unwrap_or_else(|p| p.into_inner());
        table
            .associate(host, size, tgt)
            .map_err(|e| lookup(e.to_string()))?;
        Ok(true)
    }

    /// The device's present table. A panic while it was held cannot have left it half-updated (each operation is
    /// one insert or remove), so a poisoned lock is taken over. Where the program has device globals, the device's
    /// images are loaded first, which makes them present.
    #[inline]
    pub fn table(&self) -> MutexGuard<'_, MappingTable> {
        if crate::registry::has_globals() {
            self.kernels.get_or_init(|| self.load_images());
        }
        self.mapping.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[inline]
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::fake::FakeDevice;
    use crate::plugin::interface::Global;
    use offload_model::fatbin::OffloadEntry;
    use std::ffi::CStr;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    /// An image whose one global is a block of the fake device's memory.
    struct OneGlobal(Option<Global>);

    impl LoadedImageOps for OneGlobal {
        fn kernel(&self, _: &CStr) -> Result<Option<Kernel>, PluginError> {
            Ok(None)
        }
        fn global(&self, _: &CStr) -> Result<Option<Global>, PluginError> {
            Ok(self.0)
        }
    }

    static COUNTS: [AtomicU32; 2] = [AtomicU32::new(7), AtomicU32::new(9)];
    static TABLE: [u16; 3] = [1, 2, 3];

    fn entry<T>(host: &'static T, host_atomic: u32) -> OffloadEntry {
        OffloadEntry::global(
            host as *const T as *const _,
            b"__omp_offloading_rs_1g\0",
            size_of::<T>(),
            align_of::<T>(),
            host_atomic,
            0,
        )
    }

    #[test]
    fn an_atomic_global_maps_to_the_images_copy_which_starts_from_the_host_value() {
        let fake = FakeDevice::default();
        let dev = DeviceEntry::new(fake.observed());
        let copy = dev.alloc(8, 8).unwrap();
        let image = OneGlobal(Some(Global {
            address: copy,
            size: Some(8),
        }));
        COUNTS[1].store(11, Relaxed);
        let e = entry(&COUNTS, 4);
        dev.map_global(&image, &e, std::slice::from_ref(&e))
            .unwrap();
        let host = COUNTS.as_ptr() as usize;
        assert_eq!(dev.mapping.lock().unwrap().lookup(host, 8), Some(copy));
        let want: Vec<u8> = [7u32, 11].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(fake.read(copy, 8), want);
    }

    #[test]
    fn a_global_without_interior_mutability_maps_to_a_copy_of_its_own() {
        let fake = FakeDevice::default();
        let dev = DeviceEntry::new(fake.observed());
        // The image's copy may be read-only: it is neither written nor mapped.
        let image = OneGlobal(Some(Global {
            address: 0xdead_0000,
            size: Some(6),
        }));
        let e = entry(&TABLE, 0);
        dev.map_global(&image, &e, std::slice::from_ref(&e))
            .unwrap();
        let tgt = dev
            .mapping
            .lock()
            .unwrap()
            .lookup(TABLE.as_ptr() as usize, 6)
            .unwrap();
        assert_ne!(tgt, 0xdead_0000);
        assert_eq!(fake.read(tgt, 6), [1, 0, 2, 0, 3, 0]);
    }

    #[test]
    fn a_missing_mis_sized_or_unsized_global_is_an_error_and_maps_nothing() {
        let fake = FakeDevice::default();
        let dev = DeviceEntry::new(fake.observed());
        let e = entry(&COUNTS, 4);
        let one = std::slice::from_ref(&e);
        let missing = dev.map_global(&OneGlobal(None), &e, one);
        assert!(
            !missing.unwrap(),
            "another image of the package may have it"
        );
        let wrong = OneGlobal(Some(Global {
            address: dev.alloc(4, 4).unwrap(),
            size: Some(4),
        }));
        let err = dev.map_global(&wrong, &e, one).unwrap_err();
        assert!(
            err.to_string().contains("4 bytes, the host's static 8"),
            "{err}"
        );
        // A copy whose size the image does not say could be smaller than the host's: not paired.
        let unsized_copy = OneGlobal(Some(Global {
            address: dev.alloc(8, 8).unwrap(),
            size: None,
        }));
        let err = dev.map_global(&unsized_copy, &e, one).unwrap_err();
        assert!(err.to_string().contains("does not say the size"), "{err}");
        // Two statics of one symbol (one in a function's body) would share the copy: neither is paired.
        let twins = [e, entry(&TABLE, 0)];
        let copy = OneGlobal(Some(Global {
            address: dev.alloc(8, 8).unwrap(),
            size: Some(8),
        }));
        let err = dev.map_global(&copy, &twins[0], &twins).unwrap_err();
        assert!(
            err.to_string().contains("two `#[declare_target] static`s"),
            "{err}"
        );
        assert_eq!(dev.mapping.lock().unwrap().len(), 0);
    }
}
