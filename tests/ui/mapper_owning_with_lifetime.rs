use offload::Mapper;

// A struct owns its arrays (`Vec` fields, passed as `&Sim`) or borrows them (slices with a lifetime), not both.
#[derive(Mapper)]
struct Sim<'a> {
    concs: Vec<f64>,
    n: usize,
    _p: std::marker::PhantomData<&'a ()>,
}

fn main() {}
