use offload::target_data;

// `?` in the block returns from the enclosing function, as it would outside the construct: here it cannot.
fn main() {
    let mut y = vec![0i64; 4];
    target_data!(map(tofrom: y) => {
        y[0] = "1".parse::<i64>()?;
    });
}
