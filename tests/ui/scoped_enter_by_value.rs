use offload::{data_scope, target_enter_data};

fn main() {
    data_scope(|s| {
        let a = [1.0f64; 4];
        // The array would move with the `ScopedMapped`, leaving its old address mapped: enter a reference.
        let _m = target_enter_data!(map(to: a), scope(s));
    });
}
