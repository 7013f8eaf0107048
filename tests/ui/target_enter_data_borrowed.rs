use offload::target_enter_data;

fn main() {
    let v = vec![1i64; 4];
    // `target_enter_data!` takes the buffer by value (it keeps it alive while mapped); a borrow is not enough.
    let m = target_enter_data!(map(to: &v));
    drop(m);
}
