use offload::target;

struct Particles {
    n: usize,
}

#[target]
impl Particles {
    // `&mut self` is mapped like a `&mut Particles` parameter: the type must be `DeviceCopy`.
    #[target(map(tofrom: self))]
    fn step(&mut self, dt: f32) {}
}

fn main() {}
