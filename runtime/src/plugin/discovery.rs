//! What the GPU plugins share when they look for devices: a guard against a driver library that panics, and the
//! collection of the devices that opened.

use super::error::PluginError;
use super::interface::{Device, Discovered};
use crate::host::panic::panic_message;

/// Runs a GPU plugin's discovery so that a panic in it (a driver library that misbehaves) costs the plugin's devices,
/// never the program.
pub fn guarded(
    library: &str,
    discover: fn() -> Result<Discovered, PluginError>,
) -> Result<Discovered, PluginError> {
    std::panic::catch_unwind(discover).unwrap_or_else(|p| {
        Err(PluginError::Unavailable {
            reason: format!("{library} could not be used: {}", panic_message(&*p)),
        })
    })
}

/// A plugin's devices from opening each one it found: those that opened, with a note for each it skipped; none is
/// an error with every reason.
pub fn opened(
    each: impl Iterator<Item = Result<Box<dyn Device>, PluginError>>,
) -> Result<Discovered, PluginError> {
    let (mut devices, mut skipped) = (Vec::new(), Vec::new());
    for d in each {
        match d {
            Ok(d) => devices.push(d),
            Err(e) => skipped.push(e.to_string()),
        }
    }
    if devices.is_empty() {
        return Err(PluginError::Unavailable {
            reason: skipped.join("; "),
        });
    }
    Ok(Discovered {
        devices,
        notes: skipped.into_iter().map(|s| format!("skips {s}")).collect(),
    })
}
