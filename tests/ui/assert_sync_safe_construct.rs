use std::cell::Cell;

// `AssertSync` makes anything `Sync`: constructing it must take `unsafe`, or safe code could share a `Cell`
// across threads (a data race).
fn main() {
    let shared = offload::__private::AssertSync(Cell::new(0u32));
    let r = &shared;
    std::thread::scope(|s| {
        s.spawn(move || r.0.set(1));
        s.spawn(move || r.0.set(2));
    });
}
