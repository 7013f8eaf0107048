//! Unstructured mapping of borrowed data: `offload::data_scope(|s| ..)` and `target_enter_data!(map(..: x), scope(s))`.
//!
//! `target_enter_data!` alone takes owned buffers, because a `Mapped` may be forgotten: borrowed data left mapped
//! after its borrow ends could be freed and its address reused by other data, which would then be found "present"
//! with stale contents. Inside a scope, the borrow outlives the scope (as `std::thread::scope`'s threads may borrow
//! what outlives it), and the scope releases at its end whatever was entered in it and not exited, forgotten or not,
//! so no mapping outlives its data. Here borrowed data (a `&mut [T]`, a `&mut Vec<T>`, a `#[derive(Mapper)]` struct
//! of slices) is entered in one place and exited in another, as OpenMP's `target enter data` / `target exit data`.

use super::backend::{self, mapping_failed};
use super::maplist::{enter_list, exit_list, Held, MapArg};
use super::mapped::{exit_device, normalize_device, ExitData};
use super::source::{MapSourceMut, MapTarget};
use crate::device::{default_device, DeviceEntry, RefKind};
use crate::observe::Label;
use offload_model::abi::map_type::DELETE;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

/// What `target_enter_data!(.., scope(s))` takes by value: a source whose data is not stored inline in it, so moving
/// the value (into the [`ScopedMapped`], and that wherever the program moves it) leaves the mapped data in place. A
/// reference to any source (`&mut [T]`, `&mut Vec<T>`, `&mut [T; N]`), an owned heap buffer (`Vec<T>`, `Box<[T]>`), or a
/// `#[derive(Mapper)]` struct of slices; not a number or an array by value.
///
/// # Safety
/// The entries [`MapTarget::map_args`] gives for [`MapSourceMut::map_mut`] name memory outside the value itself, which
/// stays where it is while the value is not dropped.
#[diagnostic::on_unimplemented(
    message = "`target_enter_data!(.., scope(s))` cannot take `{Self}` by value",
    label = "its data would move with it",
    note = "enter a reference (`let r = &mut x;` then `map(to: r)`), a `Vec`, a `Box<[T]>` or a mapper struct of \
            slices"
)]
pub unsafe trait ScopedSource: MapSourceMut {}

// SAFETY: the data is behind the reference, borrowed for the reference's life.
unsafe impl<S: MapSourceMut + ?Sized> ScopedSource for &mut S {}
// SAFETY: a Vec's buffer moves only when it grows, and the `ScopedMapped` gives out only the slice.
unsafe impl<T: super::types::DeviceCopy> ScopedSource for Vec<T> {}
// SAFETY: a boxed slice's storage never moves.
unsafe impl<T: super::types::DeviceCopy> ScopedSource for Box<[T]> {}

/// A scope for [`ScopedMapped`] data: see [`data_scope`].
pub struct DataScope<'scope, 'env: 'scope> {
    /// What each entry in the scope holds, by slot, until its exit (`None` after it).
    live: RefCell<Vec<Option<Entry>>>,
    /// Invariant in both lifetimes, as `std::thread::Scope`.
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// One entered variable: its device, its map-list entries as entered (their host addresses key the table; nothing
/// reads or writes the host through them after the entry) and what entering them holds. Dropped, it releases what it
/// still holds without copying back (an exit takes that over first), so the scope's end releases every entry left even
/// if one release panics.
struct Entry {
    dev: &'static DeviceEntry,
    maps: Vec<MapArg>,
    held: Vec<Held>,
}

impl Entry {
    /// What the entry holds, for an exit to end instead of the drop.
    fn take(&mut self) -> (Vec<MapArg>, Vec<Held>) {
        (
            std::mem::take(&mut self.maps),
            std::mem::take(&mut self.held),
        )
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let (maps, held) = self.take();
        if maps.is_empty() {
            return;
        }
        let _scope = self.dev.scope(Label::Construct("data_scope release"));
        let maps: Vec<MapArg> = maps.iter().map(|m| MapArg { map_type: 0, ..*m }).collect();
        // SAFETY: no copy back but of atomics a region wrote, stored atomically into data that outlives the scope;
        // the table is keyed by the addresses entered.
        let _ = unsafe { exit_list(self.dev, &maps, &held, RefKind::Dynamic, false) };
    }
}

/// Runs `f` with a scope in which `target_enter_data!(map(..: x), scope(s))` maps borrowed data until
/// `target_exit_data!` or, at the latest, the scope's end, where every entry still mapped (dropped or forgotten
/// without an exit) is released without copying back. Data entered in the scope must outlive it.
///
/// ```
/// use offload::{data_scope, target, target_enter_data, target_exit_data};
///
/// #[target]
/// fn scale(y: &mut [f64]) {
///     for v in y.iter_mut() {
///         *v *= 2.0;
///     }
/// }
///
/// # // A doctest has no device image, and a region whose data is present on a device never falls back to the host.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
/// let mut y = vec![1.0; 4];
/// data_scope(|s| {
///     let v = &mut y; // borrowed for the scope
///     let mut m = target_enter_data!(map(to: v), scope(s));
///     scale(&mut m); // present: nothing is copied
///     target_exit_data!(map(from: m)); // copies back and returns the `&mut Vec<f64>`
/// });
/// assert_eq!(y, [2.0; 4]);
/// ```
pub fn data_scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope DataScope<'scope, 'env>) -> R,
{
    let scope = DataScope {
        live: RefCell::new(Vec::new()),
        scope: PhantomData,
        env: PhantomData,
    };
    // Released on every way out, unwinding included: the borrows end when this returns.
    struct End<'a, 'scope, 'env>(&'a DataScope<'scope, 'env>);
    impl Drop for End<'_, '_, '_> {
        fn drop(&mut self) {
            // Each entry releases itself as it drops (the rest too, if one panics).
            let left: Vec<Entry> = self.0.live.borrow_mut().drain(..).flatten().collect();
            drop(left);
        }
    }
    let _end = End(&scope);
    f(&scope)
}

/// Borrowed data `target_enter_data!(.., scope(s))` mapped: holds it (and its borrow) until `target_exit_data!`,
/// which returns it. Derefs to the data. Dropping it releases the mapping without copying back; so does the scope's
/// end if it was forgotten.
pub struct ScopedMapped<'scope, V: ScopedSource> {
    value: Option<V>,
    scope: &'scope RefCell<Vec<Option<Entry>>>,
    /// The scope's slot holding this entry (none on the host).
    slot: Option<usize>,
    /// The device number the entry named, for `target_exit_data!(device(..))`.
    named: i32,
}

impl<'scope, 'env> DataScope<'scope, 'env> {
    /// `target_enter_data!(map(TYPE: v), scope(s))`.
    #[track_caller]
    pub fn enter<V: ScopedSource + 'env>(
        &'scope self,
        value: V,
        map_type: u64,
        device: Option<i32>,
        cond: bool,
    ) -> ScopedMapped<'scope, V> {
        let named = normalize_device(device.unwrap_or_else(default_device));
        self.enter_on(
            backend::scoped_device("target_enter_data!", device, cond),
            value,
            map_type,
            named,
        )
    }

    /// [`DataScope::enter`] on `dev` (`None`: the host), the device number `named`.
    #[track_caller]
    fn enter_on<V: ScopedSource + 'env>(
        &'scope self,
        dev: Option<&'static DeviceEntry>,
        mut value: V,
        map_type: u64,
        named: i32,
    ) -> ScopedMapped<'scope, V> {
        let slot = dev.map(|d| {
            let _scope = d.scope(Label::Construct("target_enter_data!"));
            let mut maps = Vec::new();
            let target: *const V::Target = value.map_mut();
            // SAFETY: `value` is borrowed for the scope, which outlives every use of the entries.
            unsafe { V::Target::map_args(target, None, map_type, &mut maps) };
            // SAFETY: as above; the scope releases the entry at the latest at its end, before the borrow ends.
            let held = unsafe { enter_list(d, &maps, RefKind::Dynamic) }
                .unwrap_or_else(|e| mapping_failed("target_enter_data!", d, e))
                .keep()
                .1;
            let mut live = self.live.borrow_mut();
            live.push(Some(Entry { dev: d, maps, held }));
            live.len() - 1
        });
        ScopedMapped {
            value: Some(value),
            scope: &self.live,
            slot,
            named,
        }
    }
}

impl<V: ScopedSource> ScopedMapped<'_, V> {
    /// `target_exit_data!` with `map_type` (from or release, and modifiers); returns the data. A `device(..)` clause
    /// must name the device the entry named. `delete` panics (after releasing): entered data is borrowed, so other
    /// regions and data regions may hold it (a shared slice, a part of a mapped buffer), and `delete` would end their
    /// references and free the device copy under them. The entries are taken again from the data as it is now: one that
    /// changed (a mapper struct's field pointed elsewhere) is released without copying back, and the exit panics,
    /// since its device data has no host memory to return to.
    #[track_caller]
    pub fn exit_on(mut self, map_type: u64, device: Option<i32>) -> V {
        exit_device(device, self.named);
        if map_type & DELETE != 0 {
            // (Dropping `self` releases the entry.)
            panic!(
                "offload: target_exit_data!(map(delete: ..)) of data entered in a data scope: the data is borrowed, \
                 so other regions and data regions may hold it, and `delete` would free the device copy under them; \
                 it was released instead (exit it with `release`, or `from` to copy back)"
            );
        }
        let mut value = self.value.take().expect("present until exit");
        let Some(mut entry) = self
            .slot
            .take()
            .and_then(|s| self.scope.borrow_mut()[s].take())
        else {
            return value;
        };
        let mut now = Vec::new();
        let target: *const V::Target = value.map_mut();
        // SAFETY: `value` is held exclusively here; `from` writes through these fresh entries.
        unsafe { V::Target::map_args(target, None, map_type, &mut now) };
        let same = now.len() == entry.maps.len()
            && now
                .iter()
                .zip(&entry.maps)
                .all(|(a, b)| (a.begin, a.size) == (b.begin, b.size));
        if !same {
            drop(entry); // released
            panic!(
                "offload: target_exit_data! of `{}`: its data is not where it was when it was entered (a field was \
                 pointed at other data meanwhile), so the device data was released without copying back",
                std::any::type_name::<V>()
            );
        }
        let (dev, (_, held)) = (entry.dev, entry.take());
        let _scope = dev.scope(Label::Construct("target_exit_data!"));
        // SAFETY: the entries are the entered ones, from the data itself, held exclusively.
        unsafe { exit_list(dev, &now, &held, RefKind::Dynamic, true) }
            .unwrap_or_else(|e| mapping_failed("target_exit_data!", dev, e));
        value
    }

    /// The device the data is mapped on, if any.
    pub fn device(&self) -> Option<i32> {
        self.slot
            .and_then(|s| self.scope.borrow()[s].as_ref().map(|e| e.dev.number))
    }
}

impl<V: ScopedSource> Drop for ScopedMapped<'_, V> {
    fn drop(&mut self) {
        if let Some(entry) = self
            .slot
            .take()
            .and_then(|s| self.scope.borrow_mut()[s].take())
        {
            drop(entry); // released
        }
    }
}

impl<V: ScopedSource> Deref for ScopedMapped<'_, V> {
    type Target = V::Target;
    fn deref(&self) -> &V::Target {
        // `value` leaves only in `exit_on`, which consumes the value.
        self.value.as_ref().expect("present until exit").map_ref()
    }
}

impl<V: ScopedSource> DerefMut for ScopedMapped<'_, V> {
    fn deref_mut(&mut self) -> &mut V::Target {
        self.value.as_mut().expect("present until exit").map_mut()
    }
}

impl<V: ScopedSource> ExitData for ScopedMapped<'_, V> {
    type Owner = V;
    #[track_caller]
    fn exit_data(self, map_type: u64, device: Option<i32>) -> V {
        self.exit_on(map_type, device)
    }
}

#[cfg(test)]
mod tests {
    //! The scope against the fake device (runs under Miri): what an entry maps, an exit copies back through the
    //! data's own borrow after the host wrote it, and the scope's end releases what was forgotten.
    use super::*;
    use crate::device::fake::FakeDevice;
    use offload_model::abi::map_type::{FROM, TO};
    use std::sync::OnceLock;

    /// One device for the module's test, in a static (a `DeviceEntry` in a scope must be `'static`).
    fn device() -> (&'static DeviceEntry, &'static FakeDevice) {
        static DEV: OnceLock<(DeviceEntry, FakeDevice)> = OnceLock::new();
        let (d, f) = DEV.get_or_init(|| {
            let fake = FakeDevice::default();
            (DeviceEntry::new(fake.observed()), fake)
        });
        (d, f)
    }

    #[test]
    fn entries_map_until_their_exit_or_the_scopes_end() {
        let (dev, fake) = device();
        let mut v = vec![1u32; 16];
        let mut w = vec![3u32; 4];
        let r = data_scope(|s| {
            let m_w = s.enter_on(Some(dev), &mut w, TO, 0);
            let mut m = s.enter_on(Some(dev), &mut v, TO, 0);
            assert_eq!((dev.table().len(), fake.live(), fake.ins()), (2, 2, 2));
            // The host writes its copy through the `ScopedMapped`; the device's copy is written as a region would.
            m[0] = 5;
            let tgt = dev.table().lookup(m.as_ptr() as usize, 64).unwrap();
            fake.write(tgt, &7u32.to_ne_bytes().repeat(16));
            let back = m.exit_on(FROM, None);
            assert_eq!(
                back[..],
                [7; 16],
                "copied back through the exit's own borrow"
            );
            back[1] = 9;
            std::mem::forget(m_w);
            assert_eq!(dev.table().len(), 1, "the forgotten entry is the scope's");
            back.len()
        });
        assert_eq!(r, 16);
        assert_eq!(
            (dev.table().len(), fake.live()),
            (0, 0),
            "released at the scope's end"
        );
        assert_eq!(w, [3; 4], "a release copies nothing back");
        assert_eq!(v[..2], [7, 9]);
    }
}
