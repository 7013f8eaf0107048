use offload::target_enter_data;

fn main() {
    let v = vec![1i64; 4];
    let s: &[i64] = &v;
    // `target_enter_data!` takes an owned buffer (Vec<T>, Box<[T]>, Box<T>), not a borrow of one.
    let m = target_enter_data!(map(to: s));
    drop(m);
}
