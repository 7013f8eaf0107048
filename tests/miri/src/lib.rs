//! Regions of every kind, for Miri: this package has no `build.rs`, so it has no device images and every region runs
//! in the host fallback, the code Miri can interpret (`tests/fallback.rs`).
