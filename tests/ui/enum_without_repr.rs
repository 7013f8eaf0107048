use offload::declare_target;

// An enum crosses into a region by value: its layout must be fixed, or host and device may disagree on it.
#[declare_target]
#[derive(Clone, Copy)]
enum Op {
    Add,
    Scale(f32),
}

fn main() {
    let _ = [Op::Add, Op::Scale(2.0)];
}
