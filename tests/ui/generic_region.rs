use offload::target;

#[target]
fn scale<T: Copy>(x: &mut [T], k: T) {}

fn main() {}
