use offload::target_data;

macro_rules! bail {
    () => {
        return
    };
}

// A `return` that a macro writes cannot be seen (and carried across the closure the block runs in, as a `return`
// written in the block is): inside the closure it is a type error, never a `return` from the closure alone, which
// would run `after()` where the function was meant to end.
fn run(mut y: Vec<f32>, stop: bool) {
    target_data!(map(tofrom: y) => {
        if stop {
            bail!();
        }
        y[0] = 1.0;
    });
    after();
}

fn after() {}

fn main() {
    run(vec![0.0; 4], true);
}
