use offload::target_exit_data;

fn main() {
    let v = vec![1i64; 4];
    // `target_exit_data!` takes what `target_enter_data!` returned.
    let v = target_exit_data!(map(from: v));
    drop(v);
}
