//! The kernel ABI as one computed plan. [`plan`] turns a validated region into one [`ArgPlan`] per parameter (and
//! one for the return value), in the calling convention's order `(dyn_ptr, a0, .., ak)`, each argument 8 bytes.
//! Each plan says, once, everything the two sides of a call must agree on:
//! - its slots: how many kernel arguments it takes ([`Slots`]);
//! - how the host builds its map entries ([`HostMaps`]: the map list the macro's expansion pushes, one entry per
//!   slot, with the map bits it carries);
//! - how the region gets it back ([`Rebuild`]: what the outliner's kernel entry turns its slots into, and what the
//!   host fallback passes; a parallel `&mut` is a view in both, the view decision made here).
//!
//! The macro (`macros/src/region/params.rs`) and the outliner (`build-support/src/outline/kernel.rs`) only print
//! these plans. What cannot be decided from the region's tokens is decided by a type, the same one on both sides:
//! a `Copy` value crosses as its bits when it is 8 bytes or less, else as a private copy's address
//! ([`offload_model::abi::passes_by_bits`], read by the runtime's map list and offload-device's entry); a `&S` parameter is
//! one object unless `S` is an owning mapper struct (`#[derive(Mapper)]` with `Vec` fields), whose fields then take
//! their own slots, as a mapper struct parameter's do ([`Slots`]).

use crate::lower::{view_kind, ViewKind};
use crate::mapper::SLICE_SLOTS;
use crate::region::{Param, ParamKind, Region};
use offload_model::abi::map_type::DEVICE_WRITES;
use syn::Type;

/// How many kernel arguments a parameter takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slots {
    /// This many, whatever the types.
    Fixed(usize),
    /// A mapper struct's: as many as its fields take, which its definition tells ([`crate::mapper::fields`]).
    Fields,
    /// A `&S`'s: one (the object's address), or as many as its fields take where `S` is an owning mapper struct.
    ObjectOrFields,
}

/// How the host builds a parameter's map-list entries (one per slot).
#[derive(Clone, Copy, Debug)]
pub enum HostMaps<'a> {
    /// `&[T]` / `&mut [T]`: the data (the whole slice, or its mapped section), then its length as a literal.
    Slice {
        /// `T`.
        elem: &'a Type,
        /// A mapped section `[lo..hi]` rather than the whole slice.
        section: bool,
        /// The map bits.
        bits: u64,
    },
    /// `&T` / `&mut T`: one object, or an owning mapper struct's fields, as `T` decides.
    Ref {
        /// `T`.
        ty: &'a Type,
        /// `&mut T`.
        mutable: bool,
        /// The map bits.
        bits: u64,
    },
    /// A firstprivate value: its bits, or a private copy ([`offload_model::abi::passes_by_bits`]).
    Value,
    /// A `DevicePtr`'s address, as is.
    DevicePtr,
    /// A `&DeviceBuffer<T>`: its address as is, then its length as a literal.
    Buffer,
    /// A mapper struct: its fields' entries, as its derive builds them.
    Mapper {
        /// The map bits of the parameter's own clause (the fields' defaults apply without one).
        bits: u64,
    },
    /// The return slot, mapped `from`.
    Return,
    /// The reduction's output slot: one per team, combined on the host.
    Reduction,
}

/// What the region gets for a parameter: the kernel entry builds it from the slots, the host fallback from the
/// parameter itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rebuild {
    /// A parallel region's `&mut [T]` or `&mut DeviceBuffer<T>`: a view, checked against the iteration or not.
    View(ViewKind),
    /// `&[T]` / `&mut [T]` as is.
    Slice {
        /// `&mut [T]`.
        mutable: bool,
    },
    /// `&T` / `&mut T`: the object, or the owning mapper struct rebuilt from its fields.
    Ref {
        /// `&mut T`.
        mutable: bool,
    },
    /// A firstprivate value.
    Value,
    /// A `DevicePtr`.
    DevicePtr,
    /// `&DeviceBuffer<T>` / `&mut ..` outside a parallel region: a buffer over the device memory.
    Buffer {
        /// `&mut DeviceBuffer<T>`.
        mutable: bool,
    },
    /// A mapper struct rebuilt from its fields: by value, or (`Some(mutable)`) through a reference.
    Mapper {
        /// `None` by value, `Some(false)` for `&S`, `Some(true)` for `&mut S`.
        by_ref: Option<bool>,
    },
    /// The return slot (the kernel entry stores the region's value through it).
    Return,
}

/// One parameter's (or the return value's) place in the kernel ABI.
#[derive(Clone, Copy, Debug)]
pub struct ArgPlan<'a> {
    /// The parameter; `None` for the return slot.
    pub param: Option<&'a Param>,
    /// How many kernel arguments it takes.
    pub slots: Slots,
    /// How the host builds its map entries.
    pub host: HostMaps<'a>,
    /// What the region gets.
    pub rebuild: Rebuild,
}

impl ArgPlan<'_> {
    /// The parameter (plans of the return slot have none).
    pub fn param(&self) -> &Param {
        self.param.expect("a parameter's plan")
    }

    /// How many kernel arguments it takes, given how many its struct's fields take where its type is a mapper
    /// struct (`None`: it is none, or its definition is unknown).
    pub fn width(&self, fields: Option<usize>) -> usize {
        match self.slots {
            Slots::Fixed(n) => n,
            Slots::Fields => fields.unwrap_or(0),
            Slots::ObjectOrFields => fields.unwrap_or(1),
        }
    }
}

/// The region's kernel ABI: each parameter's plan in signature order, then the return slot's if it returns a value.
pub fn plan(region: &Region) -> Vec<ArgPlan<'_>> {
    let mut plans: Vec<ArgPlan> = region
        .params
        .iter()
        .map(|p| param_plan(region, p))
        .collect();
    if region.ret.is_some() {
        plans.push(ArgPlan {
            param: None,
            slots: Slots::Fixed(1),
            host: if region.reductions.is_empty() {
                HostMaps::Return
            } else {
                HostMaps::Reduction
            },
            rebuild: Rebuild::Return,
        });
    }
    plans
}

fn param_plan<'a>(region: &'a Region, p: &'a Param) -> ArgPlan<'a> {
    let clause_bits = p.map.as_ref().map_or(0, |m| m.bits());
    // A `&mut` may write its device copy whatever its map type: the coherence directory must know.
    let writes = |mutable: bool| if mutable { DEVICE_WRITES } else { 0 };
    let view = view_kind(region, &p.kind).map(Rebuild::View);
    let (slots, host, rebuild) = match &p.kind {
        ParamKind::Slice { elem, mutable } => (
            Slots::Fixed(SLICE_SLOTS),
            HostMaps::Slice {
                elem,
                section: p.section.is_some(),
                bits: clause_bits | writes(*mutable),
            },
            view.unwrap_or(Rebuild::Slice { mutable: *mutable }),
        ),
        ParamKind::Ref { ty, mutable } => (
            Slots::ObjectOrFields,
            HostMaps::Ref {
                ty,
                mutable: *mutable,
                bits: clause_bits | writes(*mutable),
            },
            Rebuild::Ref { mutable: *mutable },
        ),
        ParamKind::Value => (Slots::Fixed(1), HostMaps::Value, Rebuild::Value),
        ParamKind::DevicePtr => (Slots::Fixed(1), HostMaps::DevicePtr, Rebuild::DevicePtr),
        ParamKind::DeviceBuffer { mutable } => (
            Slots::Fixed(SLICE_SLOTS),
            HostMaps::Buffer,
            view.unwrap_or(Rebuild::Buffer { mutable: *mutable }),
        ),
        ParamKind::Mapper { by_ref } => (
            Slots::Fields,
            HostMaps::Mapper { bits: clause_bits },
            Rebuild::Mapper { by_ref: *by_ref },
        ),
    };
    ArgPlan {
        param: Some(p),
        slots,
        host,
        rebuild,
    }
}
