use offload::target_data;

fn main() {
    let s = String::from("text");
    // Only plain data can be mapped: a String owns a pointer the device cannot follow.
    target_data!(map(to: s) => {
        let _ = s.len();
    });
}
