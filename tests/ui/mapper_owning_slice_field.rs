use offload::Mapper;

// An owning struct's other fields are values: a slice beside a `Vec` would be borrowed from elsewhere.
#[derive(Mapper)]
struct Sim {
    concs: Vec<f64>,
    grid: &'static [f64],
    n: usize,
}

fn main() {}
