//! The clause model: a `#[target]` region as parsed and validated against its signature, once, for both the macro
//! (which expands the host side) and the outliner (which writes the kernel entry). [`crate::frontend`] makes one:
//! `parse` reads the clauses and the signature into a [`Region`], then `crate::validate` checks it against the rules.
//!
//! Here: what a region is ([`Region`] and its parameters) and everything asked of it, in one `impl Region` (its
//! kernel ABI, each parameter's slots, map entries and rebuild, is computed by [`crate::plan`]); the parse phase (`parse`); and a generic region's instance machinery (`generic`).

pub(crate) mod generic;
pub(crate) mod parse;

pub use generic::{canonical_tokens, GenericParam, CONST_PARAM_TYPES};

use crate::clause::{Map, Section};
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Expr, Ident, Type};

/// What kind of value a parameter is, which decides how it crosses to the device.
#[derive(Clone, Debug)]
pub enum ParamKind {
    /// `&[T]` / `&mut [T]`: a mapped buffer; two kernel arguments (device address, length).
    Slice {
        /// The element type `T`.
        elem: Type,
        /// `&mut [T]`.
        mutable: bool,
    },
    /// `&T` / `&mut T`: a mapped object; one kernel argument (device address).
    Ref {
        /// The object's type `T`.
        ty: Type,
        /// `&mut T`.
        mutable: bool,
    },
    /// A `Copy` value, firstprivate: one kernel argument (the bits if 8 bytes or less, else a private copy's address).
    Value,
    /// `offload::DevicePtr<T>`: device memory passed as is (OpenMP's `is_device_ptr`); one argument (the address).
    DevicePtr,
    /// `&offload::DeviceBuffer<T>` / `&mut ..`: device memory passed as is; two arguments (address, length).
    DeviceBuffer {
        /// `&mut DeviceBuffer<T>`.
        mutable: bool,
    },
    /// A `#[derive(Mapper)]` struct (`Grid<'_>`; `by_ref`: `Some(mutable)` for `&mut Grid<'_>`): its fields, as
    /// many kernel arguments as [`crate::mapper::fields`] gives them, which only the struct's definition tells.
    Mapper {
        /// `None` by value, `Some(false)` for `&Grid<'_>`, `Some(true)` for `&mut Grid<'_>`.
        by_ref: Option<bool>,
    },
}

/// One parameter of a region, as its signature and clauses give it.
#[derive(Clone, Debug)]
pub struct Param {
    /// The parameter's name (`self` for a method region's receiver).
    pub ident: Ident,
    /// Its type as written (`Self` for a by-value receiver).
    pub ty: Type,
    /// How it crosses to the device.
    pub kind: ParamKind,
    /// `None` for by-value parameters.
    pub map: Option<Map>,
    /// `map(TYPE: x[lo..hi])`: only this part of a slice is transferred and present.
    pub section: Option<Section>,
    /// Declared `mut x: ..`: the body may change its value, so it may differ between threads.
    pub mut_binding: bool,
}

/// A validated `#[target]` region.
#[derive(Clone, Debug)]
pub struct Region {
    /// The function's name.
    pub ident: Ident,
    /// The parameters, in signature order.
    pub params: Vec<Param>,
    /// `None` for `()`.
    pub ret: Option<Type>,
    /// `device(n)`, if given.
    pub device: Option<Expr>,
    /// `if(cond)`, if given.
    pub if_cond: Option<Expr>,
    /// What the teams and threads do with the body.
    pub construct: offload_model::abi::Construct,
    /// `num_teams(n)`, if given.
    pub num_teams: Option<Expr>,
    /// `thread_limit(n)` or `num_threads(n)`, if given; `teams_distribute` without one gets `1`.
    pub thread_limit: Option<Expr>,
    /// Declared `unsafe fn`: opts out of the race-freedom rules.
    pub is_unsafe: bool,
    /// `reduction(op: var, ..)`, in clause order: each variable's operator and the variable.
    pub reductions: Vec<(crate::clause::ReduceOp, Ident)>,
    /// `collapse(n)`: how many perfectly nested loops are shared out as one (1 without the clause).
    pub collapse: usize,
    /// `schedule(..)`: how the loop's iterations are dealt out (one block per thread without it).
    pub schedule: Option<crate::clause::Schedule>,
    /// `private(x, ..)`: per-thread locals declared before the loop that the loop may assign.
    pub private: Vec<Ident>,
    /// A generic region's type and const parameters, in order (lifetimes left out): a generic impl's first, then the
    /// method's own.
    pub generic_params: Vec<GenericParam>,
    /// How many of `generic_params` are the impl's.
    pub impl_params: usize,
    /// `instantiate(..)`: the argument lists a generic region gets a kernel for.
    pub instances: Vec<crate::clause::Instance>,
    /// A region in an `impl` block: the type the impl is for (`Type` of the identity `module::Type::method`).
    pub self_ty: Option<Type>,
    /// A reduction region whose tail is an expression of its variables (`sum * step`): the variables' types, in
    /// clause order. The device and the fallback's threads return the variables, which cross as these types; the
    /// host evaluates the tail once, after the reduction (`worksharing::reduction_tail`, set by the front end).
    pub reduce_tys: Option<Vec<Type>>,
}

/// The `impl` block a method region is in: the type it is for, and its generics (a generic impl's regions list
/// instances for the impl's parameters first, then the method's).
#[derive(Clone, Copy)]
pub struct InImpl<'a> {
    /// The type the impl is for.
    pub self_ty: &'a Type,
    /// The impl's generics.
    pub generics: &'a syn::Generics,
}

impl<'a> From<&'a syn::ItemImpl> for InImpl<'a> {
    fn from(i: &'a syn::ItemImpl) -> Self {
        InImpl {
            self_ty: &i.self_ty,
            generics: &i.generics,
        }
    }
}

impl Region {
    /// The reduction's operator type (a [`offload_model::reduce`] operator, or a `TupleK` of them for several variables).
    pub fn reduce_op(&self) -> Option<TokenStream> {
        self.reduce_ops(|tuple, ops| quote::quote!(::offload::__reduce::#tuple<#(#ops),*>))
    }

    /// The operator as a value, for the loop driver (operators are unit structs).
    pub fn reduce_op_value(&self) -> Option<TokenStream> {
        self.reduce_ops(|tuple, ops| quote::quote!(::offload::__reduce::#tuple(#(#ops),*)))
    }

    /// The one operator, or `several(TupleK, ops)` for several variables.
    fn reduce_ops(
        &self,
        several: impl Fn(Ident, &[TokenStream]) -> TokenStream,
    ) -> Option<TokenStream> {
        let ops: Vec<TokenStream> = self.reductions.iter().map(|(op, _)| op.path()).collect();
        match ops.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            _ => Some(several(quote::format_ident!("Tuple{}", ops.len()), &ops)),
        }
    }

    /// The reduction value's type as it crosses to and from the device: the return type, or for several variables
    /// the `#[repr(C)]` `TupleK` of the returned tuple's types; the variables' types where the tail is an expression
    /// of them (`reduce_tys`).
    pub fn reduce_wire(&self) -> Option<TokenStream> {
        match self.reduce_tys.as_deref() {
            Some([one]) => return Some(one.to_token_stream()),
            Some(tys) => {
                let tuple = quote::format_ident!("Tuple{}", tys.len());
                return Some(quote::quote!(::offload::__reduce::#tuple<#(#tys),*>));
            }
            None => {}
        }
        match (&self.ret, self.reductions.len()) {
            (_, 0) | (None, _) => None,
            (Some(Type::Tuple(t)), k) if k >= 2 => {
                let tuple = quote::format_ident!("Tuple{}", k);
                let elems = t.elems.iter();
                Some(quote::quote!(::offload::__reduce::#tuple<#(#elems),*>))
            }
            (Some(ty), _) => Some(ty.to_token_stream()),
        }
    }

    /// Whether the region takes device memory: then it runs on a device or fails, never in a host fallback.
    pub fn needs_device(&self) -> bool {
        self.params.iter().any(|p| {
            matches!(
                p.kind,
                ParamKind::DevicePtr | ParamKind::DeviceBuffer { .. }
            )
        })
    }

    /// Whether the region has type or const parameters (it then has a kernel per `instantiate(..)` list).
    pub fn is_generic(&self) -> bool {
        !self.generic_params.is_empty()
    }

    /// The region's name after its module path: `triad`, `Grid::step` for a method region.
    pub fn local_name(&self) -> String {
        match &self.self_ty {
            Some(t) => format!("{}::{}", canonical_tokens(t.to_token_stream()), self.ident),
            None => self.ident.to_string(),
        }
    }

    /// The name of instance `k` after the module path: `triad<f32>`, `axpy<f64,4>`.
    pub fn instance_name(&self, k: usize) -> String {
        let args = &self.instances[k].args;
        format!(
            "{}<{}>",
            self.local_name(),
            canonical_tokens(quote::quote!(#(#args),*))
        )
    }

    /// The region with instance `k`'s arguments put for its parameters (and the impl's type for `Self`) in every
    /// type it declares: what a kernel entry, which is not generic, must name.
    pub fn instance(&self, k: Option<usize>) -> Region {
        generic::instance(self, k)
    }

    /// Instance `k`'s arguments as a turbofish (`::<f32, 4>`), for the kernel entry's call: the function's own (a
    /// generic impl's go in its type, [`Region::instance_self_ty`]); none if it has none.
    pub fn turbofish(&self, k: usize) -> Option<TokenStream> {
        let args = &self.instances[k].args[self.impl_params.min(self.instances[k].args.len())..];
        (!args.is_empty()).then(|| quote::quote!(::<#(#args),*>))
    }

    /// The impl's type with instance `k`'s arguments put for the impl's parameters (`Grid<f32>` of `impl<T>
    /// Grid<T>`), for the kernel entry's call `<Grid<f32>>::step`.
    pub fn instance_self_ty(&self, k: Option<usize>) -> Option<Type> {
        generic::instance_self_ty(self, k)
    }
}
