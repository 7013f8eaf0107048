use offload::target;

#[target(map(to: x), map(tofrom: x))]
fn f(x: &mut [f32]) {}

fn main() {}
