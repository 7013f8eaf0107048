use offload::target;

struct Particles;

impl Particles {
    #[target]
    fn step(&mut self, dt: f32) {}
}

fn main() {}
