use offload::declare_target;

// A device's threads would race on a `static mut`: device globals that change are atomics.
#[declare_target]
static mut TOTAL: f64 = 0.0;

fn main() {}
