//! The one hash every side uses where a value must be the same in another process, build or Rust version: package
//! tags (the macro and build support compute them apart), image ids, generated package names and cache keys.
//! FNV-1a (64 bits): `const`, `no_std`, and fixed by its definition, where std's `DefaultHasher` may change between
//! Rust releases (which would orphan caches and, worse, let a macro and a build script built by different compilers
//! disagree). Not for untrusted input: it is not collision resistant.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a of `bytes`, continuing from `h` (start from [`StableHasher::new`] or [`fnv1a`]).
const fn fnv1a_from(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(PRIME);
        i += 1;
    }
    h
}

/// FNV-1a of one byte string.
pub const fn fnv1a(bytes: &[u8]) -> u64 {
    fnv1a_from(OFFSET, bytes)
}

/// FNV-1a over several parts, each preceded by its length, so `["ab", "c"]` and `["a", "bc"]` differ.
#[derive(Clone, Copy, Debug)]
pub struct StableHasher(u64);

impl StableHasher {
    /// A hasher of no parts yet.
    pub const fn new() -> Self {
        StableHasher(OFFSET)
    }

    /// Adds `part`, length first.
    pub const fn write(self, part: &[u8]) -> Self {
        let len = (part.len() as u64).to_le_bytes();
        StableHasher(fnv1a_from(fnv1a_from(self.0, &len), part))
    }

    /// The hash of the parts written so far.
    pub const fn finish(self) -> u64 {
        self.0
    }
}

impl Default for StableHasher {
    fn default() -> Self {
        Self::new()
    }
}

/// [`StableHasher`] over `parts`.
pub fn hash_parts(parts: &[&[u8]]) -> u64 {
    parts
        .iter()
        .fold(StableHasher::new(), |h, p| h.write(p))
        .finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_has_its_published_values() {
        // From the FNV reference test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn parts_are_delimited() {
        assert_ne!(hash_parts(&[b"ab", b"c"]), hash_parts(&[b"a", b"bc"]));
        assert_ne!(hash_parts(&[b"", b"a"]), hash_parts(&[b"a"]));
        assert_eq!(hash_parts(&[b"x", b"y"]), hash_parts(&[b"x", b"y"]));
    }
}
