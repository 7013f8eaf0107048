use offload::{data_scope, target_enter_data, target_exit_data, Mapper};

#[derive(Mapper)]
pub struct Sim {
    v: Vec<f64>,
}

// Entered in a data scope, a struct that owns its arrays derefs to `offload::Fixed<Sim>` until its exit: its `Vec`s
// cannot be grown (reallocated) while mapped.
fn main() {
    let mut s = Sim { v: vec![1.0; 4] };
    data_scope(|sc| {
        let r = &mut s;
        let mut m = target_enter_data!(map(to: r), scope(sc));
        m.v.push(2.0);
        target_exit_data!(map(from: m));
    });
}
