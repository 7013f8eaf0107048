use offload::target_data;

fn run(x: &[i64]) {
    // `tofrom` copies back into `x`, which is only borrowed shared.
    target_data!(map(tofrom: x) => {
        let _ = x.len();
    });
}

fn main() {
    run(&[1, 2]);
}
