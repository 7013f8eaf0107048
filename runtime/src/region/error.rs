use std::fmt;

/// Why a region or runtime call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The region started on a device and failed there. Its mappings were released without copying anything back,
    /// and it was not re-run on the host (its side effects would repeat).
    #[error("offload: region {region} failed on device {device} ({plugin}): {message}{location}")]
    RegionFailed {
        region: &'static str,
        device: i32,
        plugin: &'static str,
        message: String,
        location: Location,
    },
    /// The region's data could not be mapped as its clauses demand (a `present` violation, extending a mapping);
    /// an error under every policy, never a host fallback.
    #[error("offload: {what} cannot map its data on device {device} ({plugin}): {message}")]
    Mapping {
        what: String,
        device: i32,
        plugin: &'static str,
        message: String,
    },
    /// A device operation (allocation, copy) failed, or the device does not exist.
    #[error("offload: device {device} ({plugin}): {message}")]
    Device {
        device: i32,
        plugin: &'static str,
        message: String,
    },
    /// A region taking device memory (`DevicePtr`, `DeviceBuffer`) could not run on the device holding it; it has
    /// no host fallback, since the host cannot dereference device memory.
    #[error(
        "offload: region {region} takes device memory and could not run on its device: {reason}"
    )]
    DeviceRequired {
        region: &'static str,
        reason: String,
    },
    /// The region's host fallback could not start a host thread for a team (the process is at its thread limit).
    /// The teams of an earlier wave may have run; the fallback is not retried.
    #[error("offload: region {region} could not run its host fallback: {source}")]
    HostThreads {
        region: &'static str,
        source: crate::host::pool::SpawnError,
    },
    /// `OMP_TARGET_OFFLOAD=MANDATORY` and the region could not start on a device.
    #[error("offload: region {region} could not run on a device and OMP_TARGET_OFFLOAD=MANDATORY forbids the host fallback: {reason}")]
    Mandatory {
        region: &'static str,
        reason: String,
    },
}

/// Where a device failure happened, if the target could say.
#[derive(Debug, Clone, Default)]
pub struct Location(pub Option<(String, u32, u32)>);

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some((file, line, col)) => write!(f, " at {file}:{line}:{col}"),
            None => Ok(()),
        }
    }
}
