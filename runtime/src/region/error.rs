use std::fmt;

/// Why a region or runtime call failed.
///
/// A region's plain call (`saxpy(..)`) panics with this error's message; its `try_` twin (`try_saxpy(..)`, which
/// `#[target]` generates beside it) returns it. The runtime's fallible calls ([`DeviceBuffer`](crate::DeviceBuffer)'s)
/// return it too. It prints as one line saying what failed where.
///
/// ```
/// use offload::{target, DeviceBuffer, Error};
///
/// #[target]
/// fn double(y: &mut [f64]) {
///     for v in y.iter_mut() {
///         *v *= 2.0;
///     }
/// }
///
/// fn main() -> Result<(), Error> {
///     let mut y = vec![1.0; 4];
///     try_double(&mut y)?; // Err instead of a panic if the region fails on its device
///     assert_eq!(y, [2.0; 4]);
///
///     match DeviceBuffer::<f64>::new(4, 1000) {
///         Err(Error::Device { device, message, .. }) => {
///             assert_eq!(device, 1000);
///             assert!(message.contains("there is no offload device 1000"));
///         }
///         other => panic!("device 1000 exists? {other:?}"),
///     }
///     Ok(())
/// }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The region started on a device and failed there. Its mappings were released without copying anything back,
    /// and it was not re-run on the host (its side effects would repeat).
    #[error("offload: region {region} failed on device {device} ({plugin}): {message}{location}")]
    RegionFailed {
        /// The region's identity, `crate::module::function`.
        region: &'static str,
        /// The device number it ran on.
        device: i32,
        /// The plugin driving that device (`host-elf`, `cuda`, `amdgpu`).
        plugin: &'static str,
        /// What the device reported: a panic's message, a trap, a launch or copy-back failure.
        message: String,
        /// Where in the region's source it failed, if the device could say.
        location: Location,
    },
    /// The region's data could not be mapped as its clauses demand (a `present` violation, extending a mapping);
    /// an error under every policy, never a host fallback.
    #[error("offload: {what} cannot map its data on device {device} ({plugin}): {message}")]
    Mapping {
        /// The construct that mapped (`region crate::module::function`).
        what: String,
        /// The device number it mapped on.
        device: i32,
        /// The plugin driving that device.
        plugin: &'static str,
        /// Why the map failed.
        message: String,
    },
    /// A device operation (allocation, copy) failed, or the device does not exist.
    #[error("offload: device {device} ({plugin}): {message}")]
    Device {
        /// The device number asked for.
        device: i32,
        /// The plugin driving that device (`host` for the initial device, `none` when there is no such device).
        plugin: &'static str,
        /// What failed, and why.
        message: String,
    },
    /// A region taking device memory (`DevicePtr`, `DeviceBuffer`) could not run on the device holding it; it has
    /// no host fallback, since the host cannot dereference device memory.
    #[error(
        "offload: region {region} takes device memory and could not run on its device: {reason}"
    )]
    DeviceRequired {
        /// The region's identity, `crate::module::function`.
        region: &'static str,
        /// Why it could not run there (no image with its kernel, the `if` clause, another device than the memory's).
        reason: String,
    },
    /// The region's host fallback could not start a host thread for a team (the process is at its thread limit).
    /// The teams of an earlier wave may have run; the fallback is not retried.
    #[error("offload: region {region} could not run its host fallback: {source}")]
    HostThreads {
        /// The region's identity, `crate::module::function`.
        region: &'static str,
        /// The thread that could not start, and why.
        source: crate::host::pool::SpawnError,
    },
    /// A task ([`crate::TaskScope::spawn`], [`crate::spawn`], a region's `nowait_f`) panicked; the message is the
    /// panic's.
    #[error("offload: a task panicked: {message}")]
    TaskPanicked {
        /// The panic's message.
        message: String,
    },
    /// `OMP_TARGET_OFFLOAD=MANDATORY` and the region could not start on a device.
    #[error("offload: region {region} could not run on a device and OMP_TARGET_OFFLOAD=MANDATORY forbids the host fallback: {reason}")]
    Mandatory {
        /// The region's identity, `crate::module::function`.
        region: &'static str,
        /// Why it could not start on a device (no device, no image or kernel, an allocation or copy failure).
        reason: String,
    },
}

/// Where a device failure happened, if the target could say: ` at FILE:LINE:COLUMN (block B, thread T)`.
#[derive(Debug, Clone, Default)]
pub struct Location {
    /// (file, line, column) of the failure in the region's source.
    pub place: Option<(String, u32, u32)>,
    /// (block, thread) of the GPU thread that failed first.
    pub thread: Option<(u32, u32)>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((file, line, col)) = &self.place {
            write!(f, " at {file}:{line}:{col}")?;
        }
        match self.thread {
            Some((block, thread)) => write!(f, " (block {block}, thread {thread})"),
            None => Ok(()),
        }
    }
}
