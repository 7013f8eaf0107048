use offload::declare_target;

#[declare_target]
#[derive(Clone, Copy)]
struct Point {
    x: f32,
    y: f32,
}

fn main() {}
