//! Attacks on the coherence directory from an adversarial review: safe programs, written as outside users write
//! them, that lost an update or computed on a stale copy and returned `Ok` (sections of one slice on two devices, a
//! zero-length section over a stale or another device's newer copy, an exit under `OFFLOAD_RUNTIME=llvm` copying a
//! stale copy back). Each failed before its fix.

use offload::{omp_get_num_devices, target, target_data, Error};
use offload_tests::{on_two_devices, rerun_self, with_device};

#[target]
fn set_all(y: &mut [u32], v: u32) {
    for e in y.iter_mut() {
        *e = v;
    }
}

#[target]
fn add_one(y: &mut [u32]) {
    for e in y.iter_mut() {
        *e += 1;
    }
}

#[target(if(cond))]
fn add_one_if(y: &mut [u32], cond: bool) {
    for e in y.iter_mut() {
        *e += 1;
    }
}

/// Adds one to `y[lo..hi]`, the section it maps.
#[target(map(tofrom: y[lo..hi]))]
fn add_one_part(y: &mut [u32], lo: usize, hi: usize) {
    for e in &mut y[lo..hi] {
        *e += 1;
    }
}

/// Sums the present copy of `x` (a zero-length section: the region runs on the present copy).
#[target(map(to: x[0..0]))]
fn sum_present(x: &[u32]) -> u64 {
    x.iter().map(|&v| v as u64).sum()
}

/// Adds one to every element of the present copy of `x` (a zero-length section).
#[target(map(tofrom: x[0..0]))]
fn add_one_present(x: &mut [u32]) {
    for e in x.iter_mut() {
        *e += 1;
    }
}

fn on_device() -> bool {
    omp_get_num_devices() > 0
}

/// Reruns test `name` with `set` when this process does not have them yet: `true` means the
/// caller returns (the child ran it).
fn rerun_with(name: &str, set: &[(&str, &str)]) -> bool {
    if set
        .iter()
        .all(|(k, v)| std::env::var(k).as_deref() == Ok(*v))
    {
        return false;
    }
    let out = rerun_self(
        &[name, "--exact", "--nocapture", "--include-ignored"],
        &[],
        set,
    );
    assert!(
        out.status.success(),
        "{name} with {set:?}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

// Hole 1 (present.rs `MappingTable::enter` + `Directory::device_writes`): a section region's copy is checked against
// newer copies elsewhere only over its *section* (`newer_elsewhere(r.begin, r.begin + r.size)`), but its writes mark
// every other device's copy stale over its whole *slice* (`device_writes(.., reach(&r))`). Device 0 holds
// `y[8..16]` newer; a region on device 1 over `y[0..8]` (disjoint bytes) marks device 0's copy stale there, so
// device 0's exit skips it and its writes never reach the host.
#[test]
fn r1_a_section_on_one_device_never_discards_another_devices_section() {
    if on_two_devices("r1_a_section_on_one_device_never_discards_another_devices_section") {
        return;
    }
    if omp_get_num_devices() < 2 {
        eprintln!("skipped: needs two devices");
        return;
    }
    let mut y = vec![0u32; 16];
    target_data!(map(tofrom: y[8..16]), device(0) => {
        with_device(0, || add_one_part(y, 8, 16));
        with_device(1, || add_one_part(y, 0, 8));
    });
    assert_eq!(y, [1; 16], "both sections' updates reach the host");
}

// The same with the region on device 0 entering the present section and device 1 holding the newer section: the
// region's writes mark device 1's copy stale outside the region's section.
#[test]
fn r1b_a_present_section_region_never_discards_another_devices_section() {
    if on_two_devices("r1b_a_present_section_region_never_discards_another_devices_section") {
        return;
    }
    if omp_get_num_devices() < 2 {
        eprintln!("skipped: needs two devices");
        return;
    }
    let mut y = vec![0u32; 16];
    target_data!(map(tofrom: y[8..16]), device(1) => {
        with_device(1, || add_one_part(y, 8, 16));
        target_data!(map(tofrom: y[0..8]), device(0) => {
            with_device(0, || add_one_part(y, 0, 8));
        });
    });
    assert_eq!(y, [1; 16], "both sections' updates reach the host");
}

// Hole 2 (present.rs `MappingTable::pin_slice`): a zero-length section of present data runs on the present copy
// without refreshing its stale parts. The host fallback (`if(false)`) wrote `y` (2s), which marks device 0's copy
// stale; the zero-length-section region then sums device 0's old 1s and returns `Ok(16)`.
#[test]
fn r2_a_zero_length_section_never_computes_on_a_stale_copy() {
    if !on_device() {
        return;
    }
    let mut y = vec![1u32; 16];
    target_data!(map(tofrom: y), device(0) => {
        try_add_one_if(y, false).expect("the host is current");
        match try_sum_present(y) {
            Ok(s) => assert_eq!(s, 32, "summed the stale device copy"),
            Err(e) => assert!(e.to_string().contains("stale"), "{e}"),
        }
    });
    assert_eq!(y, [2; 16]);
}

// Hole 3 (present.rs `MappingTable::pin_slice`): a zero-length section is never checked against a newer copy on
// another device, and its writes make its own (stale) copy newer and the other device's stale. Device 1 set `y` to
// 5; a region on device 0 over `y[0..0]` adds one to device 0's old 0s and returns `Ok`; device 1's exit then skips
// its copy (stale), and device 0 skips its own stale parts too: `y` ends as 0s, both updates lost (sequential
// Rust: 6, or a refusal: 5).
#[test]
fn r3_a_zero_length_section_never_overrides_a_newer_copy_elsewhere() {
    if on_two_devices("r3_a_zero_length_section_never_overrides_a_newer_copy_elsewhere") {
        return;
    }
    if omp_get_num_devices() < 2 {
        eprintln!("skipped: needs two devices");
        return;
    }
    let mut y = vec![0u32; 16];
    let mut refused = false;
    target_data!(map(tofrom: y), device(0) => {
        target_data!(map(tofrom: y), device(1) => {
            with_device(1, || set_all(y, 5));
            match with_device(0, || try_add_one_present(y)) {
                Ok(()) => {}
                Err(e) => {
                    assert!(e.to_string().contains("device 1"), "{e}");
                    refused = true;
                }
            }
        });
    });
    assert_eq!(
        y,
        if refused { [5; 16] } else { [6; 16] },
        "device 1's update is lost"
    );
}

// Hole 4 (on_llvm.rs `exit`): under OFFLOAD_RUNTIME=llvm a data construct's exit whose stale parts cannot be refreshed
// (another device holds them newer) still lets libomptarget copy its whole copy back, stale parts included: the
// host fallback's update of `y` (1s) is overwritten with device 0's old 0s. Under our runtime the exit skips the
// stale parts and `y` stays 1s (device 1's writes are discarded by its `release`, as the user asked).
#[test]
fn r4_an_llvm_exit_never_copies_a_stale_part_back() {
    let llvm = std::env::var("OFFLOAD_RUNTIME").as_deref() == Ok("llvm");
    if on_two_devices("r4_an_llvm_exit_never_copies_a_stale_part_back") {
        return;
    }
    if omp_get_num_devices() < 2 {
        eprintln!("skipped: needs two devices");
        return;
    }
    if llvm && !matches!(offload::__private::llvm::active(), Some(Ok(_))) {
        eprintln!("skipped: no libomptarget");
        return;
    }
    let v0 = vec![0u32; 16];
    let mut m = offload::target_enter_data!(map(to: v0), device(1));
    target_data!(map(tofrom: m), device(0) => {
        try_add_one_if(m, false).expect("no device copy is newer: the fallback runs");
        with_device(1, || add_one(m));
    });
    // Device 1's writes are discarded (`release`): the current data is the fallback's.
    let v = offload::target_exit_data!(map(release: m));
    assert_eq!(
        v, [1; 16],
        "device 0's stale copy went back over the fallback's update"
    );
}

/// Runs r4 again under OFFLOAD_RUNTIME=llvm (libomptarget's host plugin has several devices).
#[test]
fn r4_llvm() {
    if std::env::var_os("OFFLOAD_RUNTIME").is_some() {
        return;
    }
    assert!(rerun_with(
        "r4_an_llvm_exit_never_copies_a_stale_part_back",
        &[("OFFLOAD_RUNTIME", "llvm")]
    ));
}

#[allow(dead_code)]
fn _uses(_: Error) {}
