use offload::{data_scope, target_enter_data};

fn main() {
    let mut v = vec![1.0f64; 4];
    data_scope(|s| {
        let r = &mut v;
        let m = target_enter_data!(map(to: r), scope(s));
        // Forgetting the entry leaves it to the scope's end, and the data stays borrowed until then.
        std::mem::forget(m);
        drop(v);
    });
    // Nor can the entry leave its scope.
    let mut w = vec![1.0f64; 4];
    let _m = data_scope(|s| {
        let r = &mut w;
        target_enter_data!(map(to: r), scope(s))
    });
}
