//! Structured data (OpenMP's `declare mapper`): what `#[derive(Mapper)]` implements for a struct holding slices, and
//! what a region call and the data constructs do with it. The derive writes the per-field code (it alone knows the
//! fields); this module holds the trait and the generic glue the expansions call.

use super::maplist::MapArg;
use super::mapped::Mapped;
use super::scope::ScopedMapped;
use super::source::{MapSource, MapSourceMut, MapTarget, Section};
use super::types::DeviceCopy;
use offload_model::abi::map_type::{DEVICE_WRITES, FROM};

/// A struct whose slice and reference fields are mapped and whose other fields are firstprivate values, field by
/// field in declaration order (`offload_frontend::mapper::fields`, which the outliner's kernel entry reads too).
/// Implemented by `#[derive(offload::Mapper)]`; not meant to be implemented by hand.
///
/// # Safety
/// - [`Mapper::Raw`] holds raw pointers and `Firstprivate` values only, so reading it twice (a parallel fallback
///   rebuilds the struct in each thread) duplicates nothing that owns.
/// - [`Mapper::raw`] returns, per slice or object field, a raw pointer derived from that field's own reference
///   (covering exactly its data), and per value field a copy; [`Mapper::from_raw`] rebuilds the struct with each
///   field from the same part, the reference fields as `&`/`&mut` of the pointer.
/// - [`Mapper::maps`] pushes, per field in declaration order, what a parameter of the field's type pushes: for a
///   region (`kernel`), a slice's `MapArg::slice` of the pointer and `MapArg::literal` of its length, an object's
///   `MapArg::object`, a value's `MapArg::value` (the value's type checked `Firstprivate`); for a data construct,
///   the slices' and objects' entries only. A `FROM` bit goes only to `&mut` fields' entries.
/// - [`Mapper::PARALLEL_ERROR`] is `Some` if any field is a `&mut` (which the threads of a parallel region would
///   share).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a mapper struct",
    label = "a parameter with a lifetime argument is a struct holding slices",
    note = "add `#[derive(offload::Mapper)]` to the struct, whose slice fields are then mapped and other fields passed \
            by value"
)]
pub unsafe trait Mapper: Sized {
    /// The struct's raw parts: per slice or object field a raw pointer, per value field its value (`Copy`, as every
    /// `Firstprivate` type is).
    type Raw;
    /// Why a parallel region cannot take the struct (it has a `&mut` field, naming it and the fix), or `None`.
    const PARALLEL_ERROR: Option<&'static str>;
    /// How many kernel arguments the struct takes: its fields' slots (`offload_frontend::mapper::Field::kernel_args`). The
    /// kernel entry, written by the outliner from the struct's definition, is checked against the same number,
    /// stated on the struct in the device crate (`offload_device::__rt::MapperSlots`).
    const SLOTS: usize;

    /// The raw parts of `*this`, its reference fields' pointers derived from the fields' own references.
    ///
    /// # Safety
    /// `this` points to a live struct.
    unsafe fn raw(this: *mut Self) -> Self::Raw;

    /// The struct rebuilt from its raw parts.
    ///
    /// # Safety
    /// `raw` came from [`Mapper::raw`] of a struct whose borrows outlive the result, and nothing else uses the
    /// `&mut` fields' data while the result lives.
    unsafe fn from_raw(raw: Self::Raw) -> Self;

    /// Pushes the fields' map-list entries, each field's map type combined with `clause`
    /// (`offload_model::abi::map_type::mapper_field`): one per kernel argument for a region (`kernel`), the slices
    /// and objects only for a data construct.
    ///
    /// # Safety
    /// `raw` came from [`Mapper::raw`] of a struct borrowed (exclusively, if any entry has `FROM`) for as long as
    /// the entries are used; the value entries point into `raw`, which must outlive them too.
    unsafe fn maps(raw: &Self::Raw, clause: u64, kernel: bool, out: &mut Vec<MapArg>);
}

/// A mapper struct's raw parts, typed by the struct, so the expansion never names the struct's type.
pub struct MapperRaw<M: Mapper>(M::Raw);

impl<M: Mapper> MapperRaw<M> {
    /// The raw parts of `m`, for a region call taking it (by value: the expansion moved it into a local; or its
    /// `&mut`).
    pub fn new(m: &mut M) -> Self {
        // SAFETY: `m` is live.
        MapperRaw(unsafe { M::raw(m) })
    }

    /// The struct the region's host fallback gets.
    ///
    /// # Safety
    /// As [`Mapper::from_raw`]: the struct `new` read is borrowed for the whole call, and the fallback is its only
    /// user while it runs (a parallel region's fallback shares only structs without `&mut` fields).
    pub unsafe fn rebuild(&self) -> M {
        // SAFETY: forwarded; the parts are raw pointers and `Firstprivate` (so `Copy`) values, copied by the read.
        unsafe { M::from_raw(std::ptr::read(&self.0)) }
    }

    /// Pushes the region's map-list entries for the struct (one per kernel argument).
    ///
    /// # Safety
    /// As [`Mapper::maps`]: `self` outlives the map list's use, and the struct stays borrowed that long.
    pub unsafe fn kernel_maps(&self, clause: u64, out: &mut Vec<MapArg>) {
        let before = out.len();
        // SAFETY: forwarded.
        unsafe { M::maps(&self.0, clause, true, out) }
        debug_assert_eq!(
            out.len() - before,
            M::SLOTS,
            "a mapper struct's entries are its slots"
        );
    }
}

/// A region's compile-time check that a parallel region's mapper struct has no `&mut` field.
pub const fn parallel_mapper<M: Mapper>() {
    if let Some(msg) = M::PARALLEL_ERROR {
        panic!("{}", msg)
    }
}

/// A data construct's section (`s[lo..hi]`) names a slice; of a mapper struct it is a mistake the macro cannot see.
#[track_caller]
fn no_section<M>(section: Section) {
    assert!(
        section.is_none(),
        "offload: a section needs a slice, not the mapper struct `{}`",
        std::any::type_name::<M>()
    );
}

/// The data-construct entries of the mapper struct `this` points to (its slices and objects, each by its map type
/// combined with `clause`).
///
/// # Safety
/// `this` points to a live struct, borrowed exclusively if `clause` has `FROM` and for as long as the entries are
/// used.
#[track_caller]
pub unsafe fn mapper_data_maps<M: Mapper>(
    this: *const M,
    section: Section,
    clause: u64,
    out: &mut Vec<MapArg>,
) {
    no_section::<M>(section);
    // SAFETY: per the contract; reference fields' pointers derive from the fields' own references.
    let raw = unsafe { M::raw(this.cast_mut()) };
    // SAFETY: data entries never point into `raw` (only values do, and a data construct has none).
    unsafe { M::maps(&raw, clause, false, out) }
}

/// A struct that owns its arrays (`Vec<T>` fields, C's `struct { double *concs; .. }`), mapped field by field when a
/// region takes it as `&S` or `&mut S`, or a data construct maps it: each `Vec` as a slice of its elements, each
/// other field (a `Firstprivate` value) passed by value. Implemented by `#[derive(offload::Mapper)]` on such a struct;
/// not meant to be implemented by hand.
///
/// # Safety
/// [`OwnedMapper::maps`] pushes, per field in declaration order, what [`Mapper::maps`] pushes for a field of its
/// kind: a `Vec`'s entries are a slice's over its elements, taken with `as_mut_ptr` when `mutable` and `as_ptr`
/// otherwise (neither makes a reference to the elements, so the pointers stay valid beside the region's own
/// reference to the struct), its length's literal, and `FROM` or `DEVICE_WRITES` only when `mutable`; a value's
/// entry points into `*this`.
pub unsafe trait OwnedMapper: Sized {
    /// How many kernel arguments the struct takes, as [`Mapper::SLOTS`].
    const SLOTS: usize;

    /// Pushes the fields' map-list entries, each field's map type combined with `clause`: one per kernel argument for
    /// a region (`kernel`), the `Vec`s only for a data construct.
    ///
    /// # Safety
    /// `this` points to a live struct, borrowed exclusively when `mutable` (and shared otherwise) for as long as the
    /// entries are used.
    unsafe fn maps(
        this: *mut Self,
        mutable: bool,
        clause: u64,
        kernel: bool,
        out: &mut Vec<MapArg>,
    );
}

/// A region's `&T` or `&mut T` parameter, before `T` says how it crosses: an owning mapper struct field by field
/// ([`ViaOwnedMapper`]), anything else as one object ([`ViaObject`]). The expansion calls
/// `(&&RefParam::new(..)).ref_param()`, which method resolution finds on `&RefParam<T>` first (when `T:
/// OwnedMapper`) and on `RefParam<T>` otherwise (autoref specialisation: the type is concrete where it is called).
pub struct RefParam<T> {
    ptr: *mut T,
    mutable: bool,
}

impl<T> RefParam<T> {
    /// The parameter's pointer, derived from its `&mut` when `mutable`, else from its `&` (never written then).
    pub fn new(ptr: *mut T, mutable: bool) -> Self {
        RefParam { ptr, mutable }
    }
}

/// [`RefParam`]'s choice for an owning mapper struct.
pub trait ViaOwnedMapper<T> {
    /// The parameter as an owning mapper struct.
    fn ref_param(&self) -> OwnedMapperParam<T>;
}

impl<T: OwnedMapper> ViaOwnedMapper<T> for &RefParam<T> {
    fn ref_param(&self) -> OwnedMapperParam<T> {
        OwnedMapperParam(self.ptr, self.mutable)
    }
}

/// [`RefParam`]'s choice for anything else: one object.
pub trait ViaObject<T> {
    /// The parameter as one object.
    fn ref_param(&self) -> ObjectParam<T>;
}

impl<T> ViaObject<T> for RefParam<T> {
    fn ref_param(&self) -> ObjectParam<T> {
        ObjectParam(self.ptr)
    }
}

/// A `&T`/`&mut T` parameter's map-list entries, once [`RefParam`] chose how it crosses.
///
/// # Safety
/// [`RefMaps::kernel_maps`] pushes exactly the entries the outliner's kernel entry unpacks for the parameter.
pub unsafe trait RefMaps {
    /// Pushes the parameter's entries (one per kernel argument), with the parameter's map type `bits`.
    ///
    /// # Safety
    /// The referent is borrowed as the parameter says (exclusively when `&mut`) for as long as the entries are used.
    unsafe fn kernel_maps(self, bits: u64, out: &mut Vec<MapArg>);
}

/// A `&T`/`&mut T` parameter mapped as one object (`T: DeviceCopy`).
pub struct ObjectParam<T>(*mut T);

// SAFETY: one object's entry, as the entry unpacks a `&T` it does not know as an owning mapper struct.
unsafe impl<T: DeviceCopy> RefMaps for ObjectParam<T> {
    unsafe fn kernel_maps(self, bits: u64, out: &mut Vec<MapArg>) {
        out.push(MapArg::object::<T>(self.0, bits))
    }
}

/// A `&S`/`&mut S` parameter of an owning mapper struct, mapped field by field.
pub struct OwnedMapperParam<T>(*mut T, bool);

// SAFETY: the fields' entries, which `OwnedMapper`'s contract makes the ones the entry unpacks.
unsafe impl<T: OwnedMapper> RefMaps for OwnedMapperParam<T> {
    unsafe fn kernel_maps(self, bits: u64, out: &mut Vec<MapArg>) {
        // The fields say which of them the device writes.
        let clause = bits & !DEVICE_WRITES;
        // SAFETY: forwarded; `self.0` came from the parameter's own reference, of the mutability `self.1` says.
        unsafe { T::maps(self.0, self.1, clause, true, out) }
    }
}

/// The data-construct entries of the owning mapper struct `this` points to (its `Vec`s, each by its map type combined
/// with `clause`).
///
/// # Safety
/// `this` points to a live struct, borrowed exclusively if `clause` has `FROM` and for as long as the entries are
/// used.
#[track_caller]
pub unsafe fn owned_mapper_data_maps<M: OwnedMapper>(
    this: *const M,
    section: Section,
    clause: u64,
    out: &mut Vec<MapArg>,
) {
    no_section::<M>(section);
    let mutable = clause & FROM != 0;
    // SAFETY: per the contract: exclusive where the entries write the host copy.
    unsafe { M::maps(this.cast_mut(), mutable, clause, false, out) }
}

/// A struct that owns its arrays (`#[derive(Mapper)]` with `Vec` fields) while a data construct maps them: what the
/// data constructs map it as, and what a `target_data!` block (`&Fixed<S>`, or `&mut Fixed<S>` where the map writes
/// it) and a [`ScopedMapped`](crate::ScopedMapped) of it see. It derefs to the struct, shared only, so its fields read
/// as they are (`s.concs[k]`, `s.concs.len()`, `s.lookups`) and it coerces to a region's `&S` parameter; a region's
/// `&mut S` parameter takes `&mut Fixed<S>` too (see [`MutArg`]). Nothing can grow, shrink, replace or drop a `Vec`
/// field through it, so the mapped memory can be neither freed nor reused while the data is present (a new `Vec` at
/// the same address would otherwise be found "present" and run on the old device copy). Write a field's elements on
/// the host with [`Fixed::elems_mut`]; change the struct itself before or after the construct.
///
/// ```
/// use offload::{target, target_data, target_update, Mapper};
///
/// #[derive(Mapper)]
/// pub struct Sim {
///     concs: Vec<f64>,
///     lookups: usize,
/// }
///
/// #[target]
/// fn refresh(s: &mut Sim) {
///     for c in s.concs.iter_mut() {
///         *c *= 2.0;
///     }
/// }
///
/// # // A doctest has no device image: the host stands in.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
/// let mut s = Sim { concs: vec![1.0; 4], lookups: 4 };
/// target_data!(map(tofrom: s) => {        // `s: &mut offload::Fixed<Sim>` inside
///     s.elems_mut(|s| &s.concs)[0] = 5.0; // the host copy ..
///     target_update!(to: s);              // .. sent to the device copy
///     refresh(s);                         // present: nothing is copied
///     assert_eq!(s.concs.len(), s.lookups);
///     // s.concs.push(1.0);               // error: `Fixed` gives no `&mut Vec`
/// });
/// assert_eq!(s.concs, [10.0, 2.0, 2.0, 2.0]);
/// ```
#[repr(transparent)]
pub struct Fixed<S>(S);

impl<S> Fixed<S> {
    /// `s` as the data constructs map it.
    pub fn from_ref(s: &S) -> &Fixed<S> {
        // SAFETY: `Fixed<S>` is a transparent wrapper of `S`.
        unsafe { &*std::ptr::from_ref(s).cast::<Fixed<S>>() }
    }

    /// `s` as the data constructs map it, exclusively: what a writing map re-binds it to.
    pub fn from_mut(s: &mut S) -> &mut Fixed<S> {
        // SAFETY: as above.
        unsafe { &mut *std::ptr::from_mut(s).cast::<Fixed<S>>() }
    }

    /// The elements of one of the struct's `Vec` fields, to write on the host (OpenMP's `to` governs only the
    /// copy-in; `target_update!(to: s)` sends them to the device copy): `s.elems_mut(|s| &s.concs)[k] = x`. `field`
    /// names the field; the slice cannot change the `Vec` itself.
    ///
    /// # Panics
    /// If `field` returns a `Vec` that is not stored in the struct (not one of its fields).
    #[track_caller]
    pub fn elems_mut<T>(&mut self, field: impl FnOnce(&S) -> &Vec<T>) -> &mut [T] {
        // The address first, the borrow `field` got ends here; the pointer used is then taken from `&mut self`.
        let at = std::ptr::from_ref(field(&self.0)) as usize;
        let base = std::ptr::from_mut(&mut self.0).cast::<u8>();
        let offset = at.wrapping_sub(base as usize);
        assert!(
            offset <= std::mem::size_of::<S>()
                && std::mem::size_of::<S>() - offset >= std::mem::size_of::<Vec<T>>(),
            "offload: Fixed::elems_mut: the closure must name one of the struct's own `Vec` fields (`|s| &s.field`)"
        );
        // SAFETY: a `&Vec<T>` lay at `offset` inside the struct, so a `Vec<T>` is stored there: one of its fields (the
        // other fields of a struct the data constructs map are `Copy` values, which hold no `Vec`). `&mut self`
        // borrows the struct, so that `Vec` and its elements, exclusively; the slice cannot reach the `Vec` itself.
        unsafe { (*base.add(offset).cast::<Vec<T>>()).as_mut_slice() }
    }
}

impl<S> std::ops::Deref for Fixed<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.0
    }
}

impl<S: std::fmt::Debug> std::fmt::Debug for Fixed<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

// A nested construct or an update of the re-bound name maps the struct again, as `Fixed` (never as `&mut S`).
impl<S: OwnedMapper> MapSource for Fixed<S> {
    type Target = Fixed<S>;
    fn map_ref(&self) -> &Fixed<S> {
        self
    }
}

impl<S: OwnedMapper> MapSourceMut for Fixed<S> {
    fn map_mut(&mut self) -> &mut Fixed<S> {
        self
    }
}

impl<S: OwnedMapper> MapTarget for Fixed<S> {
    #[track_caller]
    unsafe fn map_args(this: *const Self, section: Section, map_type: u64, out: &mut Vec<MapArg>) {
        // SAFETY: forwarded; `Fixed<S>` is a transparent wrapper of `S`.
        unsafe { owned_mapper_data_maps(this.cast::<S>(), section, map_type, out) }
    }
}

/// What a region's `&mut S` parameter takes, where `S` is named by a path (a struct, `Self`): `&mut S` itself (also
/// as a `&mut &mut S`, a `&mut Box<S>`, a `Mapped<Box<S>>`), and the re-bound name of a struct that owns its arrays
/// inside a data construct, `&mut Fixed<S>` (or a `ScopedMapped` of one), which no other `&mut S` parameter takes.
/// `#[target] fn update(s: &mut Sim)` is `fn update(s: &mut impl MutArg<Sim>)` on the host, so both `update(&mut
/// sim)` and, in `target_data!(map(tofrom: sim) => { update(sim) })`, the block's `sim` call it. The region gets
/// the `&mut S`; the block never does (it could grow a mapped `Vec` with it).
///
/// # Safety
/// Implemented by offload only: [`MutArg::__mut_arg`] returns the `S` the value stands for.
#[diagnostic::on_unimplemented(
    message = "a region's `&mut {S}` parameter takes `&mut {S}`, not `&mut {Self}`",
    label = "expected `&mut {S}`",
    note = "a region's `&mut S` parameter takes `&mut S`, `&mut Box<S>`, a `Mapped<Box<S>>` and a data construct's \
            re-bound owning struct (`&mut offload::Fixed<S>`); for another pointer to an `S`, pass `&mut *p`"
)]
pub unsafe trait MutArg<S> {
    /// The struct, for the region's call.
    ///
    /// # Safety
    /// For the region's own use (its map list and host fallback, region code, which cannot grow a `Vec` field: it is
    /// a `DeviceVec` on a device), not handed on to other code.
    #[doc(hidden)]
    unsafe fn __mut_arg(&mut self) -> &mut S;
}

// SAFETY: the struct itself.
unsafe impl<S> MutArg<S> for S {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        self
    }
}

// SAFETY: the struct it points to.
unsafe impl<S> MutArg<S> for &mut S {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        self
    }
}

// SAFETY: the boxed struct.
unsafe impl<S> MutArg<S> for Box<S> {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        self
    }
}

// SAFETY: the struct it stands for, handed to the region only (the trait's contract).
unsafe impl<S> MutArg<S> for Fixed<S> {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        &mut self.0
    }
}

// SAFETY: as above.
unsafe impl<S> MutArg<S> for &mut Fixed<S> {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        &mut self.0
    }
}

// SAFETY: the entered box's value (`Mapped` derefs to it).
unsafe impl<S: DeviceCopy> MutArg<S> for Mapped<Box<S>> {
    unsafe fn __mut_arg(&mut self) -> &mut S {
        self
    }
}

// SAFETY: the entered struct, handed to the region only (the trait's contract).
unsafe impl<S> MutArg<S> for ScopedMapped<'_, &mut S>
where
    S: MapSourceMut<Target = Fixed<S>>,
{
    unsafe fn __mut_arg(&mut self) -> &mut S {
        let fixed: &mut Fixed<S> = self;
        &mut fixed.0
    }
}

#[cfg(test)]
mod tests {
    //! The host side of a mapper struct's map path, with the impl `#[derive(Mapper)]` writes (written out: the derive
    //! names `::offload`), under Miri too: the map list and the rebuilt struct derive from the same raw parts.
    use super::*;
    use offload_model::abi::map_type::{
        mapper_field, DEVICE_WRITES, FROM, LITERAL, TARGET_PARAM, TO,
    };

    struct Grid<'a> {
        u: &'a mut [f64],
        coef: &'a [f64],
        n: usize,
    }

    // SAFETY: as the derive writes it for these fields.
    unsafe impl<'a> Mapper for Grid<'a> {
        type Raw = (*mut [f64], *const [f64], usize);
        const PARALLEL_ERROR: Option<&'static str> = Some("field `u` is `&mut [f64]`");
        const SLOTS: usize = 5;

        unsafe fn raw(this: *mut Self) -> Self::Raw {
            // SAFETY: the caller's contract.
            unsafe {
                (
                    &raw mut *(*this).u,
                    &raw const *(*this).coef,
                    std::ptr::read(&raw const (*this).n),
                )
            }
        }

        unsafe fn from_raw(raw: Self::Raw) -> Self {
            // SAFETY: the caller's contract.
            unsafe {
                Grid {
                    u: &mut *raw.0,
                    coef: &*raw.1,
                    n: raw.2,
                }
            }
        }

        unsafe fn maps(raw: &Self::Raw, clause: u64, kernel: bool, out: &mut Vec<MapArg>) {
            out.push(MapArg::slice::<f64>(raw.0, mapper_field(clause, TO | FROM)));
            if kernel {
                out.push(MapArg::literal(raw.0.len() as u64));
            }
            out.push(MapArg::slice::<f64>(raw.1, mapper_field(clause, TO)));
            if kernel {
                out.push(MapArg::literal(raw.1.len() as u64));
                // SAFETY: `usize` is `Firstprivate`.
                out.push(unsafe { MapArg::value(&raw.2) });
            }
        }
    }

    /// A struct that owns its arrays, with the impl `#[derive(Mapper)]` writes for it.
    struct Sim {
        concs: Vec<f64>,
        mats: Vec<u32>,
        n: usize,
    }

    // SAFETY: as the derive writes it for these fields (`mats` is `#[map(to)]`).
    unsafe impl OwnedMapper for Sim {
        const SLOTS: usize = 5;

        unsafe fn maps(
            this: *mut Self,
            mutable: bool,
            clause: u64,
            kernel: bool,
            out: &mut Vec<MapArg>,
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                {
                    let v: *mut Vec<f64> = &raw mut (*this).concs;
                    let data: *const [f64] = if mutable {
                        std::ptr::slice_from_raw_parts_mut((*v).as_mut_ptr(), (*v).len())
                    } else {
                        std::ptr::slice_from_raw_parts((*v).as_ptr(), (*v).len())
                    };
                    let field = if mutable { TO | FROM } else { TO };
                    let writes = if kernel && mutable { DEVICE_WRITES } else { 0 };
                    out.push(MapArg::slice::<f64>(
                        data,
                        mapper_field(clause, field) | writes,
                    ));
                    if kernel {
                        out.push(MapArg::literal(data.len() as u64));
                    }
                }
                {
                    let v: *mut Vec<u32> = &raw mut (*this).mats;
                    let data: *const [u32] = if mutable {
                        std::ptr::slice_from_raw_parts_mut((*v).as_mut_ptr(), (*v).len())
                    } else {
                        std::ptr::slice_from_raw_parts((*v).as_ptr(), (*v).len())
                    };
                    let writes = if kernel && mutable { DEVICE_WRITES } else { 0 };
                    out.push(MapArg::slice::<u32>(
                        data,
                        mapper_field(clause, TO) | writes,
                    ));
                    if kernel {
                        out.push(MapArg::literal(data.len() as u64));
                    }
                }
                if kernel && mutable {
                    out.push(MapArg::value_object(&raw mut (*this).n, TO | FROM));
                } else if kernel {
                    out.push(MapArg::value(&(*this).n));
                }
            }
        }
    }

    /// The map list of an owning struct, through `&` and `&mut`, and the region's own use of the struct beside it:
    /// the entries' pointers stay valid (Miri checks it), the copy back lands in the struct's `Vec`s and value.
    #[test]
    fn an_owning_structs_map_list_lives_beside_the_regions_reference() {
        let mut s = Sim {
            concs: vec![1.0; 4],
            mats: vec![7; 3],
            n: 3,
        };
        // `&Sim`: `to` only, and nothing the device writes.
        let mut maps = Vec::new();
        let shared = RefParam::new(std::ptr::from_ref(&s).cast_mut(), false);
        // SAFETY: `s` is borrowed shared while `maps` lives.
        unsafe {
            (&&shared)
                .ref_param()
                .kernel_maps(TO | TARGET_PARAM, &mut maps)
        };
        assert_eq!(maps.len(), 5, "two `Vec`s and a length each, one value");
        assert!(maps
            .iter()
            .all(|m| m.map_type & (FROM | DEVICE_WRITES) == 0));
        assert_eq!(maps[0].size, 32);
        assert_eq!(
            s.concs[0], 1.0,
            "the region's own reference reads beside the entries"
        );
        assert_eq!(unsafe { *maps[0].begin.cast::<f64>() }, 1.0);

        // `&mut Sim`: `concs` and `n` come back, `mats` (`#[map(to)]`) does not.
        let mut maps = Vec::new();
        let exclusive = RefParam::new(std::ptr::from_mut(&mut s), true);
        // SAFETY: `s` is borrowed exclusively while `maps` lives.
        unsafe {
            (&&exclusive)
                .ref_param()
                .kernel_maps(TO | FROM | TARGET_PARAM | DEVICE_WRITES, &mut maps)
        };
        assert_eq!(maps[0].map_type & (TO | FROM), TO | FROM);
        assert_eq!(maps[2].map_type & (TO | FROM), TO);
        assert_eq!(
            maps[4].map_type & (TO | FROM),
            TO | FROM,
            "the value is an object"
        );
        // The runtime's copy back writes through the entries after the region ran.
        // SAFETY: the entries cover `s.concs` and `s.n`, exclusively borrowed.
        unsafe {
            *maps[0].begin.cast::<f64>().add(3) = 9.0;
            *maps[4].begin.cast::<usize>() = 1;
        }
        assert_eq!((s.concs[3], s.n), (9.0, 1));

        // A data construct maps the `Vec`s only.
        let mut data = Vec::new();
        // SAFETY: `s` is live and borrowed exclusively while `data` is used.
        unsafe {
            owned_mapper_data_maps(
                std::ptr::from_mut(&mut s).cast_const(),
                None,
                TO | FROM,
                &mut data,
            )
        };
        assert_eq!(data.len(), 2);
    }

    /// `Fixed` gives the elements of the struct's own `Vec`s (the pointer taken from its `&mut`, under Miri too), and
    /// refuses a `Vec` stored elsewhere.
    #[test]
    fn fixed_gives_a_fields_elements_and_refuses_any_other_vec() {
        static ELSEWHERE: Vec<f64> = Vec::new();
        let mut s = Sim {
            concs: vec![1.0; 4],
            mats: vec![7; 3],
            n: 3,
        };
        let f = Fixed::from_mut(&mut s);
        f.elems_mut(|s| &s.concs)[2] = 5.0;
        let mats = f.elems_mut(|s| &s.mats);
        mats[0] = 1;
        mats[2] = 2;
        assert_eq!((f.concs.len(), f.mats.len(), f.n), (4, 3, 3));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f.elems_mut(|_| &ELSEWHERE);
        }));
        assert!(r.is_err(), "not one of the struct's fields");
        assert_eq!((s.concs[2], s.mats.as_slice()), (5.0, [1, 7, 2].as_slice()));
        // A data construct maps it as the struct's own entries.
        let mut data = Vec::new();
        // SAFETY: `s` is live and borrowed exclusively while `data` is used.
        unsafe {
            let this = std::ptr::from_mut(Fixed::from_mut(&mut s));
            Fixed::map_args(this.cast_const(), None, TO | FROM, &mut data)
        };
        assert_eq!((data.len(), data[0].size), (2, 32));
    }

    #[test]
    fn a_mapper_structs_map_list_and_fallback_share_its_borrows() {
        let coef = [2.0; 3];
        let mut u = vec![1.0; 4];
        let mut g = Grid {
            u: &mut u,
            coef: &coef,
            n: 3,
        };
        let raw = MapperRaw::new(&mut g);
        let mut maps = Vec::new();
        // SAFETY: `raw` and `g` outlive `maps`.
        unsafe { raw.kernel_maps(TO | FROM | TARGET_PARAM, &mut maps) };
        assert_eq!(maps.len(), 5, "two slices and a length each, one value");
        assert_eq!(
            (maps[0].size, maps[0].map_type & (TO | FROM)),
            (32, TO | FROM)
        );
        assert_eq!(
            maps[2].map_type & (TO | FROM),
            TO,
            "a `&` field never copies back"
        );
        assert!(maps[1].map_type & LITERAL != 0 && maps[4].map_type & LITERAL != 0);
        // The fallback's struct, as each thread of a fallback would rebuild it.
        // SAFETY: `g`'s borrows outlive it; nothing else uses `u` meanwhile.
        let h = unsafe { raw.rebuild() };
        for i in 0..h.n {
            h.u[i] += h.coef[i];
        }
        // The runtime's copy back writes through the map list's pointer after the fallback ran.
        // SAFETY: `u` is borrowed by `g` and its entry covers it.
        unsafe { *maps[0].begin.cast::<f64>().add(3) = 7.0 };
        assert_eq!(g.u, [3.0, 3.0, 3.0, 7.0]);

        // A data construct's `to` maps only the slices, a `from` field's copy-in dropped.
        let mut data = Vec::new();
        // SAFETY: `g` is live and borrowed while `data` is used.
        unsafe { mapper_data_maps(&g, None, TO, &mut data) };
        assert_eq!(data.len(), 2);
        assert!(data.iter().all(|m| m.map_type & FROM == 0));
        assert_eq!(
            mapper_field(FROM, TO),
            0,
            "`from` of a `to` field is `alloc`"
        );
    }
}
