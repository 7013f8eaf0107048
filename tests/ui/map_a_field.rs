use offload::target_data;

struct S {
    buf: Vec<f32>,
}

fn main() {
    let mut s = S { buf: vec![0.0; 4] };
    target_data!(map(tofrom: s.buf) => {});
    target_data!(map(tofrom: self.buf) => {});
}
