//! A device copy of one source file that keeps every kept item at its original line and column: the file is blanked
//! (newlines stay), kept ranges are copied back, and generated text is inserted without adding lines.

use proc_macro2::{LineColumn, Span};
use std::ops::Range;

pub struct Mirror<'a> {
    src: &'a str,
    out: Vec<u8>,
    inserts: Vec<(usize, String)>,
    line_starts: Vec<usize>,
}

impl<'a> Mirror<'a> {
    pub fn new(src: &'a str) -> Self {
        let out = src
            .bytes()
            .map(|b| if b == b'\n' { b'\n' } else { b' ' })
            .collect();
        let mut line_starts = vec![0];
        line_starts.extend(src.match_indices('\n').map(|(i, _)| i + 1));
        Mirror {
            src,
            out,
            inserts: Vec::new(),
            line_starts,
        }
    }

    /// Byte offset of a line (1-based) and column (characters, 0-based).
    pub fn offset(&self, lc: LineColumn) -> usize {
        let start = self
            .line_starts
            .get(lc.line.saturating_sub(1))
            .copied()
            .unwrap_or(self.src.len());
        self.src[start..]
            .char_indices()
            .nth(lc.column)
            .map_or(self.src.len(), |(i, _)| start + i)
    }

    pub fn range(&self, span: Span) -> Range<usize> {
        self.offset(span.start())..self.offset(span.end())
    }

    pub fn keep(&mut self, r: Range<usize>) {
        self.out[r.clone()].copy_from_slice(&self.src.as_bytes()[r]);
    }

    pub fn blank(&mut self, r: Range<usize>) {
        for (o, s) in self.out[r.clone()].iter_mut().zip(&self.src.as_bytes()[r]) {
            *o = if *s == b'\n' { b'\n' } else { b' ' };
        }
    }

    /// Inserts single-line text before byte `at`.
    pub fn insert(&mut self, at: usize, text: impl Into<String>) {
        let text = text.into();
        debug_assert!(!text.contains('\n'), "insertions must not add lines");
        self.inserts.push((at, text));
    }

    /// Replaces a range with single-line text, keeping the range's line breaks after it.
    pub fn replace(&mut self, r: Range<usize>, text: impl Into<String>) {
        self.blank(r.clone());
        self.insert(r.start, text);
    }

    /// Replaces a range with text that may span lines: `text(first, last)` gets the range's first position and last
    /// line, and must put the text's line breaks where the range has its own (so every later line stays put).
    pub fn replace_lines(
        &mut self,
        r: Range<usize>,
        text: impl FnOnce(LineColumn, usize) -> String,
    ) {
        let line_of = |at: usize| self.line_starts.partition_point(|&s| s <= at);
        let first = line_of(r.start);
        let column = self.src[self.line_starts[first - 1]..r.start]
            .chars()
            .count();
        let last = line_of(r.end.saturating_sub(1).max(r.start));
        let text = text(
            LineColumn {
                line: first,
                column,
            },
            last,
        );
        debug_assert_eq!(
            text.matches('\n').count(),
            self.src[r.clone()].matches('\n').count(),
            "a multi-line replacement keeps the range's line breaks"
        );
        for o in &mut self.out[r.clone()] {
            *o = b' ';
        }
        // The text starts at the range's own column.
        let text = text.trim_start_matches(' ').to_string();
        self.inserts.push((r.start, text));
    }

    /// The mirrored text, with `tail` (which may span lines) appended after the last line.
    pub fn finish(mut self, tail: &str) -> String {
        self.inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        for (at, text) in self.inserts {
            self.out.splice(at..at, text.into_bytes());
        }
        // Blanking and copying work on whole characters, so this is the text as is; were that ever broken, the
        // device build would report the damaged line rather than this build script panic.
        let mut s = String::from_utf8_lossy(&self.out).into_owned();
        if !tail.is_empty() {
            if !s.ends_with('\n') {
                s.push('\n');
            }
            s.push_str(tail);
        }
        s
    }
}
