use offload::Mapper;

#[derive(Mapper)]
struct Grid<'a> {
    #[map(from)]
    input: &'a [f64],
    #[map(tofrom)]
    n: usize,
    #[map(delete)]
    out: &'a mut [f64],
}

fn main() {}
