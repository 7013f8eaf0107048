use offload::target_data;

fn main() {
    let mut y = vec![0i64; 8];
    // The exit copies back into `y`: no reference into it may outlive the region.
    let first: &i64 = target_data!(map(tofrom: y) => { &y[0] });
    println!("{first}");
}
