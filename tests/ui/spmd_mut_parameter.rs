use offload::target;

#[target(teams, parallel)]
fn scale(y: &mut [f32], k: f32) {
    for v in y.iter_mut() {
        *v *= k;
    }
}

fn main() {}
