//! Map lists: a construct's arguments as libomptarget's (base, begin, size, map type) entries, and the walk that
//! enters them on a device (and exits them again) through its present table. Regions and data constructs share it.

use super::types::{DeviceCopy, DevicePtr};
use crate::device::present::MappingTable;
use crate::device::{DeviceEntry, MapError, Range, RefKind};
use crate::plugin::{Arg, DevicePtr as DeviceAddr, KernelArgs, PluginError};
use offload_model::abi::map_type::{
    ALWAYS, DELETE, DEVICE_MEMORY, FROM, HOST_ATOMIC_MASK, HOST_ATOMIC_SHIFT, IMPLICIT, LITERAL,
    PRESENT, PRIVATE, REDUCTION, TO,
};
use offload_model::abi::VarSite;
use std::mem::{align_of, size_of, MaybeUninit};
use std::sync::MutexGuard;

/// One map-list entry as the host sees it: libomptarget's (base, begin, size, map type). `[begin, begin+size)` is
/// what is mapped (a section, or all of `[base, base+base_size)`); a region gets the device address of `base`. A
/// literal carries its kernel argument in `literal`.
#[derive(Clone, Copy, Debug)]
pub struct MapArg {
    /// The first byte mapped.
    pub begin: *mut u8,
    /// The bytes mapped from `begin`.
    pub size: usize,
    /// The map type: `offload_model::abi::map_type`'s bits (`TO`, `FROM`, `LITERAL`, modifiers).
    pub map_type: u64,
    /// The start of the whole object (slice) the region addresses.
    pub base: *mut u8,
    /// The whole object's bytes (0 for device memory passed as is).
    pub base_size: usize,
    /// The element type's alignment: a device copy must honour it (a `#[repr(align(128))]` element in a block
    /// aligned only for 64 bytes would make a misaligned slice).
    pub align: usize,
    /// A literal's kernel-argument bits (uninitialised for other entries).
    pub literal: Arg,
    /// For device memory passed as is (`DEVICE_MEMORY`), the device holding it; -1 otherwise.
    pub device: i32,
    /// The variable it maps and where it is written, for errors (`None` where the caller did not say).
    pub site: Option<&'static VarSite>,
}

impl MapArg {
    /// A literal kernel argument: `v` passed by value, nothing mapped.
    #[inline]
    pub fn literal(v: u64) -> Self {
        Self::literal_bits(Arg::new(v))
    }

    fn literal_bits(literal: Arg) -> Self {
        let null = std::ptr::null_mut();
        MapArg {
            begin: null,
            size: 0,
            map_type: LITERAL,
            base: null,
            base_size: 0,
            align: 1,
            literal,
            device: -1,
            site: None,
        }
    }

    /// Atomic element data (see `DeviceCopy::HOST_ATOMIC`): flagged for atomic copies, and an implicit `to` map
    /// of a shared reference becomes `tofrom`, since the region writes through it.
    const fn with_atomics<T: DeviceCopy>(map_type: u64) -> u64 {
        if T::HOST_ATOMIC == 0 {
            return map_type;
        }
        let implicit_from = if map_type & IMPLICIT != 0 { FROM } else { 0 };
        map_type | implicit_from | (T::HOST_ATOMIC << HOST_ATOMIC_SHIFT)
    }

    /// A whole slice, mapped with `map_type`.
    #[inline]
    pub fn slice<T: DeviceCopy>(p: *const [T], map_type: u64) -> Self {
        let size = size_of::<T>() * p.len();
        let begin = p as *const T as *mut u8;
        MapArg {
            begin,
            size,
            map_type: Self::with_atomics::<T>(map_type),
            base: begin,
            base_size: size,
            align: align_of::<T>(),
            literal: Arg::uninit(),
            device: -1,
            site: None,
        }
    }

    /// The section `[lo, hi)` of a slice; out-of-bounds sections panic, as slicing does.
    #[inline]
    #[track_caller]
    pub fn section<T: DeviceCopy>(p: *const [T], lo: usize, hi: usize, map_type: u64) -> Self {
        let len = p.len();
        if lo > hi || hi > len {
            panic!(
                "offload: map section [{lo}..{hi}] is out of bounds for a slice of length {len}"
            );
        }
        let base = p as *const T as *mut u8;
        let sz = size_of::<T>();
        // SAFETY: `lo <= len`, so the offset stays within (or one past) the slice.
        let begin = unsafe { base.add(lo * sz) };
        let map_type = Self::with_atomics::<T>(map_type);
        MapArg {
            begin,
            size: (hi - lo) * sz,
            map_type,
            base,
            base_size: len * sz,
            align: align_of::<T>(),
            literal: Arg::uninit(),
            device: -1,
            site: None,
        }
    }

    /// One object (`&T`, `&mut T`), mapped with `map_type`.
    #[inline]
    pub fn object<T: DeviceCopy>(p: *const T, map_type: u64) -> Self {
        Self::raw_object(p, Self::with_atomics::<T>(map_type))
    }

    /// A field of an owning mapper struct reached through `&mut` (`T: Firstprivate`): one object, so the region's
    /// writes come back as the fallback's do.
    ///
    /// # Safety
    /// `T` is `Firstprivate` (the derive checks it), so the bytes a device wrote for it are a valid `T`.
    #[inline]
    pub unsafe fn value_object<T>(p: *mut T, map_type: u64) -> Self {
        Self::raw_object(p, map_type)
    }

    fn raw_object<T>(p: *const T, map_type: u64) -> Self {
        MapArg {
            begin: p as *mut u8,
            size: size_of::<T>(),
            map_type,
            base: p as *mut u8,
            base_size: size_of::<T>(),
            align: align_of::<T>(),
            literal: Arg::uninit(),
            device: -1,
            site: None,
        }
    }

    /// Device memory passed as is: its address, and the device it must run on.
    #[inline]
    pub fn device_ptr<T>(p: DevicePtr<T>) -> Self {
        let mut m = Self::literal(p.addr());
        m.map_type |= DEVICE_MEMORY;
        m.device = p.device();
        m
    }

    /// The entry for the variable written at `site` (its errors name it).
    #[inline]
    pub fn named(self, site: &'static VarSite) -> Self {
        MapArg {
            site: Some(site),
            ..self
        }
    }

    /// For device memory passed as is ([`MapArg::device_ptr`]), the device holding it.
    #[inline]
    pub fn memory_device(&self) -> Option<i32> {
        (self.map_type & DEVICE_MEMORY != 0).then_some(self.device)
    }

    /// A firstprivate value: its bits if it fits in 8 bytes, else a private device copy.
    ///
    /// # Safety
    /// `T` is `Firstprivate` (the expansion checks it separately, so a wrong type gets one error, not two).
    #[inline]
    pub unsafe fn value<T>(v: &T) -> Self {
        if offload_model::abi::passes_by_bits(size_of::<T>()) {
            // The value's bytes, padding (uninitialised) included: they travel as `Arg`, never read as a number.
            let mut bits = Arg::zeroed();
            // SAFETY: `T` fits in `bits`; `Firstprivate` types hold no pointers.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    v as *const T as *const u8,
                    bits.as_mut_ptr() as *mut u8,
                    size_of::<T>(),
                )
            };
            Self::literal_bits(bits)
        } else {
            Self::raw_object(v, TO | PRIVATE)
        }
    }

    /// A reduction's output: one slot of `R` per team, then the initial value; the runtime sizes it at launch.
    #[inline]
    pub fn reduction<R>() -> Self {
        let null = std::ptr::null_mut();
        let size = size_of::<R>();
        MapArg {
            begin: null,
            size,
            map_type: FROM | PRIVATE | REDUCTION,
            base: null,
            base_size: size,
            align: align_of::<R>(),
            literal: Arg::uninit(),
            device: -1,
            site: None,
        }
    }

    /// The return slot, a private `from` copy.
    #[inline]
    pub fn ret<R>(slot: *mut MaybeUninit<R>) -> Self {
        Self::raw_object(slot as *mut R, FROM | PRIVATE)
    }

    pub(crate) fn range(&self) -> Range {
        Range {
            begin: self.begin as usize,
            size: self.size,
            base: self.base as usize,
            base_size: self.base_size,
            align: self.align,
        }
    }
}

/// What entering one map-list entry left to undo, decided when it was entered (never guessed at the exit by
/// comparing addresses: another thread may have freed and re-created a mapping at the same or another address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Nothing: a literal, empty data, or an associated pointer's memory seen through a zero-length section.
    Nothing,
    /// A block of this construct's own (a firstprivate value, the return slot, storage for a zero-length section,
    /// or a private copy of read-only data that overlaps a mapping; see [`enter_list`]), freed at the exit.
    Private(DeviceAddr),
    /// A reference on the present-table entry holding the range.
    Table,
    /// A pin on a present allocation (a zero-length section of present data).
    Pinned(DeviceAddr),
}

/// Names the entries from `from` on (a mapper struct's, or an owning one's fields') for the variable at `site`.
pub fn name_entries(maps: &mut [MapArg], from: usize, site: &'static VarSite) {
    for m in &mut maps[from..] {
        m.site = Some(site);
    }
}

/// Whether a map whose range overlaps a present entry without lying inside it may get a private copy instead of
/// the error OpenMP's rule against extending a mapping gives: a `to` map of non-atomic data, which only reads it.
/// A private copy made from the host data is what the present copy would show unless a region may have changed
/// the present copy, or another device's: the walk asks the coherence directory, and refuses with
/// [`MapError::Stale`] where the host copy is stale. So a region no longer fails because of another thread's
/// short-lived map, and never computes on stale data.
fn private_on_overlap(m: &MapArg, kind: RefKind) -> bool {
    kind != RefKind::Dynamic
        && m.map_type & TO != 0
        && m.map_type & (FROM | PRESENT | DELETE | HOST_ATOMIC_MASK) == 0
}

/// A map list entered on a device: the kernel arguments, and a guard that releases every mapping without copying
/// anything back if it is dropped before [`MapGuard::exit`] (a panic between mapping and unmapping, or an early
/// return), so nothing stays mapped, or pinned, forever.
pub(crate) struct MapGuard<'a> {
    dev: &'a DeviceEntry,
    maps: &'a [MapArg],
    held: Vec<Held>,
    kind: RefKind,
    /// One kernel argument per entry, packed in the calling convention's block.
    pub args: KernelArgs,
}

impl MapGuard<'_> {
    /// Unmaps, copying back unless `copy_out` is false.
    ///
    /// # Safety
    /// As [`exit_list`].
    pub unsafe fn exit(mut self, copy_out: bool) -> Result<(), MapError> {
        let held = std::mem::take(&mut self.held);
        // SAFETY: forwarded.
        unsafe { exit_list(self.dev, self.maps, &held, self.kind, copy_out) }
    }

    /// Keeps the mappings (a data construct's exit undoes them later) and returns what each entry holds.
    pub fn keep(mut self) -> (KernelArgs, Vec<Held>) {
        (
            std::mem::take(&mut self.args),
            std::mem::take(&mut self.held),
        )
    }
}

impl Drop for MapGuard<'_> {
    fn drop(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // SAFETY: the host ranges are live for as long as the guard (its creator's contract); nothing is copied
        // but atomics a region wrote, which are stored atomically.
        let _ = unsafe { exit_list(self.dev, self.maps, &self.held, self.kind, false) };
    }
}

/// Maps every entry of a map list in and returns one kernel argument each (a slice's is the device address of its
/// base) inside a guard. On error, undoes what it did, copying nothing back.
///
/// Every device copy the kernel will use is held for the whole launch: a reference on a table entry, a pin on a
/// present allocation, or a block of the call's own.
///
/// # Safety
/// Every non-literal entry describes live host memory until the guard's exit.
pub(crate) unsafe fn enter_list<'a>(
    dev: &'a DeviceEntry,
    maps: &'a [MapArg],
    kind: RefKind,
) -> Result<MapGuard<'a>, MapError> {
    let mut g = MapGuard {
        dev,
        maps,
        held: vec![Held::Nothing; maps.len()],
        kind,
        args: KernelArgs::new(maps.len()),
    };
    let mut t = None;
    // An `always, to` map copies host data over a present copy, which nothing can undo: such entries go last, so a
    // refusal of another (no room for a copy, a stale range) leaves the device's data as it was.
    let always_to = |m: &MapArg| m.map_type & (LITERAL | TO | ALWAYS) == TO | ALWAYS;
    let mut deferred = false;
    for last in [false, true] {
        let slots = g.args.iter_mut().zip(g.held.iter_mut());
        for (m, (arg, held)) in maps.iter().zip(slots) {
            if always_to(m) != last {
                deferred |= always_to(m);
                continue;
            }
            // SAFETY: forwarded from the caller.
            match unsafe { enter_one(dev, m, kind, &mut t) } {
                Ok((a, h)) => (*arg, *held) = (a, h),
                Err(e) => {
                    drop(t);
                    // The guard undoes the entries entered so far (the others hold nothing).
                    return Err(e.of(m.site));
                }
            }
        }
        // The common list has no `always, to` entry: one pass.
        if !deferred {
            break;
        }
    }
    Ok(g)
}

/// Enters one map-list entry (`t` is the device's table, locked on first need): the kernel argument it passes and
/// what it holds.
///
/// # Safety
/// As [`enter_list`].
unsafe fn enter_one<'d>(
    dev: &'d DeviceEntry,
    m: &MapArg,
    kind: RefKind,
    t: &mut Option<MutexGuard<'d, MappingTable>>,
) -> Result<(Arg, Held), MapError> {
    if m.map_type & LITERAL != 0 {
        Ok((m.literal, Held::Nothing))
    } else if m.base_size == 0 {
        // Zero-length data: no table entry; the kernel gets a dangling, aligned pointer.
        Ok((Arg::new(m.begin as usize as u64), Held::Nothing))
    } else if m.map_type & HOST_ATOMIC_MASK != 0 {
        in_place_atomics(dev, m)
    } else if m.size == 0 && m.map_type & PRIVATE == 0 {
        // A zero-length section of a non-empty slice: the present copy if its slice is mapped (as libomptarget
        // looks it up), pinned for the launch; else storage of the slice's size so the region's slice is valid,
        // contents unspecified.
        let t = t.get_or_insert_with(|| dev.table());
        // SAFETY: the caller guarantees the host range.
        match unsafe { t.pin_slice(dev, m.range(), m.map_type) } {
            Ok(Some((base, Some(alloc)))) => Ok((Arg::new(base), Held::Pinned(alloc))),
            Ok(Some((base, None))) => Ok((Arg::new(base), Held::Nothing)),
            Ok(None) if m.map_type & PRESENT != 0 => Err(MapError::NotPresent {
                begin: m.begin as usize,
                size: 0,
            }),
            Ok(None) => private_in(dev, m).map_err(MapError::from),
            Err(e) => Err(e),
        }
    } else if m.map_type & PRIVATE != 0 {
        private_in(dev, m).map_err(MapError::from)
    } else {
        let t = t.get_or_insert_with(|| dev.table());
        // SAFETY: the caller guarantees the host range.
        match unsafe { t.enter(dev, m.range(), m.map_type, kind) } {
            Ok(tgt) => Ok((
                Arg::new(tgt - (m.begin as usize - m.base as usize) as u64),
                Held::Table,
            )),
            Err(MapError::Extends { .. }) if private_on_overlap(m, kind) => {
                let r = m.range();
                match t.directory().newer(None, r.begin, r.begin + r.size) {
                    Some(h) => Err(MapError::stale(r.begin, r.begin + r.size, h)),
                    None => private_in(dev, m).map_err(MapError::from),
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// Host atomics are never copied: host threads may update them while a region runs, so any copy loses updates
/// (a copy back reverts the host's; a copy made while a region runs misses the device's). A device whose memory is
/// the host's uses them in place, at their host address, whatever the map type; nothing is entered in its present
/// table. Any other device cannot reach them: [`MapError::AtomicsNotShared`].
fn in_place_atomics(dev: &DeviceEntry, m: &MapArg) -> Result<(Arg, Held), MapError> {
    if dev.memory_is_host() {
        Ok((Arg::new(m.base as usize as u64), Held::Nothing))
    } else {
        Err(MapError::AtomicsNotShared {
            begin: m.begin as usize,
            end: m.begin as usize + m.size,
        })
    }
}

/// A block of the call's own holding the whole slice, with the mapped range copied in for `to`; returns its base's
/// address as the kernel argument.
fn private_in(dev: &DeviceEntry, m: &MapArg) -> Result<(Arg, Held), PluginError> {
    let p = dev.alloc(m.base_size.max(m.size), m.align)?;
    let offset = (m.begin as usize - m.base as usize) as u64;
    if m.map_type & TO != 0 && m.size > 0 {
        // SAFETY: the caller passes a live host range of `size` bytes; it lies in the block just allocated.
        if let Err(e) = unsafe { dev.submit(p + offset, m.begin as usize, m.size, m.map_type) } {
            // SAFETY: ours, unused.
            unsafe { dev.free(p) };
            return Err(e);
        }
    }
    Ok((Arg::new(p), Held::Private(p)))
}

/// Unmaps what [`enter_list`] mapped (`held[i]` says what `maps[i]` holds); copies back unless `copy_out` is
/// false. A `held` shorter than `maps` undoes the first entries only.
///
/// # Safety
/// As [`enter_list`]; `FROM` ranges are writable.
pub(crate) unsafe fn exit_list(
    dev: &DeviceEntry,
    maps: &[MapArg],
    held: &[Held],
    kind: RefKind,
    copy_out: bool,
) -> Result<(), MapError> {
    let mut result = Ok(());
    let mut t = None;
    // Last to first, as libomptarget's targetDataEnd: a section exits before the slice holding it.
    for (m, &h) in maps.iter().zip(held).rev() {
        match h {
            Held::Nothing => {}
            Held::Private(p) => {
                if copy_out && m.map_type & FROM != 0 && m.size > 0 {
                    let offset = (m.begin as usize - m.base as usize) as u64;
                    // SAFETY: the caller guarantees `FROM` ranges are writable; the block holds the range.
                    if let Err(e) =
                        unsafe { dev.retrieve(m.begin as usize, p + offset, m.size, m.map_type) }
                    {
                        result = Err(MapError::from(e).of(m.site));
                    }
                }
                // SAFETY: allocated by `private_in` for this construct, which is over.
                unsafe { dev.free(p) };
            }
            Held::Pinned(alloc) => {
                let t = t.get_or_insert_with(|| dev.table());
                // SAFETY: pinned by `enter_list` for this construct, which is over.
                unsafe { t.unpin(dev, alloc) };
            }
            Held::Table => {
                let t = t.get_or_insert_with(|| dev.table());
                // SAFETY: the caller guarantees the host range.
                if let Err(e) =
                    unsafe { t.exit(dev, m.begin as usize, m.size, m.map_type, kind, copy_out) }
                {
                    result = Err(e.of(m.site));
                }
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    //! The map-list walk against the fake device (runs under Miri): what a construct holds is what it releases.
    use super::*;
    use crate::device::fake::FakeDevice;

    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Padded {
        tag: u8,
        value: u32,
    }

    /// Under Miri: building a literal from a value with padding reads no uninitialised byte as a number.
    #[test]
    fn small_values_with_padding_become_literals_without_reading_padding() {
        let p = Padded { tag: 7, value: 42 };
        // SAFETY: `Padded` is plain data.
        let m = unsafe { MapArg::value(&p) };
        assert_eq!(m.map_type, LITERAL);
        // The initialised bytes are the value's fields.
        let bytes = m.literal.as_ptr() as *const u8;
        // SAFETY: bytes 0 and 4..8 were copied from initialised fields.
        let (tag, value) = unsafe { (*bytes, (bytes.add(4) as *const u32).read_unaligned()) };
        assert_eq!((tag, value), (7, 42));
        assert_eq!(p.tag + p.value as u8, 49);
    }

    fn entry() -> (DeviceEntry, FakeDevice) {
        let fake = FakeDevice::default();
        (DeviceEntry::new(fake.observed()), fake)
    }

    #[test]
    fn a_zero_length_section_pins_the_present_copy_and_frees_it_once() {
        let (dev, fake) = entry();
        let x = [7u64; 8];
        let whole = [MapArg::slice(&x[..] as *const [u64], TO)];
        let empty = [MapArg::section(&x[..] as *const [u64], 3, 3, TO)];
        unsafe {
            // A data region maps `x`; a region maps `x[3..3]` and gets the present copy.
            let (_, data) = enter_list(&dev, &whole, RefKind::Structured)
                .unwrap()
                .keep();
            let region = enter_list(&dev, &empty, RefKind::Structured).unwrap();
            let base = region.args[0].assume_init();
            assert_eq!(Some(base), dev.table().lookup(x.as_ptr() as usize, 64));
            // The data region ends (another thread) while the region runs: its copy stays for the region.
            exit_list(&dev, &whole, &data, RefKind::Structured, true).unwrap();
            assert_eq!(dev.table().len(), 0);
            assert_eq!(fake.live(), 1);
            assert_eq!(fake.read(base, 64), 7u64.to_ne_bytes().repeat(8));
            // The region's exit frees it exactly once (the fake device panics on a double free).
            region.exit(true).unwrap();
        }
        assert_eq!(fake.live(), 0);
    }

    /// Atomics are never copied: a device whose memory is not the host's (the fake's) refuses them, allocating and
    /// copying nothing, and leaves nothing entered.
    #[test]
    fn atomics_are_refused_by_a_device_with_memory_of_its_own() {
        use std::sync::atomic::AtomicU32;
        let (dev, fake) = entry();
        let a: Vec<AtomicU32> = (0..4).map(AtomicU32::new).collect();
        let x = [1u32; 4];
        let maps = [
            MapArg::slice(&x[..] as *const [u32], TO),
            MapArg::slice(&a[..] as *const [AtomicU32], TO | FROM),
        ];
        match unsafe { enter_list(&dev, &maps, RefKind::Region) } {
            Err(e @ MapError::AtomicsNotShared { .. }) => {
                assert!(e.to_string().contains("atomics are never copied"), "{e}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("atomics copied to a device of its own memory"),
        }
        assert_eq!((dev.table().len(), fake.live(), fake.outs()), (0, 0, 0));
    }

    #[test]
    fn a_guard_dropped_by_a_panic_releases_everything_without_copying_back() {
        let (dev, fake) = entry();
        let mut y = vec![1u32; 16];
        let x = [2u32; 16];
        let maps = [
            MapArg::slice(&mut y[..] as *mut [u32] as *const [u32], TO | FROM),
            MapArg::section(&x[..] as *const [u32], 4, 4, TO),
            MapArg::section(&x[..] as *const [u32], 0, 8, TO),
        ];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let g = unsafe { enter_list(&dev, &maps, RefKind::Structured) }.unwrap();
            assert_eq!(
                fake.live(),
                3,
                "y, storage for the empty section, x's section"
            );
            fake.write(unsafe { g.args[0].assume_init() }, &[9u8; 64]);
            panic!("the plugin failed between mapping and unmapping");
        }));
        assert!(r.is_err());
        assert_eq!((dev.table().len(), fake.live(), fake.outs()), (0, 0, 0));
        assert_eq!(y, [1; 16], "nothing copied back");
    }

    #[test]
    fn read_only_data_overlapping_a_mapping_gets_a_private_copy_and_writable_data_an_error() {
        let (dev, fake) = entry();
        let mut y: Vec<u16> = (0..32).collect();
        let section = [MapArg::section(&y[..] as *const [u16], 4, 8, TO)];
        unsafe {
            let (_, held) = enter_list(&dev, &section, RefKind::Structured)
                .unwrap()
                .keep();
            let whole = [MapArg::slice(&y[..] as *const [u16], TO)];
            let g = enter_list(&dev, &whole, RefKind::Structured).unwrap();
            let p = g.args[0].assume_init();
            assert_eq!(
                fake.read(p + 62, 2),
                31u16.to_ne_bytes(),
                "a copy of the whole slice"
            );
            assert_eq!(dev.table().len(), 1, "not entered in the table");
            g.exit(true).unwrap();
            let tofrom = [MapArg::slice(
                &mut y[..] as *mut [u16] as *const [u16],
                TO | FROM,
            )];
            assert!(matches!(
                enter_list(&dev, &tofrom, RefKind::Structured),
                Err(MapError::Extends { .. })
            ));
            exit_list(&dev, &section, &held, RefKind::Structured, true).unwrap();
        }
        assert_eq!(fake.live(), 0);
        y[0] = 1;
    }

    #[test]
    fn a_private_copy_of_data_whose_present_section_a_region_changed_is_refused() {
        let (dev, fake) = entry();
        let mut y: Vec<u16> = (0..32).collect();
        // From a mutable borrow: the `from` update writes the host buffer.
        let a = y.as_mut_ptr() as usize;
        let section = [MapArg::section(
            &mut y[..] as *mut [u16] as *const [u16],
            4,
            8,
            TO | FROM,
        )];
        unsafe {
            let (_, held) = enter_list(&dev, &section, RefKind::Structured)
                .unwrap()
                .keep();
            // A region writes the section on the device.
            let g = enter_list(&dev, &section, RefKind::Region).unwrap();
            g.exit(true).unwrap();
            // A region reading the whole slice would get a private copy of the host's stale values.
            let whole = [MapArg::slice(&y[..] as *const [u16], TO)];
            let before = fake.live();
            match enter_list(&dev, &whole, RefKind::Region) {
                Err(MapError::Stale {
                    mapped_begin,
                    mapped_end,
                    ..
                }) => assert_eq!((mapped_begin, mapped_end), (a + 8, a + 16)),
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("a private copy of stale data"),
            }
            assert_eq!(fake.live(), before, "nothing left allocated");
            // Brought back to the host, the section is current there: the private copy is right again.
            dev.table().update(&dev, a + 8, 8, FROM).unwrap();
            enter_list(&dev, &whole, RefKind::Region)
                .unwrap()
                .exit(true)
                .unwrap();
            exit_list(&dev, &section, &held, RefKind::Structured, true).unwrap();
        }
        assert_eq!(fake.live(), 0);
        y[0] = 1;
    }
}
