use offload::Mapper;

// C's `struct { int *p; int n; }`: a raw pointer means nothing on a device.
#[derive(Mapper)]
struct Buf {
    p: *mut i32,
    n: i32,
}

fn main() {}
