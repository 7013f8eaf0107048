use offload::{target, Mapper};

#[derive(Mapper)]
struct Grid<'a> {
    data: &'a mut [f64],
}

#[target]
fn read(g: &Grid<'_>) -> f64 {
    g.data[0]
}

fn main() {}
