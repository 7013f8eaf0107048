//! `#[target]` and `#[declare_target]`: parse (the model crate) -> validate (spanned errors, all at once) -> expand.
//! The expansion compiles no device code and never refers to build-script outputs, so crates without images still
//! build; build support outlines the same regions into the device crate.
//!
//! Users reach these macros through the `offload` crate, which re-exports them; their examples are doctests here
//! (with `offload` as a dev-dependency), where regions run on the host, since a doctest has no device image.

#![deny(missing_docs)]

mod data;
mod declare_target;
mod flow;
mod mapper;
mod region;

use proc_macro::TokenStream;

/// Structured data (OpenMP's `declare mapper`): a struct holding slices becomes a region parameter, mapped field
/// by field. On a struct with named fields and lifetime parameters only: each slice field (`&'a [T]`, `&'a mut [T]`)
/// and single-object field (`&'a T`, `&'a mut T`) is mapped, `&` ones `to` and `&mut` ones `tofrom` unless
/// `#[map(to|from|tofrom|alloc)]` on the field says otherwise (`from`, `tofrom`, `alloc` need `&mut`); every other
/// field is a by-value (firstprivate) value. A region takes the struct by value (`g: Grid<'_>`) or as
/// `&mut Grid<'_>` (the lifetime argument is how the region tells a mapper struct) and sees it with device slices;
/// `target_data!(map(tofrom: g) => ..)` maps its fields for a block, `target_update!` updates them. A parallel
/// region cannot take a struct with `&mut` fields (its threads would share them): pass those as parameters. The
/// struct may not implement `Drop` (a compile error at its name): a region call rebuilds it from its fields, in the
/// host fallback and in the kernel entry, so its own `Drop` would run once per copy.
///
/// A struct may own its arrays instead: `Vec<T>` fields and values, no lifetime parameter. A region takes it as
/// `&S` (each `Vec` mapped `to`) or `&mut S` (`tofrom`, and its value fields' writes come back), or as the field's
/// `#[map(..)]` says; on a device a `Vec` field is an `offload::DeviceVec<T>`, a slice of the device copy. A data
/// construct maps it as `offload::Fixed<S>`, which a `target_data!` block sees (`s: &Fixed<S>` or `&mut Fixed<S>`):
/// it reads as the struct and goes to regions' `&S` and `&mut S` parameters, but cannot grow, replace or drop a
/// mapped `Vec`.
///
/// ```
/// use offload::{target, Mapper};
///
/// #[derive(Mapper)]
/// struct Grid<'a> {
///     data: &'a mut [f64],
///     #[map(to)]
///     coef: &'a [f64],
///     scale: f64,
/// }
///
/// #[target]
/// fn apply(g: Grid<'_>) {
///     for i in 0..g.data.len() {
///         g.data[i] = g.scale * g.coef[i] + g.data[i];
///     }
/// }
///
/// fn main() {
///     let (mut data, coef) = (vec![1.0; 4], vec![2.0; 4]);
///     apply(Grid { data: &mut data, coef: &coef, scale: 3.0 });
///     assert_eq!(data, [7.0; 4]);
/// }
/// ```
#[proc_macro_derive(Mapper, attributes(map))]
pub fn derive_mapper(item: TokenStream) -> TokenStream {
    mapper::derive(item.into()).into()
}

/// Marks a function as an offload region (OpenMP's `#pragma omp target`): calling it runs its body on an offload
/// device, with its data mapped there and back, or on the host when no device can take it.
///
/// `#[target(clauses)]` takes OpenMP's clauses:
///
/// - `map([always,] [present,] [close,] TYPE: a, b[lo..hi])`, `TYPE` one of `to`, `from`, `tofrom`, `alloc`.
///   Without one a parameter is mapped by its type: `&[T]` and `&T` `to`, `&mut [T]` and `&mut T` `tofrom`, by-value
///   parameters firstprivate (the region gets its own copy).
/// - `device(n)`, `if(cond)`: where to run; `if(false)` and `device(omp_get_initial_device())` run on the host.
/// - A construct: `teams_distribute_parallel_for`, `parallel_for` or `teams_distribute` (each also `_simd`) share
///   the body's one `for` loop out over teams and threads; `teams, parallel` runs the whole body in every thread of
///   every team. Without one the region is serial.
/// - `num_teams(n)`, `thread_limit(n)` (`num_threads(n)`): upper bounds on the launch's geometry.
/// - On a shared loop: `collapse(n)`, `reduction(op: var)` (op one of `+ * min max & | ^ && ||`, or a type
///   implementing `offload::ReduceOp`), `schedule(static | static, c | dynamic[, c])`, `private(x)`.
///
/// Beside the function it defines `try_<name>`, with the same parameters, which returns a device failure as
/// `Err(offload::Error)` where the function itself panics. The function may be generic (with `instantiate(..)`
/// listing the types it is built for) or a method of an inherent `impl` block (a trait's methods cannot be kernels),
/// but not `async`. Its body is compiled `#![no_std]` for the device: it may use `core` and `offload`'s device
/// functions, and of its own crate's functions only `#[declare_target]` ones. Parallel regions are checked to be
/// free of data races (a `&mut [T]` is written only at the iteration's own elements); the guide's chapter on parallel constructs (`docs/src/parallel.md`) has the rules.
///
/// A `&mut S` parameter whose type is a path (a struct: `s: &mut Sim`, not a number, an array or a generic
/// parameter) is `&mut impl offload::MutArg<S>` on the host: it takes `&mut S` (`&mut Box<S>` and `&mut` of a
/// `Mapped<Box<S>>` too), and a data construct's re-bound struct that owns its arrays (`&mut offload::Fixed<S>`).
///
/// ```
/// use offload::target;
///
/// #[target(teams_distribute_parallel_for, num_teams(4), reduction(+: s))]
/// fn dot(x: &[f64], y: &[f64]) -> f64 {
///     let mut s = 0.0;
///     for i in 0..x.len() {
///         s += x[i] * y[i];
///     }
///     s
/// }
///
/// #[target(parallel_for, map(to: x), map(from: y), if(x.len() > 1000))]
/// fn square(x: &[f32], y: &mut [f32]) {
///     for i in 0..y.len() {
///         y[i] = x[i] * x[i];
///     }
/// }
///
/// fn main() {
///     let x: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
///     let ones = vec![1.0; x.len()];
///     assert_eq!(dot(&x, &ones), 49_995_000.0);
///     assert_eq!(try_dot(&x, &ones).expect("dot failed"), 49_995_000.0);
///
///     let (x, mut y) = (vec![3.0f32; 10], vec![0.0f32; 10]);
///     square(&x, &mut y); // `if` is false: on the host
///     assert_eq!(y, [9.0; 10]);
/// }
/// ```
#[proc_macro_attribute]
pub fn target(args: TokenStream, item: TokenStream) -> TokenStream {
    region::expand(args.into(), item.into()).into()
}

/// Makes a function, const, `#[repr(C)]` struct, `Copy` enum or `impl` block usable in regions (OpenMP's
/// `declare target`).
///
/// Region code may call only `#[declare_target]` functions of its crate: build support copies them into the device
/// crate, and a call to any other is a build error naming it. A struct gets `offload::DeviceCopy` (its fields must
/// have it), so regions can map it; an enum needs a fixed `repr` (`#[repr(u8)]`, `#[repr(C)]`), so host and
/// device agree on its layout, and is passed by value.
///
/// ```
/// use offload::{declare_target, target};
///
/// #[declare_target]
/// const G: f64 = 9.81;
///
/// #[declare_target]
/// #[repr(C)]
/// #[derive(Clone, Copy)]
/// pub struct Body {
///     height: f64,
///     speed: f64,
/// }
///
/// #[declare_target]
/// impl Body {
///     fn fall(self, dt: f64) -> Body {
///         Body { height: self.height - self.speed * dt, speed: self.speed + G * dt }
///     }
/// }
///
/// #[target]
/// fn fall_all(dt: f64, bodies: &mut [Body]) {
///     for b in bodies.iter_mut() {
///         *b = b.fall(dt);
///     }
/// }
///
/// fn main() {
///     let mut bodies = vec![Body { height: 100.0, speed: 0.0 }; 4];
///     fall_all(1.0, &mut bodies);
///     fall_all(1.0, &mut bodies);
///     assert_eq!(bodies[3].height, 100.0 - 9.81);
/// }
/// ```
#[proc_macro_attribute]
pub fn declare_target(args: TokenStream, item: TokenStream) -> TokenStream {
    declare_target::expand(args.into(), item.into()).into()
}

/// A structured device data environment (OpenMP's `target data`):
/// `target_data!(map(to: x), map(tofrom: y), device(d), if(c) => { .. })`. Inside the block each mapped name is
/// re-bound to a reference to its data (`&mut [T]`; for `to` only where the source is a `&mut` or the block writes
/// it, else `&[T]`: OpenMP's `to` governs only the copy-in; a struct that owns its arrays as `offload::Fixed<S>`,
/// whose `Vec`s cannot change); regions called there find it present and copy nothing. The exit runs on every way
/// out of the block (`return`, `?`, `break`, `continue`), copying `from` and `tofrom` data back; an unwinding panic
/// releases the data without copying. Map types are `to`, `from`, `tofrom` and `alloc`, with sections
/// (`y[lo..hi]`) and the modifiers of `#[target]`'s `map`.
///
/// The block runs in a closure, called at once inside the data region, so nothing can suspend it between the entry
/// and the exit: an `.await` in it is a compile error, whichever macro wrote it (await before or after the
/// construct; one inside an `async` block is fine). Its value is the macro's, and `return`, `?`, `break` and
/// `continue` written in it (also in a nested `target_data!` and in the arguments of `println!`, `assert_eq!` and
/// the other standard macros) leave it as they would a plain block; one that another macro writes is a compile
/// error. The closure borrows what the block uses, so the block cannot initialize a `let x;` declared before it:
/// make `x` the block's value (`let x = target_data!(.. => { .. })`).
///
/// ```
/// use offload::{target, target_data};
///
/// #[target(teams_distribute_parallel_for)]
/// fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
///     for i in 0..y.len() {
///         y[i] += a * x[i];
///     }
/// }
///
/// fn main() {
/// # // A doctest has no device image, and a region whose data is present on a device never falls back to the host.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let x = vec![1.0f32; 1024];
///     let mut y = vec![0.0f32; 1024];
///     target_data!(map(to: x), map(tofrom: y) => {
///         for _ in 0..10 {
///             axpy(0.5, x, y); // x and y are present on the device: nothing is copied
///         }
///     }); // y is copied back here
///     assert!(y.iter().all(|&v| v == 5.0));
/// }
/// ```
#[proc_macro]
pub fn target_data(input: TokenStream) -> TokenStream {
    data::target_data(input.into()).into()
}

/// `target_enter_data!(map(to: v))`: maps an owned `Vec<T>`, `Box<[T]>` or `Box<T>` until it is exited, returning
/// `offload::Mapped<V>` (a tuple of them for several maps). Map types are `to` and `alloc`; `device(d)` and `if(c)`
/// choose the device as a region's clauses do.
///
/// The `Mapped` owns the buffer, so it can be neither freed nor reallocated while it is mapped, and derefs to it
/// (the host copy): pass `&m` or `&mut m` to regions, which find the data present. Dropping it exits with
/// `release` (nothing copied back); `target_exit_data!` (or `m.exit_from()`) ends the mapping and returns the
/// buffer.
///
/// ```
/// use offload::{target, target_enter_data, target_exit_data};
///
/// #[target]
/// fn scale(k: f64, y: &mut [f64]) {
///     for v in y.iter_mut() {
///         *v *= k;
///     }
/// }
///
/// fn main() {
/// # // A doctest has no device image, and a region whose data is present on a device never falls back to the host.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let v = vec![1.0f64; 256];
///     let mut m = target_enter_data!(map(to: v)); // an `offload::Mapped<Vec<f64>>`
///     scale(2.0, &mut m); // present: nothing is copied
///     scale(3.0, &mut m);
///     let v: Vec<f64> = target_exit_data!(map(from: m)); // copied back
///     assert!(v.iter().all(|&x| x == 6.0));
/// }
/// ```
#[proc_macro]
pub fn target_enter_data(input: TokenStream) -> TokenStream {
    data::target_enter_data(input.into()).into()
}

/// `target_exit_data!(map(from: m), device(d))` (or `release`, `delete`; `device` optional, and must be the
/// entry's): exits a `Mapped<V>` and returns the buffer.
///
/// `from` copies the device data back if this was the mapping's last reference; `release` drops a reference
/// without copying; `delete` removes the mapping whatever its reference counts. Reference counts follow OpenMP:
/// data stays mapped while a region or `target_data!` also holds it.
///
/// ```
/// use offload::{target, target_enter_data, target_exit_data};
///
/// #[target]
/// fn fill(k: u32, y: &mut [u32]) {
///     for v in y.iter_mut() {
///         *v = k;
///     }
/// }
///
/// fn main() {
/// # // A doctest has no device image, and a region whose data is present on a device never falls back to the host.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let (a, b) = (vec![0u32; 64], vec![0u32; 64]);
///     let (mut a, mut b) = target_enter_data!(map(alloc: a, b)); // device storage, nothing copied
///     fill(7, &mut a);
///     fill(8, &mut b);
///     let a = target_exit_data!(map(from: a)); // the region's result
///     let b = target_exit_data!(map(delete: b)); // dropped on the device, not copied
///     assert_eq!(a, [7; 64]);
///     assert_eq!(b.len(), 64);
/// }
/// ```
#[proc_macro]
pub fn target_exit_data(input: TokenStream) -> TokenStream {
    data::target_exit_data(input.into()).into()
}

/// `target_update!(to: x)`, `target_update!(from: y[lo..hi], device(d))`: refreshes the device or host copy of
/// mapped data; data that is not mapped is left alone. It copies regardless of reference counts: it is how a host
/// change reaches a device copy inside a data environment, and how a device result reaches the host before its end.
///
/// ```
/// use offload::{target, target_data, target_update};
///
/// #[target]
/// fn sum(x: &[i64]) -> i64 {
///     x.iter().sum()
/// }
///
/// fn main() {
/// # // A doctest has no device image, and a region whose data is present on a device never falls back to the host.
/// # offload::omp_set_default_device(offload::omp_get_initial_device());
///     let mut x = vec![1i64; 100];
///     target_data!(map(to: x) => {
///         assert_eq!(sum(x), 100);
///         x[0] = 101; // the host changes its copy ..
///         target_update!(to: x); // .. and refreshes the device's
///         assert_eq!(sum(x), 200);
///     });
/// }
/// ```
#[proc_macro]
pub fn target_update(input: TokenStream) -> TokenStream {
    data::target_update(input.into()).into()
}
