use offload::target;

#[target(map(tofrom: k))]
fn f(k: f32, y: &mut [f32]) {}

fn main() {}
