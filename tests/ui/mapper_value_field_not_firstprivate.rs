use offload::Mapper;

#[derive(Mapper)]
struct Grid<'a> {
    data: &'a mut [f64],
    name: String,
    nested: Option<&'a [f64]>,
}

fn main() {}
