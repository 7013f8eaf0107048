use offload::{target_data, Mapper};

#[derive(Mapper)]
pub struct Sim {
    v: Vec<f64>,
    n: usize,
}

// Review finding 8: the block sees the struct as `offload::Fixed<Sim>`, so it cannot replace the `Vec`: freed, the
// mapped memory could be reused by a new `Vec` that would then be "present" and run on the old device copy.
fn main() {
    let mut s = Sim { v: vec![1.0; 4], n: 4 };
    target_data!(map(tofrom: s) => {
        s.v = Vec::new(); // would drop the mapped buffer
        assert_eq!(s.v.len(), s.n);
    });
}
