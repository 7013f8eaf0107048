use offload::target;

#[target(mapp(to: x))]
fn f(x: &[f32]) {}

fn main() {}
