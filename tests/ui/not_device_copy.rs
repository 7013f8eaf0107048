use offload::target;

struct Opaque {
    v: Vec<u8>,
}

#[target]
fn f(x: &[Opaque], flag: std::time::Instant) {}

fn main() {}
