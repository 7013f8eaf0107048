use offload::{declare_target, target};

#[declare_target]
#[repr(C)]
struct Cells {
    v: [u32; 8],
}

#[declare_target]
impl core::ops::Index<usize> for Cells {
    type Output = u32;
    fn index(&self, _: usize) -> &u32 {
        &self.v[0]
    }
}

#[declare_target]
impl core::ops::IndexMut<usize> for Cells {
    // Any `IndexMut` may send every index to one element.
    fn index_mut(&mut self, _: usize) -> &mut u32 {
        &mut self.v[0]
    }
}

#[target(teams_distribute_parallel_for)]
fn bump(y: &mut Cells) {
    for i in 0..8 {
        y[i] += 1;
    }
}

fn main() {}
