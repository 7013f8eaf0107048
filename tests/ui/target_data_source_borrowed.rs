use offload::{target, target_data};

#[target]
fn inc(y: &mut [i64]) {
    for v in y.iter_mut() {
        *v += 1;
    }
}

fn main() {
    let mut v = vec![0i64; 8];
    let r = &mut v;
    target_data!(map(tofrom: r) => {
        inc(r);
        // The region's exit copies back into the mapped buffer: it cannot be freed before then.
        v = Vec::new();
    });
}
