//! The device table: every device of every enabled plugin, numbered in plugin order, initialised on first use.

use crate::icv::{icv, Policy};
use crate::mapping::MappingTable;
use crate::observe::{self, Watch};
use crate::plugin::{self, Device, Kernel};
use crate::tables::{descriptor, entry_symbol};
use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

pub struct DeviceEntry {
    pub number: i32,
    pub plugin: &'static str,
    pub dev: Box<dyn Device>,
    /// Kernel per offload entry (by entry index), filled when the device first runs a region.
    kernels: OnceLock<Vec<Option<Kernel>>>,
    mapping: Mutex<MappingTable>,
    lost: AtomicBool,
}

impl DeviceEntry {
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
    /// below one of its package already loaded only while some entry of the package still has no kernel.
    fn load_images(&self) -> Vec<Option<Kernel>> {
        let desc = descriptor();
        let mut kernels = vec![None; desc.entries.len()];
        let mut ranked: Vec<(u32, &crate::tables::Image)> = desc
            .images
            .iter()
            .filter_map(|i| Some((self.dev.rank(i)?, i)))
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
            let start = Watch::now().start();
            let result = self.dev.load_image(image);
            observe::image_loaded(
                start,
                self,
                image,
                result.as_ref().err().map(String::as_str),
            );
            match result {
                Ok(loaded) => {
                    for (slot, entry) in kernels.iter_mut().zip(desc.entries) {
                        // Another package's image may hold a kernel of the same name (two versions of a crate).
                        if slot.is_none() && entry.data == image.package_tag {
                            *slot = loaded.kernel(entry_symbol(entry));
                        }
                    }
                }
                // One bad image disables itself, not the device or the other images.
                Err(e) => eprintln!(
                    "offload: device {} ({}): cannot load the {} ({}) image of package `{}` ({} bytes): {e}; its \
                     regions will run on the host",
                    self.number,
                    self.plugin,
                    image.triple,
                    image.arch,
                    image.package,
                    image.bytes.len()
                ),
            }
        }
        kernels
    }

    /// The device's present table. A panic while it was held cannot have left it half-updated (each operation is
    /// one insert or remove), so a poisoned lock is taken over.
    pub fn table(&self) -> std::sync::MutexGuard<'_, MappingTable> {
        self.mapping.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A device entry for unit tests, outside the device table.
    #[cfg(test)]
    pub(crate) fn for_test(dev: Box<dyn Device>) -> DeviceEntry {
        DeviceEntry {
            number: 0,
            plugin: "fake",
            dev,
            kernels: OnceLock::new(),
            mapping: Mutex::new(MappingTable::default()),
            lost: AtomicBool::new(false),
        }
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Relaxed)
    }

    pub fn mark_lost(&self) {
        self.lost.store(true, Ordering::Relaxed);
    }
}

static DEVICES: OnceLock<Vec<DeviceEntry>> = OnceLock::new();

/// Why the enabled plugins found no devices, for the message of a region that needs one (made once: the fallback
/// path must not allocate per call).
static NO_DEVICES: OnceLock<String> = OnceLock::new();

/// Every usable device; none under `OMP_TARGET_OFFLOAD=DISABLED`.
#[inline]
pub fn devices() -> &'static [DeviceEntry] {
    DEVICES.get_or_init(discover)
}

fn discover() -> Vec<DeviceEntry> {
    let icv = icv();
    if icv.policy == Policy::Disabled {
        return Vec::new();
    }
    let plugins = plugin::all();
    if let Some(wanted) = &icv.plugins {
        for w in wanted {
            if !plugins.iter().any(|p| p.name() == w) {
                let known: Vec<_> = plugins.iter().map(|p| p.name()).collect();
                eprintln!(
                    "offload: OFFLOAD_PLUGINS names an unknown plugin `{w}`; known: {}",
                    known.join(", ")
                );
            }
        }
    }
    let mut out = Vec::new();
    let mut empty = Vec::new();
    for p in plugins {
        if icv
            .plugins
            .as_ref()
            .is_some_and(|w| !w.iter().any(|n| n == p.name()))
        {
            continue;
        }
        let w = Watch::now();
        let start = w.start();
        let found = p.discover();
        observe::discovered(
            w,
            start,
            p.name(),
            found.as_ref().map(Vec::len).map_err(String::as_str),
        );
        match found {
            Ok(devs) => {
                for dev in devs {
                    out.push(DeviceEntry {
                        number: out.len() as i32,
                        plugin: p.name(),
                        dev,
                        kernels: OnceLock::new(),
                        mapping: Mutex::new(MappingTable::default()),
                        lost: AtomicBool::new(false),
                    })
                }
            }
            Err(why) => {
                empty.push(format!("{}: {why}", p.name()));
            }
        }
    }
    let _ = NO_DEVICES.set(match empty.is_empty() {
        true => "no offload device is available".into(),
        false => format!("no offload device is available ({})", empty.join("; ")),
    });
    out
}

/// Where a construct runs.
pub enum Selection {
    Device(&'static DeviceEntry),
    Host(Host),
}

/// Why a construct runs on the host.
pub enum Host {
    /// The program asked for the host (`if(false)`, the initial device, offloading disabled).
    Chosen(&'static str),
    /// No device could take it; an error under `OMP_TARGET_OFFLOAD=MANDATORY`.
    Unavailable(Cow<'static, str>),
}

impl Host {
    pub fn reason(&self) -> &str {
        match self {
            Host::Chosen(r) => r,
            Host::Unavailable(r) => r,
        }
    }
}

/// Resolves `device(...)`, `if(...)`, the default device and the policy into a device or the host: the rules every
/// construct shares.
pub fn select(device: Option<i32>, cond: bool) -> Selection {
    if !cond {
        return Selection::Host(Host::Chosen("the if clause is false"));
    }
    if icv().policy == Policy::Disabled {
        return Selection::Host(Host::Chosen("OMP_TARGET_OFFLOAD=DISABLED"));
    }
    let devs = devices();
    let n = devs.len() as i32;
    let d = match device {
        // OpenMP 5.1's `omp_initial_device` is -1; `omp_get_initial_device()` is `n`.
        Some(d) if d == n || d == crate::api::OMP_INITIAL_DEVICE => {
            return Selection::Host(Host::Chosen("device(..) names the initial device"))
        }
        Some(d) => d,
        None if n == 0 => {
            let why = NO_DEVICES
                .get()
                .map_or("no offload device is available", |w| w.as_str());
            return Selection::Host(Host::Unavailable(why.into()));
        }
        None => {
            let d = crate::api::omp_get_default_device();
            // `omp_initial_device` (-1) and `omp_get_initial_device()` both name the host as the default device.
            if d == n || d == crate::api::OMP_INITIAL_DEVICE {
                return Selection::Host(Host::Chosen("the default device is the initial device"));
            }
            d
        }
    };
    if d < 0 || d >= n {
        return Selection::Host(Host::Unavailable(
            format!("device {d} does not exist (there are {n} devices)").into(),
        ));
    }
    let dev = &devs[d as usize];
    if dev.is_lost() {
        return Selection::Host(Host::Unavailable(
            format!(
                "device {d} ({}) was lost after an earlier failure",
                dev.plugin
            )
            .into(),
        ));
    }
    Selection::Device(dev)
}
