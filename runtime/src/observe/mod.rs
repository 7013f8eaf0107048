//! Observability: what the runtime does, told to whoever watches. `OFFLOAD_INFO` (like `LIBOMPTARGET_INFO`) prints
//! lines on stderr, `OFFLOAD_PROFILE` records a Chrome trace ([`profile`]). Every event goes through one helper here,
//! which writes both the line and the trace event, so the two never drift apart. When nothing watches, a helper costs
//! one relaxed atomic load and a branch; the reporting is out of line and cold.
//!
//! The helpers take plain values (names, numbers, addresses, errors as `Display`), never the runtime's own types, so
//! this module depends on nothing it observes. The device layer calls the memory, transfer and launch helpers from
//! its one device wrapper, so every plugin call is observed without its callers remembering to.
//!
//! `OFFLOAD_INFO` categories: a level enables every category whose number is at most it, and a negative level
//! enables them all:
//! - 1 [`LAUNCH`]: one line per region launch, on a device or in the host fallback (and plugins with no devices);
//! - 2 [`TRANSFER`]: every copy between host and device (direction, bytes, addresses, construct or region);
//! - 4 [`MAPPING`]: every present-table change (new entry, reference count up or down, removal) and every device
//!   allocation and free.
//!
//! A few lines are warnings, printed whatever the level: something the user should fix (an image that does not
//! load, an unknown plugin name).
//!
//! Transfers, allocations and table changes happen deep in the mapping code, which knows neither the device number
//! nor the construct: the construct that causes them opens a [`Scope`] naming both (only when something watches).

pub mod profile;

use profile::Value;
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fmt::Display;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// A device address.
type DevicePtr = u64;

/// `OFFLOAD_INFO=1`: launches.
pub const LAUNCH: u32 = 1;
/// `OFFLOAD_INFO=2`: also transfers.
pub const TRANSFER: u32 = 2;
/// `OFFLOAD_INFO=4`: also mapping-table changes, allocations and frees.
pub const MAPPING: u32 = 4;

/// The info level (clamped; a negative `OFFLOAD_INFO` is the maximum), whether a profile is being recorded, and
/// whether the environment has been read yet: one word, so every check is one load.
static STATE: AtomicU32 = AtomicU32::new(UNREAD);
const LEVEL: u32 = (1 << 30) - 1;
const PROFILE: u32 = 1 << 30;
const UNREAD: u32 = 1 << 31;

/// What is being watched, read once for an operation.
#[derive(Clone, Copy)]
pub struct Watch(u32);

impl Watch {
    #[inline]
    pub fn now() -> Watch {
        let s = STATE.load(Relaxed);
        if s & UNREAD == 0 {
            Watch(s)
        } else {
            Watch(read_environment())
        }
    }

    /// `OFFLOAD_INFO` prints this category.
    #[inline]
    pub fn info(self, category: u32) -> bool {
        self.0 & LEVEL >= category
    }

    /// `OFFLOAD_PROFILE` is recording.
    #[inline]
    pub fn profile(self) -> bool {
        self.0 & PROFILE != 0
    }

    /// Someone wants events of this category.
    #[inline]
    pub fn wants(self, category: u32) -> bool {
        self.profile() || self.info(category)
    }

    /// The start of a traced event: `Some` only while profiling.
    #[inline]
    pub fn start(self) -> Option<Instant> {
        self.profile().then(Instant::now)
    }

    /// Names the construct or region (and its device, by number and plugin) that the transfers, allocations and
    /// table changes on this thread belong to until the scope ends; while profiling, the scope is an event itself,
    /// enclosing them.
    #[inline]
    pub fn scope(self, label: Label, device: i32, plugin: &'static str) -> Scope {
        if !self.wants(TRANSFER) {
            return Scope(None);
        }
        self.open_scope(Context {
            label,
            device,
            plugin,
        })
    }

    #[cold]
    #[inline(never)]
    fn open_scope(self, cx: Context) -> Scope {
        Scope(Some((CONTEXT.replace(Some(cx)), cx, self.start())))
    }
}

/// Reads `OFFLOAD_INFO` and `OFFLOAD_PROFILE` (opening the profile) once, into the one word every check loads.
#[cold]
#[inline(never)]
fn read_environment() -> u32 {
    static READ: OnceLock<u32> = OnceLock::new();
    let s = *READ.get_or_init(|| {
        let icv = crate::env::icv();
        let profile = match &icv.profile {
            Some(p) => profile::open(p.clone()),
            None => false,
        };
        icv.info.min(LEVEL) | if profile { PROFILE } else { 0 }
    });
    STATE.store(s, Relaxed);
    s
}

/// A line on stderr whatever `OFFLOAD_INFO` says: something the user should fix.
#[cold]
pub fn warning(line: std::fmt::Arguments<'_>) {
    eprintln_whole!("offload: {line}");
}

/// What a transfer or table change belongs to.
#[derive(Clone, Copy, Debug)]
pub enum Label {
    /// A `#[target]` region, by name.
    Region(&'static str),
    /// A data construct or runtime routine (`target_data!`, `omp_target_memcpy`, ...).
    Construct(&'static str),
}

#[derive(Clone, Copy, Debug)]
struct Context {
    label: Label,
    device: i32,
    plugin: &'static str,
}

thread_local! {
    static CONTEXT: Cell<Option<Context>> = const { Cell::new(None) };
}

/// See [`Watch::scope`]: restores the enclosing scope when dropped.
pub struct Scope(Option<(Option<Context>, Context, Option<Instant>)>);

impl Drop for Scope {
    #[inline]
    fn drop(&mut self) {
        if let Some(open) = self.0.take() {
            close_scope(open)
        }
    }
}

#[cold]
#[inline(never)]
fn close_scope((outer, cx, start): (Option<Context>, Context, Option<Instant>)) {
    CONTEXT.set(outer);
    if let Some(start) = start {
        let (name, cat) = match cx.label {
            Label::Region(r) => (r, "region"),
            Label::Construct(c) => (c, "construct"),
        };
        profile::record(name.into(), cat, start, context_args(Some(cx), Vec::new()));
    }
}

fn context() -> Option<Context> {
    CONTEXT.try_with(Cell::get).ok().flatten()
}

/// `(device 0, host-elf, region a::b)`, for the end of an info line.
struct Where(Option<Context>);

impl std::fmt::Display for Where {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            None => write!(f, "(device unknown)"),
            Some(cx) => {
                write!(f, "(device {}, {}, ", cx.device, cx.plugin)?;
                match cx.label {
                    Label::Region(r) => write!(f, "region {r})"),
                    Label::Construct(c) => write!(f, "{c})"),
                }
            }
        }
    }
}

/// The device, plugin and construct or region, appended to an event's own arguments.
fn context_args(
    cx: Option<Context>,
    mut args: Vec<(&'static str, Value)>,
) -> Vec<(&'static str, Value)> {
    if let Some(cx) = cx {
        args.push(("device", cx.device.into()));
        args.push(("plugin", cx.plugin.into()));
        args.push(match cx.label {
            Label::Region(r) => ("region", r.into()),
            Label::Construct(c) => ("construct", c.into()),
        });
    }
    args
}

fn hex(p: u64) -> Value {
    Value::Str(format!("{p:#x}").into())
}

// ---- registration and devices -------------------------------------------------------------------------------------

/// The binary descriptor was built (before `main`).
pub fn registered(start: Option<Instant>, images: usize, entries: usize) {
    if let Some(start) = start {
        profile::record(
            "register".into(),
            "registration",
            start,
            vec![("images", images.into()), ("entries", entries.into())],
        );
    }
}

/// A plugin looked for devices: found `Ok(n)`, or none because `Err(why)`.
pub fn discovered(
    w: Watch,
    start: Option<Instant>,
    plugin: &'static str,
    found: Result<usize, &dyn Display>,
) {
    if let (Err(why), true) = (found, w.info(LAUNCH)) {
        eprintln_whole!("offload: plugin {plugin} has no devices: {why}");
    }
    if let Some(start) = start {
        let mut args = vec![("plugin", plugin.into())];
        match found {
            Ok(n) => args.push(("devices", n.into())),
            Err(why) => {
                args.push(("devices", 0usize.into()));
                args.push(("reason", why.to_string().into()));
            }
        }
        profile::record(
            format!("discover {plugin}").into(),
            "device init",
            start,
            args,
        );
    }
}

/// Something a plugin's discovery noted (a device it skipped, a feature it could not set up): `OFFLOAD_INFO=1`.
pub fn plugin_note(w: Watch, plugin: &str, note: &dyn Display) {
    if w.info(LAUNCH) {
        eprintln_whole!("offload: plugin {plugin}: {note}");
    }
}

/// `OFFLOAD_BIND=local-rank` bound this process's default device: `OFFLOAD_INFO=1` says which rank took which.
pub fn bound(rank: u32, var: &str, device: i32, plugin: &str, devices: usize) {
    if Watch::now().info(LAUNCH) {
        eprintln_whole!(
            "offload: local rank {rank} ({var}) takes device {device} ({plugin}) of this node's {devices} as its \
             default device"
        );
    }
}

/// A device a plugin opened (its `index`-th): `OFFLOAD_INFO=2` describes it. `describe` runs only then.
#[inline]
pub fn device_opened(
    w: Watch,
    plugin: &str,
    index: usize,
    describe: impl FnOnce() -> (String, String, u64),
) {
    if w.info(TRANSFER) {
        let (name, arch, memory) = describe();
        eprintln_whole!(
            "offload: {plugin} device {index}: {name} ({arch}, {} MiB)",
            memory >> 20
        );
    }
}

/// A device image, as the image events name it.
#[derive(Clone, Copy, Debug)]
pub struct ImageName<'a> {
    pub triple: &'a str,
    pub arch: &'a str,
    pub package: &'a str,
    pub bytes: usize,
}

/// A device loaded (or failed to load) an image. A failure is a warning: the image's regions run on the host.
pub fn image_loaded(
    start: Option<Instant>,
    device: i32,
    plugin: &'static str,
    image: ImageName<'_>,
    failed: Option<&dyn Display>,
) {
    if let Some(e) = failed {
        warning(format_args!(
            "device {device} ({plugin}): cannot load the {} ({}) image of package `{}` ({} bytes): {e}; its regions \
             will run on the host",
            image.triple, image.arch, image.package, image.bytes
        ));
    }
    let Some(start) = start else { return };
    let mut args = vec![
        ("triple", image.triple.to_string().into()),
        ("arch", image.arch.to_string().into()),
        ("bytes", image.bytes.into()),
        ("package", image.package.to_string().into()),
        ("device", device.into()),
        ("plugin", plugin.into()),
    ];
    if let Some(e) = failed {
        args.push(("error", e.to_string().into()));
    }
    profile::record("load image".into(), "image", start, args);
}

/// Looking a kernel up in a loaded image failed (other than its absence): `OFFLOAD_INFO=1`. Its regions run on the
/// host unless another image has the kernel.
pub fn kernel_lookup_failed(w: Watch, device: i32, plugin: &str, error: &dyn Display) {
    if w.info(LAUNCH) {
        eprintln_whole!("offload: device {device} ({plugin}): {error}");
    }
}

// ---- regions ------------------------------------------------------------------------------------------------------
//
// The helpers below are a check, inlined into the caller, and the reporting, out of line and cold: nothing watching
// costs the caller one load and a branch.

/// A kernel launch, as the launch events name it.
#[derive(Clone, Copy, Debug)]
pub struct LaunchName<'a> {
    pub region: &'static str,
    pub entry: &'a CStr,
    pub device: i32,
    pub plugin: &'static str,
    pub teams: u32,
    pub threads: u32,
    pub team_shared: usize,
}

/// Launches a region's kernel with `run`: the `OFFLOAD_INFO=1` line before (and one more with `note()`, when the
/// launch gets fewer teams or threads than the region's clauses ask for), the trace event after. `name` and `note`
/// run only while something watches.
#[inline]
pub fn launch<'a, E: Display>(
    w: Watch,
    name: impl FnOnce() -> LaunchName<'a>,
    note: impl FnOnce() -> Option<String>,
    run: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    if !w.wants(LAUNCH) {
        return run();
    }
    let name = name();
    let start = launching(w, name, w.info(LAUNCH).then(note).flatten());
    let r = run();
    launched(start, name, r.as_ref().err().map(|e| e as &dyn Display));
    r
}

thread_local! {
    /// The task this thread runs (0: none), as the task layer says through [`running_task`].
    static TASK: Cell<u64> = const { Cell::new(0) };
}

/// Makes `task` (0: none) the task this thread runs, which its launches are reported in; the one it replaces.
pub(crate) fn running_task(task: u64) -> u64 {
    TASK.replace(task)
}

/// The task this thread runs (0: none).
pub(crate) fn current_task() -> u64 {
    TASK.get()
}

/// ` in task thread offload-task-N` for a launch from a task's helper thread (each its own track in the trace too);
/// ` in task N on thread T` for a task another thread runs (one waiting for it, or spawning it with no helpers),
/// whose launches are on that thread's track; else nothing.
fn task_thread() -> String {
    let thread = std::thread::current();
    match (thread.name(), TASK.get()) {
        (Some(n), _) if n.starts_with("offload-task-") => format!(" in task thread {n}"),
        (_, 0) => String::new(),
        (name, task) => format!(" in task {task} on thread {}", name.unwrap_or("(unnamed)")),
    }
}

#[cold]
#[inline(never)]
fn launching(w: Watch, name: LaunchName<'_>, note: Option<String>) -> Option<Instant> {
    if w.info(LAUNCH) {
        eprintln_whole!(
            "offload: launch {} (entry {}) on device {} ({}){}",
            name.region,
            name.entry.to_string_lossy(),
            name.device,
            name.plugin,
            task_thread()
        );
        if let Some(note) = note {
            eprintln_whole!(
                "offload: region {} gets {note} (device {}, {})",
                name.region,
                name.device,
                name.plugin
            );
        }
    }
    w.start()
}

#[cold]
#[inline(never)]
fn launched(start: Option<Instant>, name: LaunchName<'_>, failed: Option<&dyn Display>) {
    let Some(start) = start else { return };
    let mut args = vec![
        ("region", name.region.into()),
        ("entry", name.entry.to_string_lossy().into_owned().into()),
        ("device", name.device.into()),
        ("plugin", name.plugin.into()),
        ("teams", name.teams.into()),
        ("threads", name.threads.into()),
        ("team_shared_bytes", name.team_shared.into()),
    ];
    if let Some(e) = failed {
        args.push(("error", e.to_string().into()));
    }
    profile::record(name.region.into(), "launch", start, args);
}

/// Runs a region's host fallback with `run`: the `OFFLOAD_INFO=1` line before (and one more with `note()`, when the
/// host runs fewer teams or threads than the region's clauses ask for), the trace event after.
#[inline]
pub fn fallback<R>(
    w: Watch,
    region: &'static str,
    reason: &str,
    note: impl FnOnce() -> Option<String>,
    run: impl FnOnce() -> R,
) -> R {
    if !w.wants(LAUNCH) {
        return run();
    }
    let start = falling_back(w, region, reason, w.info(LAUNCH).then(note).flatten());
    let r = run();
    fell_back(start, region, reason);
    r
}

#[cold]
#[inline(never)]
fn falling_back(
    w: Watch,
    region: &'static str,
    reason: &str,
    note: Option<String>,
) -> Option<Instant> {
    if w.info(LAUNCH) {
        eprintln_whole!(
            "offload: launch {region} on the host (host-fallback){}: {reason}",
            task_thread()
        );
        if let Some(note) = note {
            eprintln_whole!("offload: region {region} gets {note} (host-fallback)");
        }
    }
    w.start()
}

#[cold]
#[inline(never)]
fn fell_back(start: Option<Instant>, region: &'static str, reason: &str) {
    let Some(start) = start else { return };
    profile::record(
        region.into(),
        "fallback",
        start,
        vec![
            ("region", region.into()),
            ("plugin", "host-fallback".into()),
            ("reason", reason.to_string().into()),
        ],
    );
}

// ---- device memory ------------------------------------------------------------------------------------------------

/// Sizes of live device allocations, for the free events (the callers of `free` do not all know them). Kept only
/// while someone watches allocations.
static LIVE: Mutex<BTreeMap<(i32, DevicePtr), usize>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<(i32, DevicePtr), usize>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// An allocation of `bytes` that `alloc` makes.
#[inline]
pub fn alloc<E: Display>(
    bytes: usize,
    alloc: impl FnOnce() -> Result<DevicePtr, E>,
) -> Result<DevicePtr, E> {
    let w = Watch::now();
    if !w.wants(MAPPING) {
        return alloc();
    }
    let start = w.start();
    let r = alloc();
    allocated(w, start, bytes, r.as_ref().map_err(|e| e as &dyn Display));
    r
}

#[cold]
#[inline(never)]
fn allocated(w: Watch, start: Option<Instant>, bytes: usize, r: Result<&DevicePtr, &dyn Display>) {
    let cx = context();
    match r {
        Ok(p) => {
            live().insert((cx.map_or(-1, |c| c.device), *p), bytes);
            if w.info(MAPPING) {
                eprintln_whole!(
                    "offload: alloc: {bytes} bytes at device {p:#x} {}",
                    Where(cx)
                );
            }
        }
        Err(e) if w.info(MAPPING) => {
            eprintln_whole!("offload: alloc: {bytes} bytes failed: {e} {}", Where(cx))
        }
        Err(_) => {}
    }
    if let Some(start) = start {
        let mut args = vec![("bytes", bytes.into())];
        match r {
            Ok(p) => args.push(("device_address", hex(*p))),
            Err(e) => args.push(("error", e.to_string().into())),
        }
        profile::record("alloc".into(), "memory", start, context_args(cx, args));
    }
}

/// The free of device address `ptr` that `free` makes.
#[inline]
pub fn free(ptr: DevicePtr, free: impl FnOnce()) {
    let w = Watch::now();
    if !w.wants(MAPPING) {
        return free();
    }
    let start = w.start();
    free();
    freed(w, start, ptr);
}

#[cold]
#[inline(never)]
fn freed(w: Watch, start: Option<Instant>, ptr: DevicePtr) {
    let cx = context();
    let bytes = live().remove(&(cx.map_or(-1, |c| c.device), ptr));
    if w.info(MAPPING) {
        match bytes {
            Some(b) => eprintln_whole!("offload: free: {b} bytes at device {ptr:#x} {}", Where(cx)),
            None => eprintln_whole!("offload: free: device {ptr:#x} {}", Where(cx)),
        }
    }
    if let Some(start) = start {
        let mut args = vec![("device_address", hex(ptr))];
        if let Some(b) = bytes {
            args.push(("bytes", b.into()));
        }
        profile::record("free".into(), "memory", start, context_args(cx, args));
    }
}

/// Which way a transfer goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    ToDevice,
    ToHost,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::ToDevice => "host to device",
            Direction::ToHost => "device to host",
        }
    }
}

/// A copy of `bytes` between host address `host` and device address `tgt` that `copy` performs.
#[inline]
pub fn transfer<E: Display>(
    dir: Direction,
    host: usize,
    tgt: DevicePtr,
    bytes: usize,
    copy: impl FnOnce() -> Result<(), E>,
) -> Result<(), E> {
    let w = Watch::now();
    if !w.wants(TRANSFER) {
        return copy();
    }
    let start = w.start();
    let r = copy();
    transferred(
        w,
        start,
        dir,
        host,
        tgt,
        bytes,
        r.as_ref().err().map(|e| e as &dyn Display),
    );
    r
}

#[cold]
#[inline(never)]
fn transferred(
    w: Watch,
    start: Option<Instant>,
    dir: Direction,
    host: usize,
    tgt: DevicePtr,
    bytes: usize,
    failed: Option<&dyn Display>,
) {
    let cx = context();
    if w.info(TRANSFER) {
        let failed = match failed {
            None => String::new(),
            Some(e) => format!(" failed: {e}"),
        };
        match dir {
            Direction::ToDevice => eprintln_whole!(
                "offload: copy host to device: {bytes} bytes, host {host:#x} -> device {tgt:#x} {}{failed}",
                Where(cx)
            ),
            Direction::ToHost => eprintln_whole!(
                "offload: copy device to host: {bytes} bytes, device {tgt:#x} -> host {host:#x} {}{failed}",
                Where(cx)
            ),
        }
    }
    if let Some(start) = start {
        let mut args = vec![
            ("direction", dir.name().into()),
            ("bytes", bytes.into()),
            ("host_address", hex(host as u64)),
            ("device_address", hex(tgt)),
        ];
        if let Some(e) = failed {
            args.push(("error", e.to_string().into()));
        }
        profile::record(dir.name().into(), "transfer", start, context_args(cx, args));
    }
}

// ---- the present table --------------------------------------------------------------------------------------------

/// A present-table change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A new entry (mapped, or an associated pointer).
    New,
    /// A reference was added to an entry that was present.
    Up,
    /// A reference was dropped and the entry stays.
    Down,
    /// The entry is gone.
    Removed,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::New => "new",
            Change::Up => "up",
            Change::Down => "down",
            Change::Removed => "removed",
        }
    }
}

/// The table entry for `[host, host+bytes)` at device address `tgt` changed; its reference counts are now
/// (`structured`, `dynamic`), `u64::MAX` meaning infinite (an associated pointer).
#[inline]
pub fn mapping(
    change: Change,
    host: usize,
    bytes: usize,
    tgt: DevicePtr,
    structured: u64,
    dynamic: u64,
) {
    let w = Watch::now();
    if w.wants(MAPPING) {
        mapped(w, change, host, bytes, tgt, structured, dynamic);
    }
}

#[cold]
#[inline(never)]
fn mapped(
    w: Watch,
    change: Change,
    host: usize,
    bytes: usize,
    tgt: DevicePtr,
    structured: u64,
    dynamic: u64,
) {
    let count = |n: u64| match n {
        u64::MAX => Cow::Borrowed("infinite"),
        n => Cow::Owned(n.to_string()),
    };
    let cx = context();
    if w.info(MAPPING) {
        eprintln_whole!(
            "offload: mapping {}: host {host:#x}, {bytes} bytes, device {tgt:#x}, refs structured {} dynamic {} {}",
            change.name(),
            count(structured),
            count(dynamic),
            Where(cx)
        );
    }
    if let Some(start) = w.start() {
        let args = vec![
            ("change", change.name().into()),
            ("host_address", hex(host as u64)),
            ("bytes", bytes.into()),
            ("device_address", hex(tgt)),
            ("structured", count(structured).into_owned().into()),
            ("dynamic", count(dynamic).into_owned().into()),
        ];
        profile::record(
            format!("mapping {}", change.name()).into(),
            "mapping",
            start,
            context_args(cx, args),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_enable_every_category_up_to_them() {
        let on = |l: u32, c| Watch(l.min(LEVEL)).info(c);
        assert!(on(1, LAUNCH) && !on(1, TRANSFER));
        assert!(on(3, LAUNCH) && on(3, TRANSFER) && !on(3, MAPPING));
        assert!(on(4, TRANSFER) && on(4, MAPPING));
        assert!(
            on(u32::MAX, MAPPING),
            "a negative OFFLOAD_INFO is every level"
        );
        assert!(!on(0, LAUNCH));
    }

    #[test]
    fn nothing_is_wanted_when_nothing_watches() {
        let quiet = Watch(0);
        assert!(!quiet.wants(LAUNCH) && !quiet.wants(MAPPING) && quiet.start().is_none());
        let profiling = Watch(PROFILE);
        assert!(profiling.wants(MAPPING) && !profiling.info(LAUNCH));
        assert!(Watch(2).wants(TRANSFER) && !Watch(2).wants(MAPPING));
    }
}
