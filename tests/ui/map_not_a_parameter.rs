use offload::target;

#[target(map(to: x, z))]
fn f(x: &[f32], y: &mut [f32]) {}

fn main() {}
