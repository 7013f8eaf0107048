// Wrapping a body in `AssertSync` asserts it is safe to share across threads: only `unsafe` code may say so.
fn main() {
    let body = offload::__private::AssertSync::new(move || 1);
    let _ = body.call();
}
