//! The GPU panic record: how a panic in region code on a GPU (and on gpu-sim) reaches the host with its message,
//! location, block and thread, although the trap that follows may leave the device's context unusable.
//!
//! The protocol. The plugin puts one [`PanicRecord`] per device in memory the host can read whatever happens to the
//! device (mapped pinned host memory on CUDA, a fine-grained system pool on HSA, plain host memory on gpu-sim), and
//! stores its device address in each loaded image's global [`SYMBOL`]. The first thread that panics claims the
//! record (`EMPTY` to `WRITING`), writes the fields, fences at system scope and publishes it (`WRITTEN`, release),
//! then traps; a thread that finds the record claimed waits a bounded time for it to be published (its trap could
//! otherwise end the kernel before the first thread's record is complete), then traps. When the launch fails the
//! plugin reads the record if it is `WRITTEN` (acquire) and resets it to `EMPTY` for the next launch. A launch that
//! traps without a written record (the record was never set, or the trap was not a panic) reports the driver's
//! error alone.

use core::fmt;
use core::sync::atomic::{fence, AtomicU32, Ordering};

/// The name of each image's global holding the record's device address (a pointer, null until the plugin sets it).
pub const SYMBOL: &str = "__offload_panic_record";

/// Room for the message; a longer one is cut at a character boundary.
pub const MESSAGE_CAP: usize = 1024;
/// Room for the file name of the panic's location.
pub const FILE_CAP: usize = 256;

/// [`PanicRecord::state`]'s values.
pub mod state {
    /// No thread has claimed the record: its state when new and after the host has taken it.
    pub const EMPTY: u32 = 0;
    /// A thread claimed the record and is writing it.
    pub const WRITING: u32 = 1;
    /// The record is complete.
    pub const WRITTEN: u32 = 2;
}

/// What the first panicking thread of a launch leaves for the host. Plain bytes and integers, the same layout on
/// every target (`#[repr(C)]`, no pointers), so the host reads what a GPU wrote.
#[repr(C)]
pub struct PanicRecord {
    /// A [`state`] value: who may write the record and whether the host may read it.
    pub state: AtomicU32,
    /// The panicking thread's block (team).
    pub block: u32,
    /// Its thread number in the block.
    pub thread: u32,
    /// The panic's line (0 without a location).
    pub line: u32,
    /// The panic's column (0 without a location).
    pub column: u32,
    /// Bytes of `message` written.
    pub message_len: u32,
    /// Bytes of `file` written.
    pub file_len: u32,
    /// The message, UTF-8, cut at a character boundary.
    pub message: [u8; MESSAGE_CAP],
    /// The location's file name, UTF-8, cut at a character boundary.
    pub file: [u8; FILE_CAP],
}

impl PanicRecord {
    /// An empty record.
    pub const fn new() -> Self {
        PanicRecord {
            state: AtomicU32::new(state::EMPTY),
            block: 0,
            thread: 0,
            line: 0,
            column: 0,
            message_len: 0,
            file_len: 0,
            message: [0; MESSAGE_CAP],
            file: [0; FILE_CAP],
        }
    }

    /// The message as written (its recorded length, within its buffer).
    pub fn message(&self) -> &[u8] {
        &self.message[..(self.message_len as usize).min(MESSAGE_CAP)]
    }

    /// The file name as written (its recorded length, within its buffer).
    pub fn file(&self) -> &[u8] {
        &self.file[..(self.file_len as usize).min(FILE_CAP)]
    }
}

impl Default for PanicRecord {
    fn default() -> Self {
        Self::new()
    }
}

/// Where a panic happened, for [`record`].
pub struct Site<'a> {
    /// The location's file name (empty without a location).
    pub file: &'a str,
    /// The location's line (0 without one).
    pub line: u32,
    /// The location's column (0 without one).
    pub column: u32,
    /// The thread's block (team).
    pub block: u32,
    /// The thread's number in its block.
    pub thread: u32,
}

/// Writes a panic into the record at `p` if this thread is the first to claim it; whether it was. Cold, and never
/// inlined, so a kernel's own code pays for none of it but the call.
///
/// # Safety
/// `p` is null (nothing is written) or the plugin's record, valid for writes, which only this protocol touches
/// while the launch runs.
#[cold]
#[inline(never)]
pub unsafe fn record(p: *mut PanicRecord, message: &dyn fmt::Display, site: &Site<'_>) -> bool {
    // SAFETY: forwarded.
    unsafe {
        record_with(p, site, |m| {
            let _ = fmt::write(m, format_args!("{message}"));
        })
    }
}

/// [`record`] for a message that is a string already: nothing is formatted, so GPU code that calls it links none of
/// `core::fmt`, whose formatting functions, address-taken, ptxas and the AMDGPU backend count against every kernel's
/// registers and stack, panicking or not.
///
/// # Safety
/// As [`record`].
#[cold]
#[inline(never)]
pub unsafe fn record_str(p: *mut PanicRecord, message: &str, site: &Site<'_>) -> bool {
    // SAFETY: forwarded.
    unsafe {
        record_with(p, site, |m| {
            let _ = fmt::Write::write_str(m, message);
        })
    }
}

/// The protocol's writer side, with the message written by `message`.
///
/// # Safety
/// As [`record`].
#[inline(always)]
unsafe fn record_with(
    p: *mut PanicRecord,
    site: &Site<'_>,
    message: impl FnOnce(&mut Cut),
) -> bool {
    if p.is_null() {
        return false;
    }
    // SAFETY: per the contract, `p` is a live record; its state is only accessed atomically.
    let state = unsafe { &(*p).state };
    if state
        .compare_exchange(
            state::EMPTY,
            state::WRITING,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_err()
    {
        return false;
    }
    // SAFETY: the claim makes this thread the record's only writer until it publishes, and the host reads the other
    // fields only after seeing `WRITTEN`. Fields are written through raw pointers: no reference to the whole record
    // (whose state other threads read) is made.
    unsafe {
        let mut m = Cut {
            buf: core::ptr::addr_of_mut!((*p).message).cast::<u8>(),
            cap: MESSAGE_CAP,
            len: 0,
        };
        message(&mut m);
        let mut f = Cut {
            buf: core::ptr::addr_of_mut!((*p).file).cast::<u8>(),
            cap: FILE_CAP,
            len: 0,
        };
        let _ = fmt::Write::write_str(&mut f, site.file);
        core::ptr::addr_of_mut!((*p).message_len).write(m.len as u32);
        core::ptr::addr_of_mut!((*p).file_len).write(f.len as u32);
        core::ptr::addr_of_mut!((*p).line).write(site.line);
        core::ptr::addr_of_mut!((*p).column).write(site.column);
        core::ptr::addr_of_mut!((*p).block).write(site.block);
        core::ptr::addr_of_mut!((*p).thread).write(site.thread);
    }
    // The fields must be visible to the host (system scope) before the state says so, even if the trap that follows
    // tears the context down.
    fence(Ordering::SeqCst);
    state.store(state::WRITTEN, Ordering::Release);
    true
}

/// A writer into a fixed buffer that keeps what fits, cut at a character boundary.
struct Cut {
    buf: *mut u8,
    cap: usize,
    len: usize,
}

impl fmt::Write for Cut {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(self.cap - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `buf` has `cap` bytes; `len + n <= cap`. `copy`, not `copy_nonoverlapping`: the latter's debug
        // check that the two do not overlap cannot be optimised away, and its panic would put a call back into the
        // panic handler (a cycle: unbounded stack on a GPU) on the panic path.
        unsafe { core::ptr::copy(s.as_ptr(), self.buf.add(self.len), n) };
        self.len += n;
        if n < s.len() {
            Err(fmt::Error)
        } else {
            Ok(())
        }
    }
}

/// Reads a written record and resets it for the next launch: (message, file, line, column, block, thread), or
/// `None` if no thread wrote it.
///
/// # Safety
/// `p` is a live record no kernel is writing any more (its launch has ended).
pub unsafe fn take(p: *mut PanicRecord) -> Option<Taken> {
    // SAFETY: per the contract.
    let r = unsafe { &*p };
    let written = r.state.load(Ordering::Acquire) == state::WRITTEN;
    let taken = written.then(|| Taken {
        message: copy(r.message()),
        message_len: r.message().len(),
        file: copy(r.file()),
        file_len: r.file().len(),
        line: r.line,
        column: r.column,
        block: r.block,
        thread: r.thread,
    });
    r.state.store(state::EMPTY, Ordering::Release);
    taken
}

/// A record's contents, copied out of the shared memory.
#[derive(Clone, Copy)]
pub struct Taken {
    message: [u8; MESSAGE_CAP],
    message_len: usize,
    file: [u8; FILE_CAP],
    file_len: usize,
    /// [`PanicRecord::line`].
    pub line: u32,
    /// [`PanicRecord::column`].
    pub column: u32,
    /// [`PanicRecord::block`].
    pub block: u32,
    /// [`PanicRecord::thread`].
    pub thread: u32,
}

impl Taken {
    /// The message as written.
    pub fn message(&self) -> &[u8] {
        &self.message[..self.message_len]
    }

    /// The file name as written.
    pub fn file(&self) -> &[u8] {
        &self.file[..self.file_len]
    }
}

fn copy<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut b = [0; N];
    b[..s.len()].copy_from_slice(s);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(block: u32, thread: u32) -> Site<'static> {
        Site {
            file: "src/lib.rs",
            line: 7,
            column: 9,
            block,
            thread,
        }
    }

    #[test]
    fn the_first_panic_is_recorded_and_taken_once() {
        let mut r = PanicRecord::new();
        let p = &mut r as *mut PanicRecord;
        // SAFETY: `p` is a live record.
        unsafe {
            assert!(record(p, &"index out of bounds", &site(3, 17)));
            assert!(!record(p, &"a later panic", &site(0, 0)));
            let t = take(p).expect("written");
            assert_eq!(t.message(), b"index out of bounds");
            assert_eq!(t.file(), b"src/lib.rs");
            assert_eq!((t.line, t.column, t.block, t.thread), (7, 9, 3, 17));
            assert!(take(p).is_none(), "taking resets the record");
            assert!(record(p, &"the next launch's", &site(1, 1)));
            assert_eq!(take(p).expect("written").message(), b"the next launch's");
            assert!(!record(core::ptr::null_mut(), &"no record", &site(0, 0)));
        }
    }

    #[test]
    fn a_string_message_is_recorded_as_a_formatted_one() {
        let mut r = PanicRecord::new();
        // SAFETY: a live record.
        unsafe {
            assert!(record_str(
                &mut r,
                "attempt to add with overflow",
                &site(2, 5)
            ));
            assert!(!record_str(&mut r, "later", &site(0, 0)));
            let t = take(&mut r).expect("written");
            assert_eq!(t.message(), b"attempt to add with overflow");
            assert_eq!((t.line, t.column, t.block, t.thread), (7, 9, 2, 5));
            let long = "é".repeat(MESSAGE_CAP);
            record_str(&mut r, &long, &site(0, 0));
            let t = take(&mut r).expect("written");
            assert_eq!(t.message().len(), MESSAGE_CAP);
            assert!(!record_str(core::ptr::null_mut(), "no record", &site(0, 0)));
        }
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        let mut r = PanicRecord::new();
        // 2-byte characters, so the cut falls inside one at an odd capacity.
        let long: &str = &"é".repeat(MESSAGE_CAP);
        let mut file = [b'a'; FILE_CAP + 5];
        file[FILE_CAP - 1..FILE_CAP + 1].copy_from_slice("é".as_bytes());
        let file = core::str::from_utf8(&file).unwrap();
        let s = Site { file, ..site(0, 0) };
        // SAFETY: a live record.
        let t = unsafe {
            record(&mut r, &format_args!("{long}"), &s);
            take(&mut r).expect("written")
        };
        assert_eq!(t.message().len(), MESSAGE_CAP);
        assert!(core::str::from_utf8(t.message()).is_ok());
        assert_eq!(
            t.file().len(),
            FILE_CAP - 1,
            "the cut character is left out"
        );
        assert!(core::str::from_utf8(t.file()).is_ok());
    }
}
