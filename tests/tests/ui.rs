//! Misuses of `#[target]` and `#[declare_target]` are spanned compile errors that say what to do instead.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("ui/*.rs");
}
