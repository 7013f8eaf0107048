//! The kernel entry of a region: the calling convention `(dyn_ptr, a0, .., ak)` (one `u64` per map-list entry, in
//! [`Region::kernel_args`] order) unpacked into the region's parameters. Types are inferred from the region's own
//! signature, so the entry never has to name them.

use offload_model::lower::{view_kind, ViewKind};
use offload_model::region::{KernelArg, ParamKind, Region};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

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
/// `callee` (`triad::<f32>`, `<Body>::advance`) and named `kernel_name` in the device crate.
pub fn entry(
    region: &Region,
    symbol: &str,
    abi: KernelAbi,
    callee: TokenStream,
    kernel_name: proc_macro2::Ident,
) -> TokenStream {
    let args = region.kernel_args();
    let arg_names: Vec<_> = (0..args.len())
        .map(|i| format_ident!("__offload_a{}", i))
        .collect();
    let mut call_args = Vec::new();
    let mut ret = None;
    let mut lets = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &arg_names[i];
        match args[i] {
            KernelArg::SlicePtr(p) => {
                let len = &arg_names[i + 1];
                let f = match (view_kind(region, &p.kind), &p.kind) {
                    (Some(ViewKind::Checked), _) => quote!(view),
                    (Some(ViewKind::Unchecked), _) => quote!(unsafe_view),
                    (None, ParamKind::Slice { mutable: true, .. }) => quote!(slice_mut),
                    _ => quote!(slice),
                };
                call_args.push(quote!(::offload::__rt::#f(#a, #len)));
                i += 1; // the length
            }
            KernelArg::SliceLen(_) => unreachable!("follows its pointer"),
            KernelArg::RefPtr(p) => {
                let f = match p.kind {
                    ParamKind::Ref { mutable: true, .. } => quote!(object_mut),
                    _ => quote!(object),
                };
                call_args.push(quote!(::offload::__rt::#f(#a)));
            }
            KernelArg::Value(_) => call_args.push(quote!(::offload::__rt::value(#a))),
            KernelArg::DevicePtr(_) => call_args.push(quote!(::offload::__rt::device_ptr(#a))),
            KernelArg::BufferPtr(p) if view_kind(region, &p.kind).is_some() => {
                // A parallel region's `&mut DeviceBuffer<T>` is a view, as a `&mut [T]` is.
                let len = &arg_names[i + 1];
                call_args.push(match view_kind(region, &p.kind) {
                    Some(ViewKind::Checked) => quote!(::offload::__rt::view(#a, #len)),
                    _ => quote!(::offload::__rt::unsafe_view(#a, #len)),
                });
                i += 1; // the length
            }
            KernelArg::BufferPtr(p) => {
                // The region takes `&DeviceBuffer<T>`: the view lives in the entry's frame.
                let len = &arg_names[i + 1];
                let b = format_ident!("__offload_buf{}", i);
                lets.push(
                    quote!(let mut #b = unsafe { ::offload::__rt::device_buffer(#a, #len) };),
                );
                call_args.push(match p.kind {
                    ParamKind::DeviceBuffer { mutable: true } => quote!(&mut #b),
                    _ => quote!(&#b),
                });
                i += 1; // the length
            }
            KernelArg::BufferLen(_) => unreachable!("follows its pointer"),
            KernelArg::Return => ret = Some(a.clone()),
        }
        i += 1;
    }
    let call = quote!(#(#lets)* #[allow(unused_unsafe)] let __offload_r = unsafe { #callee(#(#call_args),*) };);
    // Every thread of a parallel region computes the value; team 0, thread 0's is returned.
    let store = ret.map(|r| match (region.reduce_op(), region.reduce_wire()) {
        // Each thread's partial joins its team's; the host combines the teams with the initial value. Several
        // variables cross as their `#[repr(C)]` tuple.
        (Some(op), Some(wire)) => quote!(unsafe {
            ::offload::__rt::reduce_team::<#op, #wire>(::core::convert::Into::into(__offload_r), #r)
        };),
        _ => quote!(if ::offload::__first_thread() { ::offload::__rt::write_return(#r, __offload_r); }),
    });
    // The region's kind reaches offload-device, so `barrier()` and team-shared memory fail outside SPMD regions.
    let kind = offload_model::abi::launch_kind::of(region.spmd, region.work_shared);
    match abi {
        KernelAbi::Host => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "C" fn #kernel_name(__offload_dyn: *mut ::core::ffi::c_void #(, #arg_names: u64)*) {
                unsafe { ::offload::__rt::entry(__offload_dyn, #kind, move || { #call #store }) }
            }
        },
        KernelAbi::Amdgpu => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "gpu-kernel" fn #kernel_name(__offload_dyn: u64 #(, #arg_names: u64)*) {
                ::offload::__rt::enter(#kind);
                #call #store
            }
        },
        KernelAbi::Nvptx => quote! {
            #[doc(hidden)]
            #[unsafe(export_name = #symbol)]
            #[allow(non_snake_case)]
            pub unsafe extern "ptx-kernel" fn #kernel_name(__offload_dyn: u64 #(, #arg_names: u64)*) {
                ::offload::__rt::enter(#kind);
                #call #store
            }
        },
    }
}
