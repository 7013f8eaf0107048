//! Printing from GPU region code (`offload::println!`): each line is formatted on the device, then appended whole to
//! a buffer in memory the host can read (the plugin's, pointed at by each image's global [`SYMBOL`]); the runtime
//! prints the buffer's lines after the launch, failed or not, and empties it. Lines from different threads never
//! interleave within a line: a line's room is reserved with one atomic add. A line is kept whole however long, as
//! CUDA's `printf` keeps one: one longer than the buffer's room is not printed, and counted as lost.
//!
//! The buffer: a [`Header`], then records of a `u32` length word, a `u32` room word and the line's bytes, padded to
//! 4 bytes ([`record_bytes`]). A writer reserves its record, writes the room and the bytes, then publishes the length
//! (with the top bit set, release); the reader stops at a record not yet published (a thread that trapped half-way).
//! Lines that do not fit are counted in `lost`.

use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The name of each image's global holding the buffer's device address (null until the plugin sets it: lines are
/// then dropped).
pub const SYMBOL: &str = "__offload_print_buffer";

/// The longest line formatted once, on the thread's stack; a longer one is formatted a second time, straight into
/// its room in the buffer (so its arguments' `Display` runs twice).
pub const SHORT_LINE: usize = 512;

/// Bytes of records a buffer holds, what the plugins allocate after the header.
pub const DATA_BYTES: usize = 1 << 20;

const PUBLISHED: u32 = 1 << 31;

/// The bytes a line of `len` bytes takes in the buffer: its length and room words, and the line padded to 4 bytes
/// (saturating: a line that long fits no buffer).
pub const fn record_bytes(len: usize) -> usize {
    8usize.saturating_add(len.saturating_add(3) & !3)
}

/// The start of a print buffer, in the memory the plugin allocated; the records follow it.
#[repr(C)]
pub struct Header {
    /// Bytes of records reserved since the last drain (may pass `cap` once full; [`print()`] shows why it cannot
    /// wrap).
    pub used: AtomicU64,
    /// Lines that did not fit since the last drain.
    pub lost: AtomicU64,
    /// Bytes of room for records after the header (less than 2^31: a record's length word keeps its top bit).
    pub cap: u32,
    /// Unused: pads the header to a multiple of 8 bytes.
    pub _reserved: u32,
}

/// Formats `args` (and a newline) and appends the line to the buffer at `p`, whole, or counts it in `lost` if it
/// does not fit.
///
/// # Safety
/// `p` is null (nothing happens) or a buffer of a [`Header`] and `cap` bytes after it, which only this protocol
/// touches while kernels run.
#[inline(never)]
pub unsafe fn print(p: *mut Header, args: fmt::Arguments<'_>, newline: bool) {
    if p.is_null() {
        return;
    }
    let mut line = Line {
        buf: [0; SHORT_LINE],
        len: 0,
    };
    let _ = fmt::write(&mut line, args);
    let len = line.len.saturating_add(newline as usize);
    let record = record_bytes(len) as u64;
    // SAFETY: per the contract; the header's words are only accessed atomically.
    let (used, lost, cap) = unsafe { (&(*p).used, &(*p).lost, (*p).cap.min(PUBLISHED - 1) as u64) };
    // `used` cannot wrap. It is reset by each drain, and between drains grows only by reservations this load found
    // room for. Those that fit total at most `cap`; one that does not leaves `used` past `cap` for every later load
    // of its own thread (coherence), so each thread makes at most one, of at most `cap` bytes. `used` thus stays
    // under `cap * (1 + threads run between two drains)`: under 2^64 with the 1 MiB buffer for fewer than 2^43
    // threads (a CUDA grid has at most 2^41, and each launch that printed is drained). `lost` grows by one per line:
    // 2^64 lines take centuries at any rate a device prints.
    let seen = used.load(Ordering::Relaxed);
    let at = if seen.saturating_add(record) > cap {
        None
    } else {
        let at = used.fetch_add(record, Ordering::Relaxed);
        (at.saturating_add(record) <= cap).then_some(at as usize)
    };
    let Some(at) = at else {
        lost.fetch_add(1, Ordering::Relaxed);
        return;
    };
    // SAFETY: `[at, at + record)` lies in the data and is this thread's alone (reserved above); the words are 4-byte
    // aligned (records are multiples of 4 after an 8-aligned header).
    unsafe {
        let rec = (p as *mut u8).add(core::mem::size_of::<Header>() + at);
        let text = rec.add(8);
        (rec.add(4) as *mut u32).write(len as u32);
        let mut written = if line.len <= SHORT_LINE {
            core::ptr::copy(line.buf.as_ptr(), text, line.len);
            line.len
        } else {
            // Formatted again into its room; a `Display` that writes more this time is cut there.
            let mut room = Room {
                text,
                room: line.len,
                len: 0,
            };
            let _ = fmt::write(&mut room, args);
            room.len
        };
        if newline {
            text.add(written).write(b'\n');
            written += 1;
        }
        let word = &*(rec as *const AtomicU32);
        word.store(written as u32 | PUBLISHED, Ordering::Release);
    }
}

/// A line being formatted on the stack: its length, and its bytes while they fit.
struct Line {
    buf: [u8; SHORT_LINE],
    len: usize,
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.saturating_add(s.len());
        if let Some(to) = self.buf.get_mut(self.len..end) {
            to.copy_from_slice(s.as_bytes());
        }
        self.len = end;
        Ok(())
    }
}

/// A long line being formatted into its reserved room: what fits, cut at a character boundary.
struct Room {
    text: *mut u8,
    room: usize,
    len: usize,
}

impl fmt::Write for Room {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(self.room - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `[text, text + room)` is the line's reserved room (`print`), and `len + n <= room`.
        unsafe { core::ptr::copy(s.as_ptr(), self.text.add(self.len), n) };
        self.len += n;
        Ok(())
    }
}

/// The lines a buffer holds, passed to `out` in the order their room was reserved, and how many were lost; empties
/// the buffer.
///
/// # Safety
/// `p` is a buffer as [`print()`] takes it, and no kernel writes it any more (its launch has ended).
pub unsafe fn drain(p: *mut Header, mut out: impl FnMut(&[u8])) -> u64 {
    // SAFETY: per the contract.
    let (used, lost, cap) = unsafe { (&(*p).used, &(*p).lost, (*p).cap.min(PUBLISHED - 1) as u64) };
    let end = used.load(Ordering::Acquire).min(cap) as usize;
    // SAFETY: the records lie in the data; each was published whole or ends the walk.
    unsafe {
        let data = (p as *mut u8).add(core::mem::size_of::<Header>());
        let mut at = 0;
        while at + 8 <= end {
            let w = (*(data.add(at) as *const AtomicU32)).load(Ordering::Acquire);
            if w & PUBLISHED == 0 {
                break;
            }
            // Written before the length word was published.
            let room = (data.add(at + 4) as *const u32).read() as usize;
            let len = ((w & !PUBLISHED) as usize).min(room).min(end - at - 8);
            out(core::slice::from_raw_parts(data.add(at + 8), len));
            at += record_bytes(room);
        }
        // Clears the words, of records after one that was never published too, for the next launch.
        core::ptr::write_bytes(data, 0, end);
    }
    used.store(0, Ordering::Relaxed);
    lost.swap(0, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::prelude::rust_2021::*;
    use std::vec;

    /// A buffer with `cap` bytes of room, as a plugin allocates one (`u64`s, for alignment).
    fn buffer(cap: usize) -> Vec<u64> {
        let mut b = vec![0u64; (core::mem::size_of::<Header>() + cap) / 8];
        // SAFETY: the vector starts with a header's room.
        unsafe { (*(b.as_mut_ptr() as *mut Header)).cap = cap as u32 };
        b
    }

    fn lines(p: *mut Header) -> (Vec<String>, u64) {
        let mut got = Vec::new();
        // SAFETY: no writer runs.
        let lost = unsafe { drain(p, |l| got.push(String::from_utf8_lossy(l).into_owned())) };
        (got, lost)
    }

    #[test]
    fn lines_come_out_whole_in_order_and_the_buffer_empties() {
        let mut b = buffer(256);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer at a time.
        unsafe {
            print(p, format_args!("x = {}", 3), true);
            print(p, format_args!("no newline"), false);
            print(p, format_args!("é{}", "ü"), true);
        }
        assert_eq!(
            lines(p),
            (
                vec!["x = 3\n".into(), "no newline".into(), "éü\n".into()],
                0
            )
        );
        assert_eq!(lines(p), (vec![], 0), "drained");
        // SAFETY: as above.
        unsafe { print(p, format_args!("again"), true) };
        assert_eq!(lines(p).0, ["again\n"]);
    }

    #[test]
    fn what_does_not_fit_is_counted() {
        let mut b = buffer(64);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer.
        unsafe {
            for i in 0..10 {
                print(p, format_args!("line {i}"), true);
            }
        }
        let (got, lost) = lines(p);
        assert_eq!(record_bytes("line 0\n".len()), 16);
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(lost, 6);
        // A line as long as the room fits; one byte more does not, however long it is.
        let mut b = buffer(4096);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: as above.
        unsafe {
            print(p, format_args!("{:x<4087}", ""), true);
            print(p, format_args!("{:x<4088}", ""), true);
            print(p, format_args!("{}", "x".repeat(1 << 20)), false);
        }
        let (got, lost) = lines(p);
        assert_eq!(
            (got.len(), got[0].len(), lost),
            (1, 4088, 2),
            "{:?}",
            got.iter().map(String::len).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_long_line_comes_out_whole_and_the_next_starts_on_its_own_line() {
        let mut b = buffer(8192);
        let p = b.as_mut_ptr() as *mut Header;
        let long = "ß".repeat(1000);
        // SAFETY: a live buffer, one writer.
        unsafe {
            print(p, format_args!("{long}"), true);
            print(p, format_args!("{:-<3000}|", "padded"), true);
            print(p, format_args!("next"), true);
        }
        let (got, lost) = lines(p);
        assert_eq!(
            got.concat().lines().collect::<Vec<_>>(),
            [
                long.as_str(),
                &format!("padded{}|", "-".repeat(2994)),
                "next"
            ]
        );
        assert_eq!(lost, 0);
    }

    /// Writes `a` `lens[i]` times on its `i`th call: a `Display` whose output changes between two formattings.
    struct Changing<'a> {
        lens: &'a [usize],
        calls: core::cell::Cell<usize>,
    }

    impl fmt::Display for Changing<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let i = self.calls.replace(self.calls.get() + 1);
            (0..self.lens[i]).try_for_each(|_| f.write_str("a"))
        }
    }

    #[test]
    fn a_long_line_formatted_differently_the_second_time_stays_in_its_room_and_ends_its_line() {
        let mut b = buffer(8192);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer.
        unsafe {
            for lens in [[600, 700], [700, 600]] {
                let changing = Changing {
                    lens: &lens,
                    calls: Default::default(),
                };
                print(p, format_args!("{changing}"), true);
                print(p, format_args!("next"), true);
            }
        }
        let (got, lost) = lines(p);
        let a600 = "a".repeat(600);
        assert_eq!(
            got.concat().lines().collect::<Vec<_>>(),
            [a600.as_str(), "next", &a600[..], "next"]
        );
        assert_eq!(lost, 0);
    }

    #[test]
    fn past_four_gib_of_reserved_room_lines_are_still_counted_and_printed_ones_untouched() {
        let mut b = buffer(256);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer; the counter is set as after about 8.4 million lines of 512 bytes that
        // did not fit.
        unsafe {
            print(p, format_args!("first"), true);
            (*p).used.store(((1u64 << 32) - 8) as _, Ordering::Relaxed);
            for i in 0..4 {
                print(p, format_args!("lost {i}"), true);
            }
        }
        assert_eq!(lines(p), (vec!["first\n".into()], 4));
        // Nor does a counter at the end of its range wrap.
        // SAFETY: as above.
        unsafe {
            (*p).used.store(u64::MAX - 4, Ordering::Relaxed);
            (*p).lost.store(u64::MAX - 4, Ordering::Relaxed);
            print(p, format_args!("lost"), true);
            assert_eq!((*p).used.load(Ordering::Relaxed), u64::MAX - 4);
        }
        assert_eq!(lines(p), (vec![], u64::MAX - 3));
    }

    #[test]
    fn the_lost_count_passes_four_billion() {
        let mut b = buffer(64);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer; the count is set as after `u32::MAX` lines that did not fit.
        unsafe {
            (*p).lost.store(u32::MAX as _, Ordering::Relaxed);
            print(p, format_args!("{:<100}", "too long"), true);
        }
        assert_eq!(lines(p), (vec![], 1 << 32));
    }

    #[test]
    fn an_unpublished_record_ends_the_drain() {
        let mut b = buffer(256);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer; the second record is reserved by hand and never published, as by a thread that
        // trapped.
        unsafe {
            print(p, format_args!("first"), true);
            (*p).used.fetch_add(12, Ordering::Relaxed);
            print(p, format_args!("after"), true);
        }
        assert_eq!(lines(p).0, ["first\n"]);
        assert_eq!(lines(p), (vec![], 0), "the buffer is clean again");
    }
}
