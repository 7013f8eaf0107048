use offload::target_update;

fn refresh(y: &[i64]) {
    // `from` writes the host copy, which a shared borrow cannot.
    target_update!(from: y);
}

fn main() {
    refresh(&[1, 2]);
}
