//! The host side of the device print buffer ([`offload_model::device_print`], `offload::println!`), for every GPU
//! plugin: a [`device_print::Header`] and [`device_print::DATA_BYTES`] of room in host memory a plugin allocated
//! ([`HostBlock`]), each loaded image's [`device_print::SYMBOL`] pointing at it, drained after each launch.

use super::host_block::{FirstReason, HostBlock, Protocol};
use offload_model::device_print;
use std::fmt::Display;
use std::ptr::NonNull;
use std::sync::{Mutex, RwLock};

/// The print buffer's block: its header and its room.
pub const PROTOCOL: Protocol = Protocol {
    symbol: device_print::SYMBOL,
    bytes: size_of::<device_print::Header>() + device_print::DATA_BYTES,
    align: align_of::<device_print::Header>(),
    init,
};

/// Sets up a fresh buffer: room for [`device_print::DATA_BYTES`] of lines.
///
/// # Safety
/// As [`Protocol::init`].
unsafe fn init(p: NonNull<u8>) {
    // SAFETY: per the contract, a zeroed header, aligned for it, unshared.
    unsafe { (*p.cast::<device_print::Header>().as_ptr()).cap = device_print::DATA_BYTES as u32 };
}

/// A GPU's print buffer, in the host memory `B` the plugin allocated for it, and why lines may be dropped (the
/// buffer, or an image's pointer to it, could not be set up: the first reason).
pub struct Prints<B> {
    pub block: B,
    unprinted: FirstReason,
    /// Drained by one caller at a time.
    draining: Mutex<()>,
}

impl<B> Prints<B> {
    pub fn new(block: B, unprinted: Option<String>) -> Prints<B> {
        Prints {
            block,
            unprinted: FirstReason::new(unprinted),
            draining: Mutex::new(()),
        }
    }

    /// Why lines region code prints may be dropped, if they may.
    pub fn unprinted(&self) -> Option<String> {
        self.unprinted.get()
    }

    /// Notes the first reason lines may be dropped.
    pub fn note_unprinted(&self, why: String) {
        self.unprinted.note(why)
    }

    /// Notes that an image's global could not point at the buffer (`e`: why not); the image still runs, and what
    /// it prints is dropped.
    pub fn note_unpointed(&self, e: impl Display) {
        self.note_unprinted(format!(
            "an image's print buffer could not be set ({e}): what its region code prints is dropped"
        ))
    }
}

impl<B> Prints<Option<B>> {
    /// The buffer the plugin allocated, or, where it could not (`Err`: why), none: lines are dropped, and the
    /// reason kept.
    pub fn open(block: Result<B, String>) -> Prints<Option<B>> {
        match block {
            Ok(block) => Prints::new(Some(block), None),
            Err(e) => Prints::new(
                None,
                Some(format!(
                    "no print buffer ({e}): what region code prints is dropped"
                )),
            ),
        }
    }
}

impl<B: HostBlock> Prints<B> {
    /// What the buffer holds, and how many lines did not fit; emptied once no launch runs, holding `running` alone.
    /// Only when something is there ([`Prints::pending`]): waiting for every running launch each time would keep
    /// launches from running side by side. No driver call: the buffer is host memory, readable whatever became of
    /// the device.
    ///
    /// # Safety
    /// Every launch whose kernel could write the buffer holds `running` shared until that kernel has ended or failed.
    pub unsafe fn drain(&self, running: &RwLock<()>) -> (Vec<u8>, u64) {
        if !self.pending() {
            return (Vec::new(), 0);
        }
        let _alone = running.write().unwrap_or_else(|p| p.into_inner());
        // SAFETY: per the contract, no kernel that could write the buffer runs while `running` is held alone.
        unsafe { self.take() }
    }

    /// Whether the buffer holds a line or counts a lost one: a look at its header's counters (atomics), safe while
    /// kernels write it.
    pub fn pending(&self) -> bool {
        let Some(buffer) = self.block.host_address() else {
            return false;
        };
        // SAFETY: a buffer as `device_print` lays it out, alive as long as the block; only its atomics are read.
        let header = unsafe { &*buffer.cast::<device_print::Header>().as_ptr() };
        header.used.load(std::sync::atomic::Ordering::Acquire) != 0
            || header.lost.load(std::sync::atomic::Ordering::Acquire) != 0
    }

    /// What the buffer holds, and how many lines did not fit; emptied. Nothing while there is no buffer.
    ///
    /// # Safety
    /// No kernel that could write the buffer runs (the launches that could have synchronised, or failed).
    pub unsafe fn take(&self) -> (Vec<u8>, u64) {
        let _one = self.draining.lock().unwrap_or_else(|p| p.into_inner());
        let Some(buffer) = self.block.host_address() else {
            return (Vec::new(), 0);
        };
        let mut out = Vec::new();
        // SAFETY: a buffer as `device_print` lays it out (set up by `init`), alive as long as the block; per the
        // contract no kernel writes it, and drains are serialised by the mutex.
        let lost =
            unsafe { device_print::drain(buffer.cast().as_ptr(), |l| out.extend_from_slice(l)) };
        (out, lost)
    }
}

#[cfg(test)]
mod tests {
    use super::super::host_block::PlainBlock;
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    fn header(prints: &Prints<PlainBlock>) -> *mut device_print::Header {
        prints.block.host_address().unwrap().cast().as_ptr()
    }

    /// Whether the buffer's records are all zero, as before any line.
    fn data_is_zero(prints: &Prints<PlainBlock>) -> bool {
        // SAFETY: the live buffer's data, which no one writes meanwhile.
        let data = unsafe {
            std::slice::from_raw_parts(header(prints).add(1).cast::<u8>(), device_print::DATA_BYTES)
        };
        data.iter().all(|&b| b == 0)
    }

    /// A line as region code prints it, into the buffer the images' global points at.
    fn print_line(prints: &Prints<PlainBlock>, line: std::fmt::Arguments<'_>) {
        // SAFETY: the live buffer; no drain runs meanwhile.
        unsafe { device_print::print(header(prints), line, true) };
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
    )]
    fn a_print_buffer_holds_a_header_and_a_mebibyte_with_the_room_in_its_header() {
        assert_eq!(PROTOCOL.bytes, 24 + (1 << 20));
        let prints = Prints::new(PlainBlock::new(&PROTOCOL), None);
        // SAFETY: the live header.
        let h = unsafe { &*header(&prints) };
        assert_eq!(h.cap as usize, device_print::DATA_BYTES);
        assert_eq!((h.used.load(Relaxed), h.lost.load(Relaxed)), (0, 0));
        assert!(data_is_zero(&prints));
        // SAFETY: no image points at the block.
        unsafe { prints.block.free(&PROTOCOL) };
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "a mebibyte print buffer: too slow under Miri (the protocol runs under Miri in offload-model)"
    )]
    fn what_kernels_print_is_taken_once_after_the_launch() {
        let prints = Prints::new(PlainBlock::new(&PROTOCOL), None);
        print_line(&prints, format_args!("team {} says {}", 3, "hello"));
        print_line(&prints, format_args!("team {} says {}", 4, "bye"));
        // SAFETY: no kernel runs.
        let (out, lost) = unsafe { prints.take() };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "team 3 says hello\nteam 4 says bye\n"
        );
        assert_eq!(lost, 0);
        // Emptied for the next launch.
        // SAFETY: as above.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        assert!(data_is_zero(&prints));
        // Lines past the buffer's room are counted, and the count is reset once taken; long ones are whole.
        let long = "x".repeat(999);
        let fits = device_print::DATA_BYTES / device_print::record_bytes(1000);
        for _ in 0..fits + 2 {
            print_line(&prints, format_args!("{long}"));
        }
        // SAFETY: as above.
        let (out, lost) = unsafe { prints.take() };
        assert_eq!(out, format!("{long}\n").repeat(fits).into_bytes());
        assert_eq!(lost, 2);
        // SAFETY: as above.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        // SAFETY: no image points at the block.
        unsafe { prints.block.free(&PROTOCOL) };
    }

    #[test]
    fn without_a_print_buffer_nothing_is_printed_and_the_first_reason_is_kept() {
        let prints = Prints::<Option<PlainBlock>>::open(Err("cuMemHostAlloc failed".into()));
        // SAFETY: there is no buffer.
        assert_eq!(unsafe { prints.take() }, (Vec::new(), 0));
        prints.note_unpointed("later");
        assert_eq!(
            prints.unprinted().as_deref(),
            Some("no print buffer (cuMemHostAlloc failed): what region code prints is dropped")
        );
        let prints = Prints::new(None::<PlainBlock>, None);
        assert_eq!(prints.unprinted(), None);
        prints.note_unprinted("first".into());
        prints.note_unprinted("second".into());
        assert_eq!(prints.unprinted().as_deref(), Some("first"));
    }
}
