use offload::{declare_target, target};

#[declare_target]
#[repr(C)]
struct Grid {
    cells: [f32; 16],
}

// Every thread would hold the one `&mut Grid` (and its `IndexMut`, if it had one, could write anywhere).
#[target(teams_distribute_parallel_for)]
fn fill(g: &mut Grid) {
    for i in 0..16 {
        g.cells[i] = 1.0;
    }
}

fn main() {}
