//! The device table: every device of every enabled plugin, numbered in plugin order, initialised on first use, and
//! the rules that choose which of our devices a construct runs on (`backend.rs` chooses between our devices and
//! libomptarget's).

use super::entry::DeviceEntry;
use super::observed::ObservedDevice;
use crate::env::{self, icv, Policy};
use crate::observe::{self, Watch};
use crate::plugin::{self, DeviceDescription};
use std::borrow::Cow;
use std::sync::OnceLock;

/// OpenMP 5.1's `omp_initial_device`: a device number that always means the host.
pub const OMP_INITIAL_DEVICE: i32 = -1;

static DEVICES: OnceLock<Vec<DeviceEntry>> = OnceLock::new();

/// Why the enabled plugins found no devices, for the message of a region that needs one (made once: the fallback
/// path must not allocate per call).
static NO_DEVICES: OnceLock<String> = OnceLock::new();

/// Every usable device; none under `OMP_TARGET_OFFLOAD=DISABLED`.
#[inline]
pub fn devices() -> &'static [DeviceEntry] {
    DEVICES.get_or_init(|| {
        let devs = discover();
        bind_by_rank(&devs);
        devs
    })
}

/// This thread's default device: its default-device-var, whose initial value may be bound by rank, which needs the
/// device table.
pub fn default_device() -> i32 {
    if icv().bind.is_some() {
        devices();
    }
    env::default_device()
}

/// `OFFLOAD_BIND=local-rank`: the default device is `local rank % devices`, so the ranks a launcher starts on one node
/// spread over its devices.
fn bind_by_rank(devs: &[DeviceEntry]) {
    let Some(b) = icv().bind else { return };
    if devs.is_empty() {
        return; // the host is the default device already
    }
    let d = b.rank as usize % devs.len();
    env::bind_default_device(d as i32);
    observe::bound(b.rank, b.var, d as i32, devs[d].plugin, devs.len());
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
                observe::warning(format_args!(
                    "OFFLOAD_PLUGINS names an unknown plugin `{w}`; known: {}",
                    known.join(", ")
                ));
            } else if let Some(why) = plugin::not_built(w) {
                observe::warning(format_args!("OFFLOAD_PLUGINS names `{w}`, but {why}"));
            }
        }
    }
    let mut out = Vec::new();
    let mut empty = Vec::new();
    for p in plugins {
        let enabled = match &icv.plugins {
            Some(wanted) => wanted.iter().any(|n| n == p.name()),
            None => p.on_by_default(),
        };
        if !enabled {
            continue;
        }
        let w = Watch::now();
        let start = w.start();
        let found = p.discover();
        observe::discovered(
            w,
            start,
            p.name(),
            found
                .as_ref()
                .map(|d| d.devices.len())
                .map_err(|e| e as &dyn std::fmt::Display),
        );
        match found {
            Ok(found) => {
                for note in &found.notes {
                    observe::plugin_note(w, p.name(), note);
                }
                for (index, dev) in found.devices.into_iter().enumerate() {
                    let dev = ObservedDevice::new(out.len() as i32, p.name(), dev);
                    observe::device_opened(w, p.name(), index, || {
                        let DeviceDescription { name, arch, memory } = dev.describe();
                        (name, arch, memory)
                    });
                    out.push(DeviceEntry::new(dev));
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

/// One plugin as discovery finds it: its devices, or why it has none.
#[derive(Clone, Debug)]
pub struct PluginReport {
    /// The plugin's name (`host-elf`, `cuda`, `amdgpu`).
    pub plugin: &'static str,
    /// Whether the runtime uses the plugin when `OFFLOAD_PLUGINS` is unset (gpu-sim is used only when named).
    pub on_by_default: bool,
    /// (device number, description): the number with the plugins on by default, or, for a plugin off by default, its
    /// number when `OFFLOAD_PLUGINS` names it alone.
    pub devices: Vec<(i32, DeviceDescription)>,
    /// Why the plugin has no devices (no driver, no runtime library, ..); `None` when it listed them (perhaps none).
    pub none_because: Option<String>,
}

/// Every plugin and device this build can drive, whatever `OFFLOAD_PLUGINS` and `OMP_TARGET_OFFLOAD` say, numbered
/// as the runtime numbers them without `OFFLOAD_PLUGINS`: what `cargo offload devices` lists.
pub fn inventory() -> Vec<PluginReport> {
    let mut next = 0;
    plugin::all()
        .into_iter()
        .map(|p| match p.discover() {
            Ok(found) => PluginReport {
                plugin: p.name(),
                on_by_default: p.on_by_default(),
                devices: found
                    .devices
                    .iter()
                    .enumerate()
                    .map(|(k, d)| {
                        if !p.on_by_default() {
                            return (k as i32, d.describe());
                        }
                        next += 1;
                        (next - 1, d.describe())
                    })
                    .collect(),
                none_because: None,
            },
            Err(why) => PluginReport {
                plugin: p.name(),
                on_by_default: p.on_by_default(),
                devices: Vec::new(),
                none_because: Some(why.to_string()),
            },
        })
        .collect()
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

/// Our device `device(..)` or the default device names, or why the host runs the construct.
pub(super) fn select_ours(device: Option<i32>) -> Result<&'static DeviceEntry, Host> {
    let devs = devices();
    let d = number(device, devs.len() as i32)?;
    let dev = &devs[d as usize];
    if dev.is_lost() {
        return Err(Host::Unavailable(
            format!(
                "device {d} ({}) was lost after an earlier failure",
                dev.plugin
            )
            .into(),
        ));
    }
    Ok(dev)
}

/// The device number `device(..)` or the default device names among `n` devices, or why the host runs the construct.
pub(super) fn number(device: Option<i32>, n: i32) -> Result<i32, Host> {
    let d = match device {
        // OpenMP 5.1's `omp_initial_device` is -1; `omp_get_initial_device()` is `n`.
        Some(d) if d == n || d == OMP_INITIAL_DEVICE => {
            return Err(Host::Chosen("device(..) names the initial device"))
        }
        Some(d) => d,
        None if n == 0 => {
            let why = NO_DEVICES
                .get()
                .map_or("no offload device is available", |w| w.as_str());
            return Err(Host::Unavailable(why.into()));
        }
        None => {
            let d = env::default_device();
            // `omp_initial_device` (-1) and `omp_get_initial_device()` both name the host as the default device.
            if d == n || d == OMP_INITIAL_DEVICE {
                return Err(Host::Chosen("the default device is the initial device"));
            }
            d
        }
    };
    if d < 0 || d >= n {
        return Err(Host::Unavailable(
            format!("device {d} does not exist (there are {n} devices)").into(),
        ));
    }
    Ok(d)
}
