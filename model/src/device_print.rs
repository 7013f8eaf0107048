//! Printing from GPU region code (`offload::println!`): each line is formatted on the device, then appended whole to
//! a buffer in memory the host can read (the plugin's, pointed at by each image's global [`SYMBOL`]); the runtime
//! prints the buffer's lines after the launch, failed or not, and empties it. Lines from different threads never
//! interleave within a line: a line's room is reserved with one atomic add.
//!
//! The buffer: a [`Header`], then records of a `u32` length word and the line's bytes, padded to 4 bytes. A writer
//! reserves its record, writes the bytes, then publishes the length (with the top bit set, release); the reader stops
//! at a record not yet published (a thread that trapped half-way). Lines that do not fit are counted in `lost`.

use core::fmt;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The name of each image's global holding the buffer's device address (null until the plugin sets it: lines are
/// then dropped).
pub const SYMBOL: &str = "__offload_print_buffer";

/// The longest line a device prints; longer ones are cut at a character boundary.
pub const LINE_CAP: usize = 512;

/// Bytes of records a buffer holds, what the plugins allocate after the header.
pub const DATA_BYTES: usize = 1 << 20;

const PUBLISHED: u32 = 1 << 31;

/// The start of a print buffer, in the memory the plugin allocated; the records follow it.
#[repr(C)]
pub struct Header {
    /// Bytes of records reserved since the last drain (may pass `cap` once full; [`print()`] shows why it cannot
    /// wrap).
    pub used: AtomicU64,
    /// Lines that did not fit since the last drain.
    pub lost: AtomicU64,
    /// Bytes of room for records after the header.
    pub cap: u32,
    /// Unused: pads the header to a multiple of 8 bytes.
    pub _reserved: u32,
}

/// Formats `args` (and a newline) and appends the line to the buffer at `p`.
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
        buf: [0; LINE_CAP],
        len: 0,
    };
    let _ = fmt::write(&mut line, args);
    if newline {
        let _ = fmt::Write::write_str(&mut line, "\n");
    }
    let len = line.len;
    let record = (4 + len.next_multiple_of(4)) as u64;
    // SAFETY: per the contract; the header's words are only accessed atomically.
    let (used, lost, cap) = unsafe { (&(*p).used, &(*p).lost, (*p).cap as u64) };
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
    // SAFETY: `[at, at + record)` lies in the data and is this thread's alone (reserved above); the length word is
    // 4-byte aligned (records are multiples of 4 after an 8-aligned header).
    unsafe {
        let data = (p as *mut u8).add(core::mem::size_of::<Header>());
        core::ptr::copy(line.buf.as_ptr(), data.add(at + 4), len);
        let word = &*(data.add(at) as *const AtomicU32);
        word.store(len as u32 | PUBLISHED, Ordering::Release);
    }
}

/// A line being formatted: what fits, cut at a character boundary.
struct Line {
    buf: [u8; LINE_CAP],
    len: usize,
}

impl fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(LINE_CAP - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
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
    let (used, lost, cap) = unsafe { (&(*p).used, &(*p).lost, (*p).cap as u64) };
    let end = used.load(Ordering::Acquire).min(cap) as usize;
    // SAFETY: the records lie in the data; each was published whole or is skipped.
    unsafe {
        let data = (p as *mut u8).add(core::mem::size_of::<Header>());
        let mut at = 0;
        while at + 4 <= end {
            let word = &*(data.add(at) as *const AtomicU32);
            let w = word.load(Ordering::Acquire);
            if w & PUBLISHED == 0 {
                break;
            }
            let len = (w & !PUBLISHED) as usize;
            out(core::slice::from_raw_parts(
                data.add(at + 4),
                len.min(end - at - 4),
            ));
            word.store(0, Ordering::Relaxed);
            at += 4 + len.next_multiple_of(4);
        }
        // Records after one that was never published: clear their words for the next launch.
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
    fn what_does_not_fit_is_counted_and_long_lines_are_cut() {
        let mut b = buffer(64);
        let p = b.as_mut_ptr() as *mut Header;
        // SAFETY: a live buffer, one writer.
        unsafe {
            for i in 0..10 {
                print(p, format_args!("line {i}"), true);
            }
        }
        let (got, lost) = lines(p);
        assert_eq!(got.len(), 5, "{got:?}");
        assert_eq!(lost, 5);
        let mut b = buffer(4096);
        let p = b.as_mut_ptr() as *mut Header;
        let long = "ß".repeat(LINE_CAP);
        // SAFETY: as above.
        unsafe { print(p, format_args!("{long}"), true) };
        let (got, _) = lines(p);
        assert!(
            got[0].len() <= LINE_CAP && got[0].chars().all(|c| c == 'ß'),
            "{}",
            got[0].len()
        );
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
