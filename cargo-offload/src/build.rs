//! `cargo offload build`: `cargo build` with the device builds' status lines shown the cargo way, as they happen.

use std::io::{IsTerminal, Read, Seek};
use std::process::Command;
use std::time::Duration;

/// `   Compiling x`: the verb right-aligned to 12 columns, bold green on a terminal, as cargo prints it.
pub fn status_line(verb: &str, message: &str, color: bool) -> String {
    if color {
        format!("\x1b[1;32m{verb:>12}\x1b[0m {message}")
    } else {
        format!("{verb:>12} {message}")
    }
}

pub fn build(cargo_args: &[String]) -> Result<std::process::ExitStatus, String> {
    let dir = std::env::temp_dir().join(format!("cargo-offload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let progress = dir.join("progress");
    std::fs::write(&progress, "").map_err(|e| format!("{}: {e}", progress.display()))?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut child = Command::new(&cargo)
        .arg("build")
        .args(cargo_args)
        .env("OFFLOAD_PROGRESS", &progress)
        .spawn()
        .map_err(|e| format!("running {cargo}: {e}"))?;
    let color = std::io::stderr().is_terminal();
    let mut file = std::fs::File::open(&progress).map_err(|e| e.to_string())?;
    let mut pending = String::new();
    let mut show = |file: &mut std::fs::File| {
        let mut new = String::new();
        let _ = file.read_to_string(&mut new);
        pending.push_str(&new);
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            if let Some((verb, message)) = line.trim_end().split_once('\t') {
                eprintln!("{}", status_line(verb, message, color));
            }
        }
        let _ = file.stream_position();
    };
    let status = loop {
        show(&mut file);
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e.to_string()),
        }
    };
    show(&mut file);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(status)
}
