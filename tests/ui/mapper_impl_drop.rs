use offload::{target, Mapper};

// A mapper struct passed by value is rebuilt from its fields by the host fallback and by the kernel entry, so a
// `Drop` of its own would run once per copy.
#[derive(Mapper)]
struct Grid<'a> {
    u: &'a mut [f64],
    n: usize,
}

impl Drop for Grid<'_> {
    fn drop(&mut self) {
        self.u[0] += 1.0;
    }
}

#[target]
fn relax(g: Grid<'_>) {
    for i in 0..g.n {
        g.u[i] *= 2.0;
    }
}

fn main() {
    let mut u = vec![1.0; 4];
    relax(Grid { u: &mut u, n: 4 });
}
