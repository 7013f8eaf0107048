use offload::target_data;

async fn tick() {}

// Review finding 3: an `.await` that another macro writes cannot be seen in the block's tokens, but the block runs in a
// closure, where rustc itself rejects it: no future can be suspended (and forgotten) inside the data region.
macro_rules! settle {
    ($f:expr) => {
        $f.await
    };
}

async fn run(mut y: Vec<f32>) -> Vec<f32> {
    target_data!(map(tofrom: y) => {
        y[0] = 1.0;
        settle!(tick());
    });
    y
}

fn main() {
    let _ = run(vec![0.0; 4]);
}
