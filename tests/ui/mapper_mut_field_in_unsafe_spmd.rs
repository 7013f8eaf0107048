use offload::{target, Mapper};

#[derive(Mapper)]
struct Grid<'a> {
    x: &'a [f64],
    count: &'a mut u64,
}

// `unsafe fn` does not help: every thread would still hold one `&mut`, undefined behaviour whatever they write.
#[target(teams, parallel)]
unsafe fn spmd(g: &mut Grid<'_>) {
    let _ = g.x.len();
}

fn main() {}
