//! Region identity and device symbol names.
//!
//! A region is named by `crate_name::module::path::function`, the string `concat!(module_path!(), "::", name)` gives
//! in the host expansion and the outliner derives by walking the module tree. File and line would be fragile (insert a
//! line and host and device disagree), module paths are not.
//!
//! The device symbol is `__omp_offloading_rs_` followed by each path segment as `<len><text>` (Itanium style, so it
//! cannot collide and can be read back); bytes outside `[A-Za-z0-9_]` are written `$XX`, which PTX and ELF accept.
//! The functions are `const` so the host expansion can put the NUL-terminated name straight into its offload entry.

/// The tag that ties a package's offload entries to its device images: [`crate::hash::fnv1a`] of the package's
/// `CARGO_MANIFEST_DIR`, as the macro (in the entry's `data` field) and build support (in the image record) both see
/// it. Two versions of one crate share region names but never a manifest directory, so each finds only its own
/// kernels.
pub const fn package_tag(manifest_dir: &str) -> u64 {
    crate::hash::fnv1a(manifest_dir.as_bytes())
}

/// Prefix of every kernel symbol, after LLVM's `__omp_offloading_` kernels.
pub const SYMBOL_PREFIX: &str = "__omp_offloading_rs_";

const fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

const fn decimal_digits(mut n: usize) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Start of the next segment at or after `i`, skipping `::` and a raw-identifier `r#`.
const fn segment_start(p: &[u8], mut i: usize) -> usize {
    if i + 1 < p.len() && p[i] == b':' && p[i + 1] == b':' {
        i += 2;
    }
    if i + 1 < p.len() && p[i] == b'r' && p[i + 1] == b'#' {
        i += 2;
    }
    i
}

const fn segment_end(p: &[u8], mut i: usize) -> usize {
    while i < p.len() && !(p[i] == b':' && i + 1 < p.len() && p[i + 1] == b':') {
        i += 1;
    }
    i
}

const fn encoded_len(p: &[u8], start: usize, end: usize) -> usize {
    let mut n = 0;
    let mut i = start;
    while i < end {
        n += if plain(p[i]) { 1 } else { 3 };
        i += 1;
    }
    n
}

/// Length of the mangled symbol for `path`, without the terminating NUL.
pub const fn mangled_len(path: &str) -> usize {
    let p = path.as_bytes();
    let mut n = SYMBOL_PREFIX.len();
    let mut i = 0;
    while i < p.len() {
        let start = segment_start(p, i);
        let end = segment_end(p, start);
        let len = encoded_len(p, start, end);
        n += decimal_digits(len) + len;
        i = end;
    }
    n
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The mangled symbol for `path`, NUL-terminated; `N` must be `mangled_len(path) + 1`.
pub const fn mangle<const N: usize>(path: &str) -> [u8; N] {
    assert!(
        N == mangled_len(path) + 1,
        "mangle: N must be mangled_len(path) + 1"
    );
    let p = path.as_bytes();
    let mut out = [0u8; N];
    let mut o = 0;
    let pre = SYMBOL_PREFIX.as_bytes();
    while o < pre.len() {
        out[o] = pre[o];
        o += 1;
    }
    let mut i = 0;
    while i < p.len() {
        let start = segment_start(p, i);
        let end = segment_end(p, start);
        let len = encoded_len(p, start, end);
        let digits = decimal_digits(len);
        let mut d = 0;
        let mut rest = len;
        while d < digits {
            out[o + digits - 1 - d] = b'0' + (rest % 10) as u8;
            rest /= 10;
            d += 1;
        }
        o += digits;
        let mut j = start;
        while j < end {
            let b = p[j];
            if plain(b) {
                out[o] = b;
                o += 1;
            } else {
                out[o] = b'$';
                out[o + 1] = HEX[(b >> 4) as usize];
                out[o + 2] = HEX[(b & 15) as usize];
                o += 3;
            }
            j += 1;
        }
        i = end;
    }
    out
}

/// Writes the mangled symbol for `path` (without NUL) through `push`; the non-const twin of [`mangle`], for callers
/// that build strings at run time (build support, the runtime's diagnostics).
pub fn mangle_with(path: &str, mut push: impl FnMut(u8)) {
    let p = path.as_bytes();
    SYMBOL_PREFIX.bytes().for_each(&mut push);
    let mut i = 0;
    while i < p.len() {
        let start = segment_start(p, i);
        let end = segment_end(p, start);
        let len = encoded_len(p, start, end);
        let mut digits = [0u8; 20];
        let nd = decimal_digits(len);
        let mut rest = len;
        for d in (0..nd).rev() {
            digits[d] = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        digits[..nd].iter().copied().for_each(&mut push);
        for &b in &p[start..end] {
            if plain(b) {
                push(b);
            } else {
                push(b'$');
                push(HEX[(b >> 4) as usize]);
                push(HEX[(b & 15) as usize]);
            }
        }
        i = end;
    }
}

#[cfg(any(test, feature = "std"))]
/// The mangled symbol for `path` as a `String`.
pub fn mangle_string(path: &str) -> String {
    let mut s = String::with_capacity(mangled_len(path));
    mangle_with(path, |b| s.push(b as char));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn const_form<const N: usize>(path: &str) -> String {
        let bytes = mangle::<N>(path);
        assert_eq!(bytes[N - 1], 0);
        String::from_utf8(bytes[..N - 1].to_vec()).unwrap()
    }

    #[test]
    fn segments_are_length_prefixed() {
        assert_eq!(
            mangle_string("saxpy::saxpy"),
            "__omp_offloading_rs_5saxpy5saxpy"
        );
        assert_eq!(
            mangle_string("my_app::kernels::blas::axpy"),
            "__omp_offloading_rs_6my_app7kernels4blas4axpy"
        );
    }

    #[test]
    fn const_and_runtime_forms_agree() {
        const P: &str = "a_crate::m::r#type::long_name_of_twelve_chars";
        assert_eq!(const_form::<{ mangled_len(P) + 1 }>(P), mangle_string(P));
        assert_eq!(mangled_len(P), mangle_string(P).len());
    }

    #[test]
    fn raw_identifiers_and_non_ascii_are_escaped_unambiguously() {
        assert_eq!(mangle_string("c::r#match"), "__omp_offloading_rs_1c5match");
        // `é` is two UTF-8 bytes, each written `$XX`.
        assert_eq!(mangle_string("c::é"), "__omp_offloading_rs_1c6$C3$A9");
        // Different segmentations never collide.
        assert_ne!(mangle_string("ab::c"), mangle_string("a::bc"));
        assert_ne!(mangle_string("a1::b"), mangle_string("a::1b"));
    }

    #[test]
    fn ten_or_more_bytes_use_several_digits() {
        assert_eq!(
            mangle_string("k::abcdefghijk"),
            "__omp_offloading_rs_1k11abcdefghijk"
        );
    }
}
