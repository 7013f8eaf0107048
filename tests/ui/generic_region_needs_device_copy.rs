use offload::target;

trait Real: Copy {}
impl Real for f32 {}

// `Real` does not say `DeviceCopy`: a slice of `T` cannot be mapped.
#[target(instantiate(f32))]
fn scale<T: Real>(x: &mut [T], k: T) {}

fn main() {}
