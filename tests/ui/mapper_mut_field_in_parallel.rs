use offload::{target, Mapper};

#[derive(Mapper)]
struct Grid<'a> {
    x: &'a [f64],
    out: &'a mut [f64],
    n: usize,
}

// Every thread would hold `g.out`: refused (bind `out` as its own parameter instead).
#[target(teams_distribute_parallel_for)]
fn step(g: Grid<'_>) {
    for i in 0..g.n {
        let _ = g.x[i];
    }
}

fn main() {}
