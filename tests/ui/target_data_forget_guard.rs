use offload::target_data;

// The guard that copies `y` back at the block's end cannot be named from the block, so it cannot be forgotten
// (which would leave a stale mapping and let `y` be freed while mapped).
fn main() {
    let mut y = vec![0f32; 4];
    target_data!(map(tofrom: y) => {
        std::mem::forget(__offload_mapped_y);
    });
    drop(y);
}
