use offload::target_data;

fn main() {
    let x = vec![0i64; 4];
    // The block writes a `to` variable: its source must be mutable (`let mut x`).
    target_data!(map(to: x) => {
        x[0] = 1;
    });
}
