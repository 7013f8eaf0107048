//! Status lines of the device build, the cargo way (`   Compiling ...`), for `cargo offload build`: it sets
//! `OFFLOAD_PROGRESS` to a file it prints as lines arrive (a build script's output is hidden). Under plain
//! `cargo build` nothing is written, and only warnings reach the user.

use std::io::Write;
use std::time::Instant;

/// Appends `verb message (time)` to the progress file, if there is one.
pub fn status(verb: &str, message: &str, since: Instant) {
    let Some(path) = std::env::var_os("OFFLOAD_PROGRESS") else {
        return;
    };
    let line = format!(
        "{verb}\t{message} ({:.1}s)\n",
        since.elapsed().as_secs_f64()
    );
    // One `write` on an append-mode file: lines of concurrent build scripts do not interleave.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
    {
        let _ = f.write_all(line.as_bytes());
    }
}
