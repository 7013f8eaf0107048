//! The kernel entry of a region: the calling convention `(dyn_ptr, a0, .., ak)` (one `u64` per map-list entry, in
//! the order of the region's plan, `offload_frontend::plan`) unpacked into the region's parameters, as each
//! parameter's plan says. Types are inferred from the region's own
//! signature, so the entry never has to name them.

use offload_frontend::lower::ViewKind;
use offload_frontend::mapper::{Field, FieldKind};
use offload_frontend::plan::{plan, ArgPlan, Rebuild};
use offload_frontend::region::{Param, Region};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, ToTokens};

/// The package's mapper structs (`#[derive(Mapper)]`) by name, with their fields in declaration order; `None` for a
/// name the outliner cannot rebuild a struct by (two structs share it, or a field is under `#[cfg]`).
pub type Mappers = std::collections::HashMap<String, Option<Vec<Field>>>;

/// The ABI a kernel entry is declared with.
#[derive(Clone, Copy, Debug)]
pub enum KernelAbi {
    /// The host image: `extern "C"`, wrapped by offload-device's panic-catching entry.
    Host,
    /// NVIDIA GPUs: `extern "ptx-kernel"`; a panic traps (offload-device's panic handler).
    Nvptx,
    /// AMD GPUs: `extern "gpu-kernel"`; a panic traps.
    Amdgpu,
}

/// The kernel entry `symbol` of `region` (an instance's, for a generic region: its types substituted), calling
/// `callee` (`triad::<f32>`, `<Body>::advance`) and named `kernel_name` in the device crate; `mappers` gives the
/// fields of its mapper struct parameters.
pub fn entry(
    region: &Region,
    symbol: &str,
    abi: KernelAbi,
    callee: TokenStream,
    kernel_name: proc_macro2::Ident,
    mappers: &Mappers,
) -> TokenStream {
    let args = plan(region);
    let widths: Vec<usize> = args
        .iter()
        .map(|a| a.width(fields_width(a, mappers)))
        .collect();
    let arg_names: Vec<_> = (0..widths.iter().sum())
        .map(|i| format_ident!("__offload_a{}", i))
        .collect();
    let mut unpacked = Unpacked::default();
    // Each kernel argument takes its `width` names, in order: the map list pushed as many entries for it.
    let mut next = 0;
    for (i, (arg, w)) in args.iter().zip(&widths).enumerate() {
        let names = &arg_names[next..next + w];
        next += w;
        unpacked.push(i, *arg, names, mappers);
    }
    let Unpacked {
        lets,
        call_args,
        checks,
        ret,
    } = unpacked;
    let call = quote!(
        #(#lets)*
        #[allow(unused_unsafe)]
        let __offload_r = unsafe { #callee(#(#call_args),*) };
        #(#checks)*
    );
    let store = ret.map(|r| store_return(region, &r));
    // The region's kind reaches offload-device, so `barrier()` and team-shared memory fail outside SPMD regions.
    let kind = region.construct.launch_kind();
    declare(
        abi,
        symbol,
        &kernel_name,
        &arg_names,
        kind,
        quote!(#call #store),
    )
}

/// How many kernel arguments the fields of a parameter's mapper struct take (an owning one's, for a `&S`), if its
/// type is one.
fn fields_width(a: &ArgPlan, mappers: &Mappers) -> Option<usize> {
    let fields = match a.rebuild {
        Rebuild::Mapper { .. } => mapper_fields(a.param(), mappers),
        Rebuild::Ref { .. } => owned_mapper(a, mappers),
        _ => None,
    };
    fields.map(|f| f.iter().map(Field::kernel_args).sum())
}

/// The kernel arguments turned back into the region's parameters: the entry's `let`s, the region call's arguments,
/// and the return slot's argument.
#[derive(Default)]
struct Unpacked {
    lets: Vec<TokenStream>,
    call_args: Vec<TokenStream>,
    /// Compile-time checks on the arguments' types, after the call (which infers them).
    checks: Vec<TokenStream>,
    ret: Option<syn::Ident>,
}

impl Unpacked {
    /// Plan `i`, `arg`, from its kernel arguments `names`.
    fn push(&mut self, i: usize, arg: ArgPlan, names: &[syn::Ident], mappers: &Mappers) {
        let one = || match names {
            [a] => a,
            _ => unreachable!("a one-argument kind"),
        };
        let two = || match names {
            [a, len] => (a, len),
            _ => unreachable!("a two-argument kind"),
        };
        match arg.rebuild {
            Rebuild::Mapper { by_ref } => {
                if mapper_fields(arg.param(), mappers).is_some() {
                    self.checks.push(slots_check(arg.param(), names.len()));
                }
                let value = rebuild_mapper(arg.param(), mappers, names);
                let m = format_ident!("__offload_m{}", i);
                self.lets.push(quote!(let mut #m = #value;));
                self.call_args.push(match by_ref {
                    Some(_) => quote!(&mut #m),
                    None => quote!(#m),
                });
            }
            Rebuild::View(v) => {
                let (a, len) = two();
                let f = match v {
                    ViewKind::Checked => quote!(view),
                    ViewKind::Unchecked => quote!(unsafe_view),
                };
                self.call_args.push(quote!(::offload::__rt::#f(#a, #len)));
            }
            Rebuild::Slice { mutable } => {
                let (a, len) = two();
                let f = if mutable {
                    quote!(slice_mut)
                } else {
                    quote!(slice)
                };
                self.call_args.push(quote!(::offload::__rt::#f(#a, #len)));
            }
            Rebuild::Ref { mutable } if owned_mapper(&arg, mappers).is_some() => {
                // An owning mapper struct, rebuilt from its fields' arguments, as the host's `RefParam` chose.
                self.checks.push(slots_check(arg.param(), names.len()));
                let m = format_ident!("__offload_m{}", i);
                let value =
                    rebuild_owned(arg.param(), mappers, names, mutable, &m, &mut self.checks);
                self.lets.push(quote!(let mut #m = #value;));
                self.call_args.push(if mutable {
                    quote!(&mut #m)
                } else {
                    quote!(&#m)
                });
            }
            Rebuild::Ref { mutable } => {
                let a = one();
                let f = if mutable {
                    quote!(object_mut)
                } else {
                    quote!(object)
                };
                let o = format_ident!("__offload_o{}", i);
                self.lets
                    .push(quote!(let #o = unsafe { ::offload::__rt::#f(#a) };));
                self.call_args.push(quote!(#o));
                // One object here means one on the host: an owning mapper struct the outliner did not see by name
                // fails this build.
                self.checks.push(quote!({
                    #[allow(unused_imports)]
                    use ::offload::__rt::{ProbeObject as _, ProbeOwned as _};
                    (&&::offload::__rt::RefProbe::of(&#o)).one_object();
                }));
            }
            Rebuild::Value => {
                let a = one();
                self.call_args.push(quote!(::offload::__rt::value(#a)))
            }
            Rebuild::DevicePtr => {
                let a = one();
                self.call_args.push(quote!(::offload::__rt::device_ptr(#a)))
            }
            Rebuild::Buffer { mutable } => {
                // `&DeviceBuffer<T>`: the buffer lives in the entry's frame (a parallel `&mut` one is a view).
                let (a, len) = two();
                let b = format_ident!("__offload_buf{}", i);
                self.lets.push(
                    quote!(let mut #b = unsafe { ::offload::__rt::device_buffer(#a, #len) };),
                );
                self.call_args.push(if mutable {
                    quote!(&mut #b)
                } else {
                    quote!(&#b)
                });
            }
            Rebuild::Return => self.ret = Some(one().clone()),
        }
    }
}

/// A compile-time check that the mapper struct parameter `p`, as Rust resolves its type in the region's module,
/// takes the `n` kernel arguments the entry gives it (the struct's `MapperSlots`, which the outliner writes from
/// its definition as the host's derive counts them): a struct found by the wrong name fails here.
fn slots_check(p: &Param, n: usize) -> TokenStream {
    struct Static;
    impl syn::visit_mut::VisitMut for Static {
        fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
            *l = syn::Lifetime::new("'static", l.span());
        }
    }
    let mut ty = match &p.ty {
        syn::Type::Reference(r) => (*r.elem).clone(),
        t => t.clone(),
    };
    syn::visit_mut::VisitMut::visit_type_mut(&mut Static, &mut ty);
    let msg = format!(
        "offload: the region parameter `{}` is rebuilt from {n} kernel arguments, but its struct takes another \
         number: another mapper struct shares its name in this package; rename one",
        p.ident
    );
    quote!(
        const _: () = ::core::assert!(
            <#ty as ::offload::__rt::MapperSlots>::SLOTS == #n, #msg
        );
    )
}

/// Stores the region's value `__offload_r` through the return slot `r`: every thread of a parallel region computes
/// the value; team 0, thread 0's is returned.
fn store_return(region: &Region, r: &syn::Ident) -> TokenStream {
    match (region.reduce_op(), region.reduce_wire()) {
        // Each thread's partial joins its team's; the host combines the teams with the initial value. Several
        // variables cross as their `#[repr(C)]` tuple.
        (Some(op), Some(wire)) => quote!(unsafe {
            ::offload::__rt::reduce_team::<#op, #wire>(&::core::convert::Into::into(__offload_r), #r)
        };),
        _ => {
            quote!(if ::offload::__first_thread() { ::offload::__rt::write_return(#r, __offload_r); })
        }
    }
}

/// The entry function itself, in `abi`, running `body` as a region of `kind`.
fn declare(
    abi: KernelAbi,
    symbol: &str,
    kernel_name: &proc_macro2::Ident,
    arg_names: &[syn::Ident],
    kind: u32,
    body: TokenStream,
) -> TokenStream {
    match abi {
        KernelAbi::Host => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn #kernel_name(__offload_dyn: *mut ::core::ffi::c_void #(, #arg_names: u64)*) {
                unsafe { ::offload::__rt::entry(__offload_dyn, #kind, move || { #body }) }
            }
        },
        KernelAbi::Amdgpu => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "gpu-kernel" fn #kernel_name(__offload_dyn: u64 #(, #arg_names: u64)*) {
                ::offload::__rt::enter(#kind);
                #body
            }
        },
        KernelAbi::Nvptx => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "ptx-kernel" fn #kernel_name(__offload_dyn: u64 #(, #arg_names: u64)*) {
                ::offload::__rt::enter(#kind);
                #body
            }
        },
    }
}

/// The fields of the owning mapper struct (`Vec` fields) a `&S`/`&mut S` parameter names, found by its name.
fn owned_mapper<'m>(a: &ArgPlan, mappers: &'m Mappers) -> Option<&'m [Field]> {
    match a.rebuild {
        Rebuild::Ref { .. } => {
            mapper_fields(a.param(), mappers).filter(|f| offload_frontend::mapper::owns(f))
        }
        _ => None,
    }
}

fn mapper_fields<'m>(
    p: &offload_frontend::region::Param,
    mappers: &'m Mappers,
) -> Option<&'m [Field]> {
    mappers
        .get(&mapper_path(p)?.segments.last()?.ident.to_string())?
        .as_deref()
}

/// The mapper struct's path as written in the region's signature, without generic arguments (a struct expression
/// names it so), and without a reference.
fn mapper_path(p: &offload_frontend::region::Param) -> Option<syn::Path> {
    let mut ty = &p.ty;
    if let syn::Type::Reference(r) = ty {
        ty = &r.elem;
    }
    let syn::Type::Path(tp) = ty else { return None };
    let mut path = tp.path.clone();
    for seg in &mut path.segments {
        seg.arguments = syn::PathArguments::None;
    }
    Some(path)
}

/// An owning mapper struct on the device (`&S` or `&mut S`), built from its fields' kernel arguments `args`: a `Vec`
/// as a `DeviceVec` over its device copy; a value by value through `&S`, and through `&mut S` read from its device
/// object and written back after the call (`after`), so the host gets the region's writes, as in the fallback.
fn rebuild_owned(
    p: &offload_frontend::region::Param,
    mappers: &Mappers,
    args: &[syn::Ident],
    mutable: bool,
    m: &syn::Ident,
    after: &mut Vec<TokenStream>,
) -> TokenStream {
    let (Some(path), Some(fields)) = (mapper_path(p), mapper_fields(p, mappers)) else {
        unreachable!("found by `owned_mapper`")
    };
    let mut k = 0;
    let mut inits = Vec::new();
    for f in fields {
        let (id, a) = (&f.ident, &args[k]);
        inits.push(match &f.kind {
            FieldKind::Vec { .. } => {
                let len = &args[k + 1];
                if mutable {
                    after.push(quote!(#m.#id.__check(#a, #len);));
                }
                quote!(#id: unsafe { ::offload::__rt::device_vec(#a, #len) })
            }
            _ if mutable => {
                after.push(quote!(unsafe { ::core::ptr::write(#a as *mut _, #m.#id) };));
                quote!(#id: unsafe { ::core::ptr::read(#a as *const _) })
            }
            _ => quote!(#id: unsafe { ::offload::__rt::value(#a) }),
        });
        k += f.kernel_args();
    }
    quote!(#path { #(#inits),* })
}

/// The struct a mapper parameter is on the device, built from its fields' kernel arguments `args` (as many as
/// `offload_frontend::mapper::fields` gives them, in the order the derive's map list has).
fn rebuild_mapper(
    p: &offload_frontend::region::Param,
    mappers: &Mappers,
    args: &[syn::Ident],
) -> TokenStream {
    let (Some(path), Some(fields)) = (mapper_path(p), mapper_fields(p, mappers)) else {
        let named = mapper_path(p)
            .and_then(|p| p.segments.last().map(|s| s.ident.to_string()))
            .is_some_and(|n| mappers.contains_key(&n));
        let msg = if named {
            format!(
                "offload: the region parameter `{}: {}` is a mapper struct the device cannot rebuild: two mapper \
                 structs in this package share its name, or one of its fields is under `#[cfg]`; rename one, or \
                 make the fields unconditional",
                p.ident,
                p.ty.to_token_stream()
            )
        } else {
            format!(
                "offload: the region parameter `{}: {}` has a lifetime argument, so it is a mapper struct, but no \
                 struct of that name in this package derives `offload::Mapper`",
                p.ident,
                p.ty.to_token_stream()
            )
        };
        return quote!(::core::compile_error!(#msg));
    };
    let mut k = 0;
    let mut inits = Vec::new();
    for f in fields {
        let id = &f.ident;
        let a = &args[k];
        inits.push(match &f.kind {
            FieldKind::Slice { mutable, .. } => {
                let len = &args[k + 1];
                let g = if *mutable {
                    quote!(slice_mut)
                } else {
                    quote!(slice)
                };
                quote!(#id: unsafe { ::offload::__rt::#g(#a, #len) })
            }
            FieldKind::Ref { mutable, .. } => {
                let g = if *mutable {
                    quote!(object_mut)
                } else {
                    quote!(object)
                };
                quote!(#id: unsafe { ::offload::__rt::#g(#a) })
            }
            FieldKind::Vec { .. } => unreachable!("an owning struct is rebuilt by `rebuild_owned`"),
            FieldKind::Value => quote!(#id: unsafe { ::offload::__rt::value(#a) }),
        });
        k += f.kernel_args();
    }
    quote!(#path { #(#inits),* })
}
