//! The table against a fake device whose memory is ordinary heap blocks; run under Miri too
//! (`cargo +nightly miri test -p omp-offload --lib present`).
use super::*;
use crate::device::fake::FakeDevice;

fn addr(v: &[u8]) -> usize {
    v.as_ptr() as usize
}

#[test]
fn copies_happen_only_on_first_entry_and_last_exit() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![1u8; 64];
    let r = Range::whole(host.as_mut_ptr() as usize, 64);
    unsafe {
        let tgt = t.enter(&obs, r, TO | FROM, RefKind::Structured).unwrap();
        assert_eq!(dev.ins(), 1);
        // Nested: present, no copy.
        assert_eq!(
            t.enter(&obs, r, TO | FROM, RefKind::Structured).unwrap(),
            tgt
        );
        assert_eq!(dev.ins(), 1);
        dev.write(tgt, &[9u8; 64]);
        t.exit(&obs, r.begin, 64, TO | FROM, RefKind::Structured, true)
            .unwrap();
        assert_eq!(dev.outs(), 0, "inner exit copies nothing");
        assert_eq!(host[0], 1);
        t.exit(&obs, r.begin, 64, TO | FROM, RefKind::Structured, true)
            .unwrap();
    }
    assert_eq!(dev.outs(), 1);
    assert!(host.iter().all(|&b| b == 9));
    assert_eq!((t.len(), dev.live()), (0, 0));
    host[0] = 0;
}

#[test]
fn always_forces_copies() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![3u8; 16];
    // From a mutable borrow: the `from` copy writes the host buffer (Tree Borrows rejects a write through a
    // pointer exposed from a shared one).
    let r = Range::whole(host.as_mut_ptr() as usize, 16);
    unsafe {
        t.enter(&obs, r, TO, RefKind::Dynamic).unwrap();
        t.enter(&obs, r, TO | ALWAYS, RefKind::Structured).unwrap();
        assert_eq!(dev.ins(), 2);
        t.exit(&obs, r.begin, 16, FROM | ALWAYS, RefKind::Structured, true)
            .unwrap();
        assert_eq!(
            dev.outs(),
            1,
            "always copies out though a reference remains"
        );
        assert_eq!(t.counts(r.begin), Some((0, 1)));
    }
}

#[test]
fn dynamic_and_structured_counts_keep_data_until_both_are_zero() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![0u8; 8];
    let r = Range::whole(host.as_mut_ptr() as usize, 8);
    unsafe {
        t.enter(&obs, r, TO, RefKind::Dynamic).unwrap();
        t.enter(&obs, r, TO, RefKind::Dynamic).unwrap();
        t.enter(&obs, r, TO, RefKind::Structured).unwrap();
        assert_eq!(t.counts(r.begin), Some((1, 2)));
        // release: one dynamic reference.
        t.exit(&obs, r.begin, 8, 0, RefKind::Dynamic, true).unwrap();
        assert_eq!(t.counts(r.begin), Some((1, 1)));
        t.exit(&obs, r.begin, 8, FROM, RefKind::Structured, true)
            .unwrap();
        assert_eq!(dev.outs(), 0);
        assert!(t.lookup(r.begin, 8).is_some());
        t.exit(&obs, r.begin, 8, FROM, RefKind::Dynamic, true)
            .unwrap();
        assert_eq!(dev.outs(), 1);
        assert!(t.lookup(r.begin, 8).is_none());
    }
    assert_eq!(dev.live(), 0);
}

#[test]
fn delete_removes_whatever_the_count() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host = vec![0u8; 8];
    let r = Range::whole(addr(&host), 8);
    unsafe {
        for _ in 0..3 {
            t.enter(&obs, r, TO, RefKind::Dynamic).unwrap();
        }
        t.enter(&obs, r, TO, RefKind::Structured).unwrap();
        t.exit(&obs, r.begin, 8, DELETE, RefKind::Dynamic, true)
            .unwrap();
        assert!(t.lookup(r.begin, 8).is_none());
        assert_eq!(dev.live(), 0);
        // The structured exit that follows finds nothing: a no-op.
        t.exit(&obs, r.begin, 8, FROM, RefKind::Structured, true)
            .unwrap();
        assert_eq!(dev.outs(), 0);
    }
}

#[test]
fn present_and_extension_are_errors_absent_exit_and_update_are_no_ops() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![0u8; 100];
    let a = host.as_mut_ptr() as usize;
    unsafe {
        let e = t
            .enter(&obs, Range::whole(a, 10), TO | PRESENT, RefKind::Structured)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("host address {a:#x}, 10 bytes")),
            "{e}"
        );
        t.enter(&obs, Range::whole(a + 10, 20), TO, RefKind::Structured)
            .unwrap();
        for (b, s) in [(a, 11), (a + 29, 2), (a, 100)] {
            assert!(matches!(
                t.enter(&obs, Range::whole(b, s), TO, RefKind::Structured),
                Err(MapError::Extends { .. })
            ));
        }
        // Inside: fine.
        t.enter(
            &obs,
            Range::whole(a + 12, 4),
            TO | PRESENT,
            RefKind::Structured,
        )
        .unwrap();
        t.exit(&obs, a + 50, 10, FROM, RefKind::Dynamic, true)
            .unwrap();
        t.update(&obs, a + 50, 10, FROM).unwrap();
        assert_eq!(dev.outs(), 0);
        assert!(t
            .exit(&obs, a + 50, 10, FROM | PRESENT, RefKind::Dynamic, true)
            .is_err());
    }
    host[0] = 1;
}

#[test]
fn sections_allocate_the_whole_slice_and_map_only_the_section() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host: Vec<u8> = (0..50).collect();
    let base = host.as_mut_ptr() as usize;
    let r = Range {
        begin: base + 10,
        size: 20,
        base,
        base_size: 50,
        align: 1,
    };
    unsafe {
        let tgt = t.enter(&obs, r, TO | FROM, RefKind::Structured).unwrap();
        assert_eq!(dev.read(tgt, 20), (10..30).collect::<Vec<u8>>());
        // The slice's device base is inside the same allocation: a region may form the whole slice.
        let dev_base = tgt - 10;
        assert_eq!(
            dev.read(dev_base, 50)[..10],
            [0u8; 10],
            "outside the section: unspecified (zero here)"
        );
        assert!(t.lookup(base, 1).is_none(), "only the section is present");
        assert!(t.lookup(base + 10, 20).is_some());
        dev.write(dev_base, &[7u8; 50]);
        t.exit(&obs, r.begin, 20, TO | FROM, RefKind::Structured, true)
            .unwrap();
    }
    assert_eq!(
        &host[..10],
        &(0..10).collect::<Vec<u8>>()[..],
        "only the section came back"
    );
    assert!(host[10..30].iter().all(|&b| b == 7));
    assert_eq!(&host[30..], &(30..50).collect::<Vec<u8>>()[..]);
    host[0] = 1;
}

#[test]
fn updates_copy_both_ways_while_mapped() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![1u8; 32];
    let r = Range::whole(host.as_mut_ptr() as usize, 32);
    unsafe {
        let tgt = t.enter(&obs, r, TO, RefKind::Structured).unwrap();
        host.iter_mut().for_each(|b| *b = 2);
        t.update(&obs, r.begin, 32, TO).unwrap();
        assert_eq!(dev.read(tgt, 32), vec![2u8; 32]);
        dev.write(tgt + 8, &[5u8; 8]);
        t.update(&obs, r.begin + 8, 8, FROM).unwrap();
        assert_eq!(host[7..17], [2, 5, 5, 5, 5, 5, 5, 5, 5, 2]);
    }
}

#[test]
fn associated_pointers_are_present_until_disassociated_and_never_freed() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host = vec![0u8; 16];
    let a = addr(&host);
    let mem = obs.alloc(16, 1).unwrap();
    t.associate(a, 16, mem).unwrap();
    unsafe {
        assert_eq!(
            t.enter(&obs, Range::whole(a, 16), TO, RefKind::Structured)
                .unwrap(),
            mem
        );
        t.exit(&obs, a, 16, FROM, RefKind::Structured, true)
            .unwrap();
        t.exit(&obs, a, 16, FROM, RefKind::Dynamic, true).unwrap();
    }
    assert_eq!(t.lookup(a, 16), Some(mem));
    assert!(t.disassociate(a + 1).is_err());
    t.disassociate(a).unwrap();
    assert!(t.lookup(a, 16).is_none());
    assert_eq!(dev.live(), 1, "the user's memory is not freed by the table");
}

#[test]
fn atomic_host_data_is_copied_element_by_element() {
    use offload_model::abi::map_type::HOST_ATOMIC_SHIFT;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host: Vec<AtomicU32> = (0..8).map(AtomicU32::new).collect();
    let bits = TO | FROM | (4 << HOST_ATOMIC_SHIFT);
    let r = Range::whole(host.as_ptr() as usize, 32);
    // Another thread updating the host atomics while they are copied is not a data race.
    std::thread::scope(|s| {
        s.spawn(|| host[7].fetch_add(100, Relaxed));
        unsafe {
            let tgt = t.enter(&obs, r, bits, RefKind::Structured).unwrap();
            dev.write(tgt, &5u32.to_ne_bytes());
        }
    });
    unsafe {
        t.exit(&obs, r.begin, 32, bits, RefKind::Structured, true)
            .unwrap()
    };
    assert_eq!(host[0].load(Relaxed), 5);
    assert_eq!(host[1].load(Relaxed), 1);
}

#[test]
fn a_pinned_allocation_outlives_its_entry_until_the_last_unpin() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host = vec![4u8; 32];
    let whole = Range::whole(addr(&host), 32);
    let empty = Range { size: 0, ..whole };
    unsafe {
        let tgt = t.enter(&obs, whole, TO, RefKind::Structured).unwrap();
        let (base, alloc) = t
            .pin_slice(&obs, empty, TO)
            .unwrap()
            .expect("the slice is present");
        assert_eq!((base, alloc), (tgt, Some(tgt)));
        t.exit(&obs, whole.begin, 32, 0, RefKind::Structured, true)
            .unwrap();
        assert!(
            t.lookup(whole.begin, 32).is_none(),
            "the entry follows OpenMP's counts"
        );
        assert_eq!(dev.live(), 1, "the pinned block is still there");
        assert_eq!(dev.read(base, 32), vec![4u8; 32]);
        // A new mapping of the same data is a new block; the pinned one goes with its last pin.
        let again = t.enter(&obs, whole, TO, RefKind::Structured).unwrap();
        assert_ne!(again, tgt);
        t.unpin(&obs, tgt);
        assert_eq!(dev.live(), 1);
        t.exit(&obs, whole.begin, 32, 0, RefKind::Structured, true)
            .unwrap();
    }
    assert_eq!((t.len(), dev.live()), (0, 0));
    assert!(!t.intersects(whole.begin, whole.begin + 32));
}

#[test]
fn intersection_finds_any_overlap() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host = vec![0u8; 100];
    let a = addr(&host);
    unsafe { t.enter(&obs, Range::whole(a + 10, 20), TO, RefKind::Structured) }.unwrap();
    assert!(t.intersects(a, a + 11));
    assert!(t.intersects(a + 29, a + 100));
    assert!(t.intersects(a + 15, a + 16));
    assert!(!t.intersects(a, a + 10));
    assert!(!t.intersects(a + 30, a + 100));
    unsafe { t.exit(&obs, a + 10, 20, 0, RefKind::Structured, true) }.unwrap();
}

#[test]
fn copies_into_a_device_copy_a_running_region_uses_are_refused() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![1u8; 16];
    let r = Range::whole(host.as_mut_ptr() as usize, 16);
    unsafe {
        t.enter(&obs, r, TO | FROM, RefKind::Structured).unwrap();
        // A region reads it (`to`): updates to the device and `always, to` maps are refused, reads are not.
        t.enter(&obs, r, TO, RefKind::Region).unwrap();
        let ins = dev.ins();
        assert!(matches!(
            t.update(&obs, r.begin, 16, TO),
            Err(MapError::InUse { regions: 1, .. })
        ));
        let e = t
            .enter(&obs, r, TO | ALWAYS, RefKind::Structured)
            .unwrap_err();
        assert!(e.to_string().contains("1 running region(s)"), "{e}");
        assert_eq!(dev.ins(), ins, "nothing was copied");
        assert_eq!(
            t.counts(r.begin),
            Some((2, 0)),
            "the refused map took no reference"
        );
        t.update(&obs, r.begin, 16, FROM).unwrap();
        t.exit(&obs, r.begin, 16, TO, RefKind::Region, true)
            .unwrap();
        // The region is over: both copy again.
        t.update(&obs, r.begin, 16, TO).unwrap();
        t.enter(&obs, r, TO | ALWAYS, RefKind::Structured).unwrap();
        t.exit(&obs, r.begin, 16, TO, RefKind::Structured, true)
            .unwrap();
        // A region that writes it: reading the device copy under it is refused too.
        t.enter(&obs, r, TO | FROM, RefKind::Region).unwrap();
        assert!(matches!(
            t.update(&obs, r.begin, 16, FROM),
            Err(MapError::InUse { .. })
        ));
        t.exit(&obs, r.begin, 16, TO | FROM, RefKind::Region, true)
            .unwrap();
        t.update(&obs, r.begin, 16, FROM).unwrap();
        t.exit(&obs, r.begin, 16, TO | FROM, RefKind::Structured, true)
            .unwrap();
    }
    assert_eq!((t.len(), dev.live()), (0, 0));
    host[0] = 0;
}

// A pipeline maps a buffer once and runs one task per part: a region on one part leaves the other parts free to
// copy, while the part it can reach stays refused.
#[test]
fn a_region_on_one_part_of_a_mapping_leaves_the_others_free_to_copy() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![1u8; 32];
    let a = host.as_mut_ptr() as usize;
    unsafe {
        t.enter(&obs, Range::whole(a, 32), 0, RefKind::Structured)
            .unwrap();
        // A region writing the first half, handed that half as its slice.
        let first = Range::whole(a, 16);
        t.enter(&obs, first, TO | FROM, RefKind::Region).unwrap();
        t.update(&obs, a + 16, 16, TO).unwrap();
        t.update(&obs, a + 16, 16, FROM).unwrap();
        assert!(matches!(
            t.update(&obs, a + 8, 16, TO),
            Err(MapError::InUse { regions: 1, .. })
        ));
        assert!(matches!(
            t.update(&obs, a, 4, FROM),
            Err(MapError::InUse { regions: 1, .. })
        ));
        // A section of the whole slice reaches the whole slice: the second half is refused under it.
        let section = Range {
            begin: a,
            size: 4,
            base: a,
            base_size: 32,
            align: 1,
        };
        t.enter(&obs, section, TO, RefKind::Region).unwrap();
        assert!(matches!(
            t.update(&obs, a + 16, 16, TO),
            Err(MapError::InUse { regions: 1, .. })
        ));
        t.exit(&obs, a, 4, TO, RefKind::Region, true).unwrap();
        t.exit(&obs, a, 16, TO | FROM, RefKind::Region, true)
            .unwrap();
        t.update(&obs, a, 32, TO).unwrap();
        t.exit(&obs, a, 32, 0, RefKind::Structured, true).unwrap();
    }
}

#[test]
fn a_pinned_region_uses_the_device_copy_too() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let host = vec![4u8; 32];
    let whole = Range::whole(addr(&host), 32);
    unsafe {
        let tgt = t.enter(&obs, whole, TO, RefKind::Structured).unwrap();
        let (_, alloc) = t
            .pin_slice(&obs, Range { size: 0, ..whole }, TO | FROM)
            .unwrap()
            .expect("present");
        assert_eq!(
            t.device_newer(whole.begin),
            Some(true),
            "the region may write it"
        );
        assert!(matches!(
            t.update(&obs, whole.begin, 32, TO),
            Err(MapError::InUse { .. })
        ));
        t.unpin(&obs, alloc.expect("an allocation"));
        t.update(&obs, whole.begin, 32, TO).unwrap();
        assert_eq!(t.device_newer(whole.begin), Some(false), "the host's again");
        assert_eq!(dev.read(tgt, 1), [4]);
        t.exit(&obs, whole.begin, 32, 0, RefKind::Structured, true)
            .unwrap();
    }
    assert_eq!((t.len(), dev.live()), (0, 0));
}

/// The host range of a copy that may be newer than the host's over some of `[begin, end)`, on any device.
fn newer(t: &MappingTable, begin: usize, end: usize) -> Option<(usize, usize)> {
    t.directory()
        .newer(None, begin, end)
        .map(|h| (h.begin, h.end))
}

#[test]
fn a_writing_region_makes_the_device_copy_newer_until_it_is_brought_back() {
    let dev = FakeDevice::default();
    let obs = dev.observed();
    let mut t = MappingTable::default();
    let mut host = vec![0u8; 100];
    let a = host.as_mut_ptr() as usize;
    let section = Range {
        begin: a + 10,
        size: 20,
        base: a,
        base_size: 100,
        align: 1,
    };
    unsafe {
        t.enter(&obs, section, TO | FROM, RefKind::Structured)
            .unwrap();
        // Regions that only read it leave the host copy current.
        t.enter(&obs, section, TO, RefKind::Region).unwrap();
        t.exit(&obs, section.begin, 20, TO, RefKind::Region, true)
            .unwrap();
        assert_eq!(newer(&t, a, a + 100), None);
        // One that may write it does not (`alloc`, `from`, `tofrom`, a `to` of a `&mut`, alike).
        for bits in [0, FROM, TO | FROM, TO | DEVICE_WRITES] {
            t.enter(&obs, section, bits, RefKind::Region).unwrap();
            assert_eq!(newer(&t, a, a + 100), Some((a + 10, a + 30)));
            assert_eq!(newer(&t, a + 29, a + 31), Some((a + 10, a + 30)));
            assert_eq!(newer(&t, a, a + 10), None);
            assert_eq!(newer(&t, a + 30, a + 100), None);
            t.exit(&obs, section.begin, 20, bits, RefKind::Region, true)
                .unwrap();
            assert_eq!(t.device_newer(a + 10), Some(true));
            // A part brought back leaves the rest newer; the whole makes both copies equal.
            t.update(&obs, a + 10, 5, FROM).unwrap();
            assert_eq!(t.device_newer(a + 10), Some(true));
            t.update(&obs, a + 10, 20, FROM).unwrap();
            assert_eq!(t.device_newer(a + 10), Some(false));
        }
        t.exit(
            &obs,
            section.begin,
            20,
            TO | FROM,
            RefKind::Structured,
            true,
        )
        .unwrap();
    }
    assert_eq!((t.len(), dev.live()), (0, 0));
    host[0] = 1;
}
