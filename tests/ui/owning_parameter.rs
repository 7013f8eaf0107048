use offload::target;

#[target]
fn f(v: Vec<f32>, s: String) {}

fn main() {}
