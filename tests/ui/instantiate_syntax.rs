use offload::target;

#[target(instantiate(f32; f64))]
fn scale<T: offload::DeviceCopy + Copy>(x: &mut [T], k: T) {}

#[target(instantiate(<f32, u32>, f64))]
fn pair<T: offload::DeviceCopy + Copy, U: offload::DeviceCopy + Copy>(x: &mut [T], y: &[U]) {}

#[target(instantiate(f32))]
fn not_generic(x: &mut [f32]) {}

#[target(instantiate(f32, 4, f32))]
fn fill<T: offload::DeviceCopy + Copy>(x: &mut [T]) {}

fn main() {}
