use offload::target;

#[target(map(from: x))]
fn f(x: &[f32]) {}

fn main() {}
