use offload::target;

#[target]
fn scale<T: offload::DeviceCopy + Copy>(x: &mut [T], k: T) {}

fn main() {}
