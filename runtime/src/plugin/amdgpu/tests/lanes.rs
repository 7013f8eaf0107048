//! Host threads using one GPU at once: each launches on a queue of its own and copies through a staging
//! buffer of its own, so their dispatches and copies are in flight together. The fake holds the first until the
//! second has started (`together`): on one queue, or through one staging buffer, the second would wait for the
//! first, which would give up waiting for it (`apart`).

use super::fixtures::*;
use super::*;

/// The calls of `trace` that start with `call`.
fn calls<'a>(trace: &'a [String], call: &str) -> Vec<&'a str> {
    trace
        .iter()
        .filter(|l| l.starts_with(call))
        .map(String::as_str)
        .collect()
}

/// `trace`, sorted: the calls of threads running at once, whose order is theirs.
fn sorted(mut trace: Vec<String>) -> Vec<String> {
    trace.sort();
    trace
}

#[test]
fn threads_launching_at_once_each_dispatch_on_a_queue_of_their_own() {
    let d = device(Config::new(0x2023));
    let k = saxpy(&*d);
    let machine = shared();
    together(2);
    std::thread::scope(|s| {
        for i in 0..2 {
            let (d, machine) = (&d, &machine);
            s.spawn(move || {
                machine.use_here();
                // SAFETY: the fake runs no code.
                unsafe { d.launch(k, &KernelArgs::from(&[Arg::new(i)][..]), params(1, 1, 0)) }
                    .unwrap();
            });
        }
    });
    assert_eq!(apart(), 0, "the two dispatches were not in flight together");
    let sent = dispatched();
    assert_eq!(sent.len(), 2);
    let mut queues: Vec<usize> = sent.iter().map(|d| d.queue).collect();
    queues.sort();
    assert_eq!(queues, [0, 1]);
    // Each with its own completion signal and kernel-argument block.
    assert_ne!(
        sent[0].packet.completion_signal,
        sent[1].packet.completion_signal
    );
    assert_ne!(
        sent[0].packet.kernarg_address,
        sent[1].packet.kernarg_address
    );
    // The second queue (and its signal) is made when the second launch finds the first busy.
    let trace = take_trace();
    assert_eq!(
        calls(&trace, "hsa_queue_create"),
        [
            "hsa_queue_create(gpu, 1024 packets, type 0, callback set, 0xffffffff, 0xffffffff) -> q1"
        ]
    );
    assert_eq!(
        calls(&trace, "hsa_signal_create"),
        ["hsa_signal_create(0, 0 consumers) -> s3"]
    );
    // And kept: a later launch takes an idle lane.
    // SAFETY: as above.
    unsafe { d.launch(k, &KernelArgs::default(), params(1, 1, 0)) }.unwrap();
    let trace = take_trace();
    assert!(calls(&trace, "hsa_queue_create").is_empty(), "{trace:#?}");
    assert!(calls(&trace, "hsa_signal_create").is_empty(), "{trace:#?}");
    drop(d);
    // Each lane: its signal, its kernel-argument buffer, then its queue.
    let trace = take_trace();
    assert!(trace[2].starts_with("hsa_queue_destroy"), "{trace:#?}");
    assert!(trace[5].starts_with("hsa_queue_destroy"), "{trace:#?}");
    assert_eq!(
        sorted(trace),
        [
            "hsa_amd_memory_pool_free(#0)",
            "hsa_amd_memory_pool_free(#1)",
            "hsa_queue_destroy(q0)",
            "hsa_queue_destroy(q1)",
            "hsa_signal_destroy(s1)",
            "hsa_signal_destroy(s3)",
        ]
    );
}

#[test]
fn threads_copying_at_once_each_copy_through_a_staging_buffer_of_their_own() {
    let d = device(Config::new(0x2024));
    let p = d.memory().alloc(16).unwrap();
    take_trace();
    let machine = shared();
    together(2);
    let data = [[1u8; 8], [2u8; 8]];
    std::thread::scope(|s| {
        for (i, bytes) in data.iter().enumerate() {
            let (d, machine) = (&d, &machine);
            s.spawn(move || {
                machine.use_here();
                // SAFETY: 8 bytes each, the two halves of the allocation.
                unsafe {
                    d.memory()
                        .copy_to_device(p + 8 * i as u64, bytes.as_ptr(), 8)
                }
                .unwrap();
            });
        }
    });
    assert_eq!(apart(), 0, "the two copies were not in flight together");
    // Two staging buffers (#1, #2), each with its signal, whichever thread made which.
    let trace = take_trace();
    assert_eq!(
        sorted(
            calls(&trace, "hsa_amd_memory_pool_allocate")
                .iter()
                .map(|l| l.to_string())
                .collect()
        ),
        [
            "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #1",
            "hsa_amd_memory_pool_allocate(0x110, 4194304 bytes, flags 0) -> #2",
        ]
    );
    let copies = calls(&trace, "hsa_amd_memory_async_copy");
    assert_eq!(copies.len(), 2);
    assert!(
        copies.iter().any(|l| l.contains("#1, gpu, 8 bytes"))
            && copies.iter().any(|l| l.contains("#2, gpu, 8 bytes")),
        "{copies:#?}"
    );
    // Both halves arrived; the copy back takes an idle lane and makes nothing.
    let mut back = [0u8; 16];
    // SAFETY: the 16 bytes of the allocation.
    unsafe { d.memory().copy_from_device(back.as_mut_ptr(), p, 16) }.unwrap();
    assert_eq!(back[..8], data[0]);
    assert_eq!(back[8..], data[1]);
    assert_nothing_allocated(&take_trace());
    drop(d);
    assert_eq!(
        sorted(take_trace()),
        [
            "hsa_amd_memory_pool_free(#1)",
            "hsa_amd_memory_pool_free(#2)",
            "hsa_queue_destroy(q0)",
            "hsa_signal_destroy(s1)",
            "hsa_signal_destroy(s2)",
            "hsa_signal_destroy(s3)",
        ]
    );
}
