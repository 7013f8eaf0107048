use offload::target;

#[target]
async fn f(x: &mut [f32]) {}

fn main() {}
