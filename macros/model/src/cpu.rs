//! The x86-64 microarchitecture levels a host image can be built for (`host:x86-64-v3,x86-64`, like the `sm_XX` list
//! of an NVIDIA target): build support checks the names, the host-elf plugin loads the highest level this CPU runs.

/// The levels, lowest first, each with the CPU features it adds to the one before (the x86-64 psABI's lists, as
/// `is_x86_feature_detected!` spells them; `lahfsahf`, which v2 adds too, cannot be detected and every x86-64 CPU
/// since 2006 has).
pub const X86_64_LEVELS: [(&str, &[&str]); 4] = [
    ("x86-64", &[]),
    (
        "x86-64-v2",
        &["cmpxchg16b", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"],
    ),
    (
        "x86-64-v3",
        &[
            "avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave",
        ],
    ),
    (
        "x86-64-v4",
        &["avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"],
    ),
];

/// A level's rank (0 for the baseline) and every feature it needs, or `None` for a name that is not a level.
pub fn level(name: &str) -> Option<(usize, impl Iterator<Item = &'static str>)> {
    let rank = X86_64_LEVELS.iter().position(|(n, _)| *n == name)?;
    Some((
        rank,
        X86_64_LEVELS[..=rank]
            .iter()
            .flat_map(|(_, features)| features.iter().copied()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_accumulate() {
        let (rank, v3) = level("x86-64-v3").unwrap();
        let v3: Vec<_> = v3.collect();
        assert_eq!(rank, 2);
        assert!(v3.contains(&"sse4.2") && v3.contains(&"avx2") && !v3.contains(&"avx512f"));
        assert_eq!(level("x86-64").unwrap().1.count(), 0);
        assert!(level("znver3").is_none());
    }
}
