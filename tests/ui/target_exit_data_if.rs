use offload::{target_enter_data, target_exit_data};

fn main() {
    let v = vec![1i64; 4];
    let m = target_enter_data!(map(to: v));
    let v = target_exit_data!(map(from: m), if(v_len() > 2));
    drop(v);
}

fn v_len() -> usize {
    4
}
