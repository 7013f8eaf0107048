use offload::declare_target;

// What porting users wrote first: a struct holding slices is a mapper, not a `#[declare_target]` value.
#[declare_target]
struct Grid<'a> {
    data: &'a [f64],
    n: usize,
}

fn main() {}
