//! What can go wrong in a plugin: the device interface's one error type. Each variant says what happened, its message
//! says what to do where there is something to do, and the runtime decides what it means for the region (fall back,
//! fail, mark the device lost).

/// A plugin call's failure.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The plugin can drive no device: its driver or runtime is missing or unusable, or there is no hardware.
    #[error("{reason}")]
    Unavailable { reason: String },
    /// The plugin was compiled out: `offload` was built without the cargo feature that brings it.
    #[error(
        "offload was built without its `{feature}` feature (add it to the `offload` dependency's `features`)"
    )]
    NotBuilt { feature: &'static str },
    /// One device could not be opened; the plugin's other devices may still be used.
    #[error("{device}: {reason}")]
    Open { device: String, reason: String },
    /// The device has too little free memory for an allocation.
    #[error(
        "out of device memory allocating {bytes} bytes ({detail}): free device memory (drop `DeviceBuffer`s, end \
         data regions that are done) or map less data at once"
    )]
    OutOfMemory { bytes: usize, detail: String },
    /// An allocation failed for another reason (a driver error).
    #[error("allocating {bytes} bytes of device memory failed: {reason}")]
    Alloc { bytes: usize, reason: String },
    /// The device cannot align a block as much as the data needs.
    #[error(
        "the data needs {align}-byte alignment; this device aligns allocations to at most {max} bytes (use an \
         element type aligned to at most {max} bytes)"
    )]
    Alignment { align: usize, max: usize },
    /// A copy between host and device memory failed.
    #[error("copying {bytes} bytes {} failed: {reason}", if *to_device { "to the device" } else { "from the device" })]
    Transfer {
        to_device: bool,
        bytes: usize,
        reason: String,
    },
    /// An image could not be loaded; its regions run on the host (or on another image that has their kernels).
    #[error("{reason}")]
    Load { reason: String },
    /// Looking a kernel up in a loaded image failed (its absence is no error).
    #[error("looking up the kernel {symbol} failed: {reason}")]
    Lookup { symbol: String, reason: String },
    /// A device global's copy in a loaded image cannot stand for the host static.
    #[error("{reason}")]
    Global { reason: String },
    /// The device refused a launch before the kernel started (its configuration, or no host thread for a team); the
    /// device stays usable.
    #[error("{reason}")]
    Launch { reason: String },
    /// Region code panicked on a device that reports the panic: the host image, whose device stays usable, or a GPU
    /// through its panic record ([`offload_model::gpu_panic`]), whose trap may have lost the device (`lost`).
    #[error("{message}")]
    Panic {
        message: String,
        /// File, line and column, where the target can report them.
        location: Option<(String, u32, u32)>,
        /// The GPU block and thread that panicked first.
        thread: Option<(u32, u32)>,
        /// The trap that ended the kernel left the device unusable (a CUDA context, an HSA queue).
        lost: bool,
    },
    /// The kernel started and died without a message (a trap, which is what a panic is on a GPU, a memory fault, a
    /// dead queue or context): the device cannot be used any more.
    #[error("{message}")]
    Trap { message: String },
}

impl PluginError {
    /// The device cannot be used any more.
    pub fn device_lost(&self) -> bool {
        matches!(
            self,
            PluginError::Trap { .. } | PluginError::Panic { lost: true, .. }
        )
    }

    /// Where region code failed, if the device could say.
    pub fn location(&self) -> Option<&(String, u32, u32)> {
        match self {
            PluginError::Panic { location, .. } => location.as_ref(),
            _ => None,
        }
    }

    /// The GPU block and thread that failed, if the device could say.
    pub fn thread(&self) -> Option<(u32, u32)> {
        match self {
            PluginError::Panic { thread, .. } => *thread,
            _ => None,
        }
    }

    /// A GPU kernel's failure: the panic its record holds, or else `trap` (the driver's account of the failure).
    /// `lost`: the device cannot be used after the trap.
    pub fn from_panic_record(
        record: Option<offload_model::gpu_panic::Taken>,
        lost: bool,
        trap: impl FnOnce() -> PluginError,
    ) -> PluginError {
        let Some(r) = record else { return trap() };
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let file = text(r.file());
        PluginError::Panic {
            message: text(r.message()),
            location: (!file.is_empty()).then_some((file, r.line, r.column)),
            thread: Some((r.block, r.thread)),
            lost,
        }
    }
}

impl From<crate::host::pool::SpawnError> for PluginError {
    fn from(e: crate::host::pool::SpawnError) -> Self {
        PluginError::Launch {
            reason: e.to_string(),
        }
    }
}
