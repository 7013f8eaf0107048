use offload::target_data;

async fn tick() {}

// A future suspended inside the block and then forgotten would never run the exit: `.await` is rejected there.
async fn run(mut y: Vec<f32>) -> Vec<f32> {
    target_data!(map(tofrom: y) => {
        y[0] = 1.0;
        tick().await;
    });
    y
}

fn main() {
    let _ = run(vec![0.0; 4]);
}
