//! Float methods `core` lacks work in region code through the prelude, and give the host's results bit for bit on
//! the host devices; on a GPU, the vendor's math library's (libdevice, ROCm's ocml), within its error bounds.

/// Whether a device's result `d` is the host's `h`: the same bits, or on a GPU within `rel` of it (an H200 gave
/// `9.052182` for the host's `9.052183`: libdevice's `f32` functions are within 1 to 4 ulp, not correctly rounded).
fn same(d: f64, h: f64, rel: f64) -> bool {
    if offload_tests::default_device_is_gpu() {
        (d - h).abs() <= rel * h.abs().max(1.0)
    } else {
        d.to_bits() == h.to_bits()
    }
}

use offload::{omp_is_initial_device, target};

#[target(if(on_device))]
fn math(on_device: bool, x: &[f64], y: &mut [f64], z: &mut [f32]) -> bool {
    for i in 0..x.len() {
        let v = x[i];
        y[i] = v.sqrt()
            + v.exp().ln()
            + v.log2()
            + v.sin() * v.cos()
            + v.tan().tanh()
            + v.powf(1.5)
            + v.powi(3)
            - v.mul_add(2.0, 1.0)
            + v.floor()
            + v.ceil()
            + v.abs().min(3.0)
            + v.max(-1.0);
        let f = v as f32;
        z[i] = f.sqrt() + f.exp() + f.ln() + f.mul_add(f, 0.5) + f.powi(2) + f.sin() + f.floor();
    }
    omp_is_initial_device()
}

#[test]
fn float_methods_match_the_host() {
    let x: Vec<f64> = (1..200).map(|i| i as f64 * 0.37).collect();
    let (mut yd, mut zd) = (vec![0.0; x.len()], vec![0.0f32; x.len()]);
    let (mut yh, mut zh) = (vec![0.0; x.len()], vec![0.0f32; x.len()]);
    assert!(!math(true, &x, &mut yd, &mut zd), "ran on the device");
    assert!(math(false, &x, &mut yh, &mut zh), "ran on the host");
    for i in 0..x.len() {
        assert!(
            same(yd[i], yh[i], 1e-13),
            "f64 at {i}: {} vs {}",
            yd[i],
            yh[i]
        );
        assert!(
            same(zd[i].into(), zh[i].into(), 1e-5),
            "f32 at {i}: {} vs {}",
            zd[i],
            zh[i]
        );
    }
    assert!(yd.iter().all(|v| v.is_finite()));
}

#[target(if(on_device))]
fn free_functions(on_device: bool, x: &[f32], y: &mut [f32]) {
    for i in 0..x.len() {
        let v = x[i];
        y[i] = offload::sqrt(v)
            + offload::exp(v / 10.0)
            + offload::ln(v)
            + offload::log2(v)
            + offload::sin(v)
            + offload::cos(v)
            + offload::tan(v / 100.0)
            + offload::tanh(v)
            + offload::powf(v, 0.5)
            + offload::powi(v, 2)
            + offload::mul_add(v, 2.0, 1.0)
            + offload::abs(-v)
            + offload::floor(v)
            + offload::ceil(v)
            + offload::min(v, 3.0)
            + offload::max(v, 3.0);
    }
}

#[test]
fn free_math_functions_match_the_host() {
    let x: Vec<f32> = (1..100).map(|i| i as f32 * 0.7).collect();
    let (mut d, mut h) = (vec![0f32; x.len()], vec![0f32; x.len()]);
    free_functions(true, &x, &mut d);
    free_functions(false, &x, &mut h);
    assert!(d
        .iter()
        .zip(&h)
        .all(|(a, b)| same((*a).into(), (*b).into(), 1e-5)));
    assert!(d.iter().all(|v| v.is_finite() && *v > 0.0));
}
