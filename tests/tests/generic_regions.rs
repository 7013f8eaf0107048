//! Generic regions and regions in `impl` blocks: a BabelStream-style `T: Real` stream
//! over f32 and f64 called from generic host code, a call with a type `instantiate(..)` does not list (the host
//! runs it, with the reason; an error under MANDATORY), and method regions taking `&self`, `&mut self` and `self`,
//! and an associated function. Each runs on the default device (host-elf, or gpu-sim under
//! `OFFLOAD_PLUGINS=gpu-sim`) and in the host fallback (`if(on_device)` false), and the results must agree.

use offload::{omp_is_initial_device, target, DeviceCopy, Numeric};

/// BabelStream's `T`: the float types the stream runs on. `DeviceCopy` is a supertrait, so slices of `T` map.
trait Real: DeviceCopy + Copy + PartialEq + core::fmt::Debug {
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn mul_add(self, a: Self, b: Self) -> Self;
}

impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mul_add(self, a: Self, b: Self) -> Self {
        self * a + b
    }
}

impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn mul_add(self, a: Self, b: Self) -> Self {
        self * a + b
    }
}

// A plain integer type, to be called with a type the regions do not list.
impl Real for i32 {
    fn from_f64(v: f64) -> Self {
        v as i32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn mul_add(self, a: Self, b: Self) -> Self {
        self * a + b
    }
}

/// BabelStream's triad: `a = b + k * c`.
#[target(teams_distribute_parallel_for, map(to: b, c), map(from: a), if(on_device), instantiate(f32, f64))]
fn triad<T: Real>(on_device: bool, a: &mut [T], b: &[T], c: &[T], k: T) {
    for i in 0..a.len() {
        a[i] = k.mul_add(c[i], b[i]);
    }
}

/// BabelStream's dot, a reduction whose value is a `T`.
#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device), instantiate(f32, f64))]
fn dot<T: Real>(on_device: bool, a: &[T], b: &[T]) -> f64 {
    let mut s = 0.0;
    for i in 0..a.len() {
        s += a[i].to_f64() * b[i].to_f64();
    }
    s
}

/// Two parameters, one a const: a kernel per `<T, N>` list; returns where it ran.
#[target(if(on_device), instantiate(<f32, 2>, <f64, 3>))]
fn fill<T: Real, const N: usize>(on_device: bool, out: &mut [[T; N]], v: T) -> bool {
    for row in out.iter_mut() {
        for x in row.iter_mut() {
            *x = v;
        }
    }
    omp_is_initial_device()
}

/// What a C++ template's caller is: generic code calling the region with its own `T`.
fn stream<T: Real>(on_device: bool, n: usize) -> (Vec<T>, f64) {
    let b: Vec<T> = (0..n).map(|i| T::from_f64(i as f64)).collect();
    let c: Vec<T> = (0..n).map(|i| T::from_f64((n - i) as f64)).collect();
    let mut a = vec![T::from_f64(0.0); n];
    triad::<T>(on_device, &mut a, &b, &c, T::from_f64(2.0));
    let s = dot(on_device, &a, &b);
    (a, s)
}

fn expected(n: usize) -> (Vec<f64>, f64) {
    let a: Vec<f64> = (0..n).map(|i| i as f64 + 2.0 * (n - i) as f64).collect();
    let s = a.iter().enumerate().map(|(i, x)| x * i as f64).sum();
    (a, s)
}

#[test]
fn a_generic_stream_runs_on_the_device_and_the_host_for_f32_and_f64() {
    let n = 1000;
    let (want, want_dot) = expected(n);
    for on_device in [true, false] {
        let (a, s) = stream::<f32>(on_device, n);
        assert_eq!(
            a,
            want.iter().map(|&x| x as f32).collect::<Vec<_>>(),
            "f32, device {on_device}"
        );
        assert_eq!(s, want_dot, "f32 dot, device {on_device}");
        let (a, s) = stream::<f64>(on_device, n);
        assert_eq!(a, want, "f64, device {on_device}");
        assert_eq!(s, want_dot, "f64 dot, device {on_device}");
    }
}

#[test]
fn const_generic_instances_pick_their_kernel() {
    for on_device in [true, false] {
        let mut a = vec![[0.0f32; 2]; 5];
        assert_eq!(fill(on_device, &mut a, 1.5), !on_device, "ran where asked");
        assert_eq!(a, vec![[1.5f32; 2]; 5]);
        let mut b = vec![[0.0f64; 3]; 4];
        assert_eq!(fill(on_device, &mut b, -2.0), !on_device, "ran where asked");
        assert_eq!(b, vec![[-2.0f64; 3]; 4]);
    }
}

/// Runs this test binary's `child` test alone in a process of its own (the runtime reads the environment once), with
/// `env` set on top of a cleared runtime environment.
fn child(name: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut set = vec![("GENERIC_REGIONS_CHILD", "1")];
    set.extend_from_slice(env);
    offload_tests::rerun_self(
        &[name, "--exact", "--nocapture", "--test-threads=1"],
        &["OMP_TARGET_OFFLOAD", "OFFLOAD_INFO", "OMP_DEFAULT_DEVICE"],
        &set,
    )
}

/// Run by `a_type_without_a_kernel_*` in a process of its own: the stream over `i32`, which no region lists.
#[test]
fn child_unlisted_type() {
    if std::env::var_os("GENERIC_REGIONS_CHILD").is_none() {
        return;
    }
    let (a, s) = stream::<i32>(true, 10);
    let (want, want_dot) = expected(10);
    assert_eq!(a, want.iter().map(|&x| x as i32).collect::<Vec<_>>());
    assert_eq!(s, want_dot);
    println!("unlisted_results_correct=true");
}

#[test]
fn a_type_without_a_kernel_runs_on_the_host_with_the_reason() {
    let out = child("child_unlisted_type", &[("OFFLOAD_INFO", "1")]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("unlisted_results_correct=true"),
        "{stdout}\n{stderr}"
    );
    for region in ["triad", "dot"] {
        let why = format!(
            "region `{region}` has no kernel for `T = i32`: its `instantiate(..)` lists f32, f64"
        );
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("host-fallback") && l.contains(&why)),
            "{stderr}"
        );
    }
}

#[test]
fn a_type_without_a_kernel_is_an_error_under_mandatory() {
    let out = child(
        "child_unlisted_type",
        &[("OMP_TARGET_OFFLOAD", "MANDATORY")],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.contains("unlisted_results_correct"), "{stdout}");
    assert!(
        stderr.contains("region generic_regions::triad could not run on a device"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "region `triad` has no kernel for `T = i32`: its `instantiate(..)` lists f32, f64"
        ),
        "{stderr}"
    );
}

/// A struct-heavy code's state: regions are its methods.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[offload::declare_target]
struct Body {
    pos: [f64; 3],
    vel: [f64; 3],
    mass: f64,
}

#[target]
impl Body {
    /// `&mut self`, mapped `tofrom`; returns where it ran.
    #[target(map(tofrom: self), if(on_device))]
    fn advance(&mut self, on_device: bool, dt: f64) -> bool {
        for k in 0..3 {
            self.pos[k] += dt * self.vel[k];
        }
        omp_is_initial_device()
    }

    /// `&self`, mapped `to`, and a value back.
    #[target(map(to: self), if(on_device))]
    fn kinetic(&self, on_device: bool) -> f64 {
        let v2 = self.vel[0] * self.vel[0] + self.vel[1] * self.vel[1] + self.vel[2] * self.vel[2];
        0.5 * self.mass * v2
    }

    /// `self` by value (firstprivate), with the clause naming it.
    #[target(if(on_device), map(tofrom: out))]
    fn momentum(self, on_device: bool, out: &mut [f64; 3]) {
        for (o, v) in out.iter_mut().zip(self.vel) {
            *o = self.mass * v;
        }
    }

    /// An associated function: a parallel region over many bodies.
    #[target(teams_distribute_parallel_for, map(tofrom: bodies), if(on_device))]
    fn drift_all(on_device: bool, bodies: &mut [Body], dt: f64) {
        for i in 0..bodies.len() {
            bodies[i] = bodies[i].drifted(dt);
        }
    }

    /// Not a region: reached from one, so it goes to the device.
    fn drifted(self, dt: f64) -> Body {
        let mut b = self;
        for k in 0..3 {
            b.pos[k] += dt * b.vel[k];
        }
        b
    }

    /// Not a region and not reached: host code (it allocates), kept out of the device crate.
    fn describe(&self) -> String {
        format!("{:?}", self.pos)
    }
}

#[test]
fn method_regions_map_their_receiver_per_its_type() {
    for on_device in [true, false] {
        let mut b = Body {
            pos: [0.0; 3],
            vel: [1.0, 2.0, 3.0],
            mass: 2.0,
        };
        assert_eq!(b.advance(on_device, 0.5), !on_device, "ran where asked");
        assert_eq!(b.pos, [0.5, 1.0, 1.5], "device {on_device}");
        assert_eq!(b.kinetic(on_device), 14.0, "device {on_device}");
        let mut p = [0.0; 3];
        b.momentum(on_device, &mut p);
        assert_eq!(p, [2.0, 4.0, 6.0], "device {on_device}");
        let mut all = vec![b; 64];
        Body::drift_all(on_device, &mut all, 1.0);
        assert!(
            all.iter().all(|x| x.pos == [1.5, 3.0, 4.5]),
            "device {on_device}"
        );
        assert_eq!(all[0].describe(), "[1.5, 3.0, 4.5]");
    }
}

/// A reduction whose value is the region's own `T`, as BabelStream's templated `dot` returns it: `offload::Numeric`
/// as a supertrait lets `reduction(+: s)` combine a `T`.
trait Num:
    DeviceCopy + Numeric + core::ops::Add<Output = Self> + core::ops::Mul<Output = Self>
{
}
impl Num for f32 {}
impl Num for f64 {}
impl Num for u64 {}

#[target(teams_distribute_parallel_for, reduction(+: s), if(on_device), instantiate(f32, f64, u64))]
fn dot_t<T: Num>(on_device: bool, a: &[T], b: &[T]) -> T {
    let mut s = T::ZERO;
    for i in 0..a.len() {
        s = s + a[i] * b[i];
    }
    s
}

#[test]
fn a_reduction_of_the_regions_own_type() {
    let a: Vec<u64> = (0..1000).collect();
    let b = vec![2u64; 1000];
    for on_device in [true, false] {
        assert_eq!(dot_t(on_device, &a, &b), 999 * 1000);
        let x: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let y = vec![2.0f32; 1000];
        assert_eq!(dot_t(on_device, &x, &y), 999_000.0);
    }
}

/// A C++ class template's member kernels (`template <class T> void Stream<T>::triad()`): regions in a generic impl,
/// `instantiate(..)` listing the impl's parameters and then the method's own. A method's receiver is the struct of
/// the instance's type.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
#[offload::declare_target]
struct Scaled<T: Real> {
    k: T,
    bias: T,
}

#[target]
impl<T: Real> Scaled<T> {
    /// `&self` of `Scaled<T>`, and a parallel loop over `T`s.
    #[target(teams_distribute_parallel_for, map(to: self), if(on_device), instantiate(f32, f64))]
    fn apply(&self, on_device: bool, x: &[T], y: &mut [T]) {
        for i in 0..y.len() {
            y[i] = self.k.mul_add(x[i], self.bias);
        }
    }

    /// An associated function with a const parameter of its own: `<T, N>`, the impl's first.
    #[target(if(on_device), instantiate(<f32, 2>, <f64, 3>))]
    fn splat<const N: usize>(on_device: bool, v: T, out: &mut [[T; N]]) -> bool {
        for row in out.iter_mut() {
            *row = [v; N];
        }
        omp_is_initial_device()
    }
}

fn run_scaled<T: Real>(on_device: bool) -> Vec<T> {
    let s = Scaled {
        k: T::from_f64(2.0),
        bias: T::from_f64(0.5),
    };
    let x: Vec<T> = (0..100).map(|i| T::from_f64(i as f64)).collect();
    let mut y = vec![T::from_f64(0.0); 100];
    s.apply(on_device, &x, &mut y);
    y
}

#[test]
fn regions_in_a_generic_impl_have_a_kernel_per_instance() {
    for on_device in [true, false] {
        let y32 = run_scaled::<f32>(on_device);
        assert!(
            y32.iter()
                .enumerate()
                .all(|(i, &v)| v == 2.0 * i as f32 + 0.5),
            "device {on_device}"
        );
        let y64 = run_scaled::<f64>(on_device);
        assert!(
            y64.iter()
                .enumerate()
                .all(|(i, &v)| v == 2.0 * i as f64 + 0.5),
            "device {on_device}"
        );
        let mut rows = vec![[0.0f32; 2]; 4];
        assert_eq!(
            Scaled::<f32>::splat::<2>(on_device, 7.0, &mut rows),
            !on_device,
            "ran where asked"
        );
        assert_eq!(rows, vec![[7.0; 2]; 4]);
        let mut rows = vec![[0.0f64; 3]; 2];
        assert_eq!(
            Scaled::<f64>::splat::<3>(on_device, 1.5, &mut rows),
            !on_device
        );
        assert_eq!(rows, vec![[1.5; 3]; 2]);
    }
}

/// Generic regions as tasks (`nowait_f::<T>(s, ..)`), and method regions (`x.nowait_m(s, ..)` for `&self`,
/// `&mut self` and `self`, `Type::nowait_f(s, ..)` for an associated function): the results of the calls.
#[test]
fn generic_and_method_regions_run_as_tasks() {
    let n = 1000;
    let (b, c) = (vec![1.0f64; n], vec![2.0f64; n]);
    let mut a = vec![0.0f64; n];
    let body = Body {
        pos: [0.0; 3],
        vel: [1.0, 2.0, 3.0],
        mass: 2.0,
    };
    let mut bodies = vec![body; 4];
    let mut momentum = [0.0; 3];
    let (dot, kinetic) = offload::task_scope(|s| {
        let t = nowait_triad::<f64>(s, true, &mut a, &b, &c, 3.0);
        let d = nowait_dot::<f64>(s, true, &b, &c);
        let k = body.nowait_kinetic(s, true);
        let m = body.nowait_momentum(s, true, &mut momentum);
        let all = Body::nowait_drift_all(s, true, &mut bodies, 0.5);
        t.wait().unwrap();
        m.wait().unwrap();
        all.wait().unwrap();
        (d.wait().unwrap(), k.wait().unwrap())
    });
    assert!(a.iter().all(|&v| v == 7.0));
    assert_eq!(dot, 2.0 * n as f64);
    assert_eq!(kinetic, body.kinetic(false));
    assert_eq!(momentum, [2.0, 4.0, 6.0]);
    assert!(bodies.iter().all(|x| x.pos == [0.5, 1.0, 1.5]));
    let mut moving = body;
    let on_device = offload::task_scope(|s| moving.nowait_advance(s, true, 1.0).wait().unwrap());
    assert_eq!(moving.pos, [1.0, 2.0, 3.0]);
    assert_eq!(on_device, offload::omp_get_num_devices() == 0);
}
