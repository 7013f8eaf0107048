use offload::target;

trait Step {
    fn step(&mut self, dt: f32);
}

#[derive(Clone, Copy)]
#[repr(C)]
#[offload::declare_target]
struct Particle {
    x: f32,
}

#[target]
impl Step for Particle {
    #[target]
    fn step(&mut self, dt: f32) {}
}

struct Grid<T>(T);

#[target]
impl<T> Grid<T> {
    #[target]
    fn clear(x: &mut [f32]) {}
}

fn main() {}
