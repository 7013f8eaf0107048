//! An entry of the device table: an observed device with what the runtime keeps for it (its kernels, loaded on
//! first use, its present table, whether it was lost).

use super::observed::ObservedDevice;
use super::present::MappingTable;
use crate::observe::{self, ImageName, Watch};
use crate::plugin::{Kernel, PluginError};
use crate::registry::{descriptor, entry_symbol, Image};
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

impl DeviceEntry {
    pub fn new(dev: ObservedDevice) -> Self {
        DeviceEntry {
            dev,
            kernels: OnceLock::new(),
            mapping: Mutex::new(MappingTable::default()),
            lost: AtomicBool::new(false),
        }
    }

    /// The kernel for the entry at `index`, loading this device's images on first use.
    #[inline]
    pub fn kernel(&self, index: usize) -> Option<Kernel> {
        self.kernels
            .get_or_init(|| self.load_images())
            .get(index)
            .copied()
            .flatten()
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
        for (rank, image) in ranked {
            let outranked = loaded
                .iter()
                .any(|&(tag, r)| tag == image.package_tag && r > rank);
            let missing = kernels
                .iter()
                .zip(desc.entries)
                .any(|(k, e)| k.is_none() && e.data == image.package_tag);
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
            for (slot, entry) in kernels.iter_mut().zip(desc.entries) {
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

    /// The device's present table. A panic while it was held cannot have left it half-updated (each operation is
    /// one insert or remove), so a poisoned lock is taken over.
    #[inline]
    pub fn table(&self) -> MutexGuard<'_, MappingTable> {
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
