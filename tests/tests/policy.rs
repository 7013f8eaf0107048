//! Devices, policy and the environment (CONFORMANCE 7, 17-21): each case runs the probe binary in its own process,
//! since the runtime reads the environment once.

mod common;

use common::probe;
use std::process::Command;

#[test]
fn default_policy_runs_on_the_host_elf_device() {
    let r = probe(&["double"], &[("OFFLOAD_INFO", "1")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("num_devices"), "1");
    assert_eq!(r.get("initial_device"), "1");
    assert_eq!(r.get("ran_on"), "device");
    assert_eq!(r.get("results_correct"), "true");
    let err = r.stderr();
    assert!(
        err.contains("offload: launch offload_tests::kernels::double (entry __omp_offloading_rs_13offload_tests7kernels6double) on device 0 (host-elf)"),
        "{err}"
    );
}

#[test]
fn quiet_without_offload_info() {
    let r = probe(&["double"], &[]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.stderr(), "");
}

#[test]
fn disabled_has_no_devices_and_runs_everything_on_the_host() {
    let r = probe(
        &["double"],
        &[("OMP_TARGET_OFFLOAD", "disabled"), ("OFFLOAD_INFO", "1")],
    );
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("num_devices"), "0");
    assert_eq!(r.get("initial_device"), "0");
    assert_eq!(r.get("ran_on"), "host");
    assert_eq!(r.get("results_correct"), "true");
    assert!(
        r.stderr()
            .contains("on the host (host-fallback): OMP_TARGET_OFFLOAD=DISABLED"),
        "{}",
        r.describe()
    );
}

#[test]
fn disabled_makes_the_initial_device_the_default_and_its_memory_host_memory() {
    let r = probe(&["is-device-ptr"], &[("OMP_TARGET_OFFLOAD", "disabled")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("default_device"), "0");
    assert_eq!(r.get("default_is_initial"), "true");
    assert_eq!(r.get("alloc_ok"), "true");
    assert_eq!(r.get("buffer"), "[1, 2, 3]", "{}", r.describe());
}

// The region part of OpenMP V&V's test_target_is_device_ptr under DISABLED: the region call (`__private::call`, its
// request's `device_memory`) runs the host body macros/src/region/ emits for device-memory regions.
#[test]
fn is_device_ptr_on_the_default_device_passes_under_disabled() {
    let r = probe(&["is-device-ptr"], &[("OMP_TARGET_OFFLOAD", "disabled")]);
    assert_eq!(r.get("region_correct"), "true", "{}", r.describe());
}

#[test]
fn mandatory_without_a_device_stops_the_program() {
    let r = probe(
        &["double"],
        &[("OMP_TARGET_OFFLOAD", "MANDATORY"), ("OFFLOAD_PLUGINS", "")],
    );
    assert!(!r.out.status.success(), "{}", r.describe());
    assert!(
        !r.kv.contains_key("ran_on"),
        "the region must not run: {}",
        r.describe()
    );
    let err = r.stderr();
    assert!(
        err.contains("region offload_tests::kernels::double could not run on a device"),
        "{err}"
    );
    assert!(err.contains("OMP_TARGET_OFFLOAD=MANDATORY"), "{err}");
    assert!(err.contains("no offload device is available"), "{err}");
}

#[test]
fn default_without_a_device_falls_back_silently() {
    let r = probe(&["double"], &[("OFFLOAD_PLUGINS", "")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("num_devices"), "0");
    assert_eq!(r.get("ran_on"), "host");
    assert_eq!(r.get("results_correct"), "true");
    assert_eq!(r.stderr(), "", "no noise on stderr");
}

#[test]
fn offload_plugins_selects_host_elf() {
    let r = probe(&["double"], &[("OFFLOAD_PLUGINS", "host-elf")]);
    assert_eq!(r.get("num_devices"), "1");
    assert_eq!(r.get("ran_on"), "device");
}

#[test]
fn device_clause_picks_the_device() {
    let env = [("OFFLOAD_HOST_DEVICES", "3"), ("OFFLOAD_INFO", "1")];
    for d in 0..3 {
        let r = probe(&["device", &d.to_string()], &env);
        assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
        assert!(
            r.stderr().contains(&format!("on device {d} (host-elf)")),
            "{}",
            r.describe()
        );
    }
}

#[test]
fn device_clause_naming_the_initial_device_runs_on_the_host_under_every_policy() {
    for policy in ["DEFAULT", "MANDATORY"] {
        let r = probe(&["device", "1"], &[("OMP_TARGET_OFFLOAD", policy)]);
        assert_eq!(r.get("initial_device"), "1");
        assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
    }
}

#[test]
fn out_of_range_device_falls_back_under_default_with_an_info_line() {
    for d in ["7", "-3"] {
        let r = probe(&["device", d], &[("OFFLOAD_INFO", "1")]);
        assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
        assert_eq!(r.get("results_correct"), "true");
        assert!(
            r.stderr().contains(&format!(
                "on the host (host-fallback): device {d} does not exist (there are 1 devices)"
            )),
            "{}",
            r.describe()
        );
    }
}

#[test]
fn out_of_range_device_is_an_error_under_mandatory() {
    let r = probe(&["device", "7"], &[("OMP_TARGET_OFFLOAD", "mandatory")]);
    assert!(
        r.out.status.success(),
        "the try_ entry point returns the error: {}",
        r.describe()
    );
    assert!(
        r.get("error").contains("device 7 does not exist"),
        "{}",
        r.describe()
    );
    assert!(r.get("error").contains("OMP_TARGET_OFFLOAD=MANDATORY"));
    assert_eq!(r.get("results_unchanged"), "true");
}

#[test]
fn omp_default_device_chooses_the_device() {
    let env = [
        ("OFFLOAD_HOST_DEVICES", "2"),
        ("OFFLOAD_INFO", "1"),
        ("OMP_DEFAULT_DEVICE", "1"),
    ];
    let r = probe(&["double"], &env);
    assert_eq!(r.get("default_device"), "1");
    assert_eq!(r.get("ran_on"), "device");
    assert!(
        r.stderr().contains("on device 1 (host-elf)"),
        "{}",
        r.describe()
    );

    // The initial device (2 here) as the default runs regions on the host.
    let r = probe(
        &["double"],
        &[("OFFLOAD_HOST_DEVICES", "2"), ("OMP_DEFAULT_DEVICE", "2")],
    );
    assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true");
}

#[test]
fn omp_set_default_device_chooses_the_device() {
    let env = [("OFFLOAD_HOST_DEVICES", "2"), ("OFFLOAD_INFO", "1")];
    let r = probe(&["set-default", "1"], &env);
    assert_eq!(r.get("default_device"), "0");
    assert_eq!(r.get("default_device_now"), "1");
    assert_eq!(r.get("ran_on"), "device");
    assert!(
        r.stderr().contains("on device 1 (host-elf)"),
        "{}",
        r.describe()
    );

    let r = probe(&["set-default", "2"], &env);
    assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
}

#[test]
fn a_region_in_a_binary_runs_on_the_device() {
    let r = probe(&["bin-region"], &[("OFFLOAD_INFO", "1")]);
    assert_eq!(r.get("ran_on"), "device", "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true");
    assert!(
        r.stderr().contains(
            "launch probe::negate (entry __omp_offloading_rs_5probe6negate) on device 0 (host-elf)"
        ),
        "{}",
        r.describe()
    );
}

#[test]
fn a_corrupt_image_disables_itself_and_nothing_else() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bad_image"));
    for k in common::RUNTIME_ENV {
        cmd.env_remove(k);
    }
    let out = cmd.env("OFFLOAD_INFO", "1").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ran_on=device"),
        "the good images still run regions:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("results_correct=true"));
    assert!(
        stderr.contains("offload: device 0 (host-elf): cannot load the x86_64-unknown-linux-gnu (x86_64) image of package `truncated` (64 bytes)"),
        "{stderr}"
    );
    assert!(stderr.contains("image of package `not-elf` (16 bytes): not an ELF shared object; its regions will run on the host"), "{stderr}");
}

#[test]
fn every_wait_policy_reuses_team_threads_correctly() {
    for policy in [None, Some("ACTIVE"), Some("passive")] {
        let env: Vec<(&str, &str)> = policy.map(|p| ("OMP_WAIT_POLICY", p)).into_iter().collect();
        let r = probe(&["parallel-launches"], &env);
        assert!(r.out.status.success(), "{policy:?}: {}", r.describe());
        assert_eq!(
            r.get("results_correct"),
            "true",
            "{policy:?}: {}",
            r.describe()
        );
        assert_eq!(r.stderr(), "", "{policy:?}");
    }
}

#[test]
fn an_unknown_wait_policy_is_named_and_ignored() {
    let r = probe(&["parallel-launches"], &[("OMP_WAIT_POLICY", "eager")]);
    assert!(r.out.status.success(), "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true");
    assert!(
        r.stderr()
            .contains("offload: ignoring OMP_WAIT_POLICY=\"eager\"; expected ACTIVE or PASSIVE"),
        "{}",
        r.describe()
    );
}

/// `OFFLOAD_BIND=local-rank`: the default device is the launcher's local rank modulo the devices, read from
/// Open MPI's, MPICH's or Slurm's variable; `OFFLOAD_INFO=1` says which rank took which device, and an explicit
/// `OMP_DEFAULT_DEVICE` wins.
#[test]
fn binding_by_local_rank_picks_the_default_device_for_each_launcher() {
    for (var, rank, device) in [
        ("OMPI_COMM_WORLD_LOCAL_RANK", "4", "1"),
        ("MPI_LOCALRANKID", "2", "2"),
        ("SLURM_LOCALID", "5", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "0", "0"),
    ] {
        let env = [
            ("OFFLOAD_BIND", "local-rank"),
            ("OFFLOAD_HOST_DEVICES", "3"),
            ("OFFLOAD_INFO", "1"),
            (var, rank),
        ];
        let r = probe(&["double"], &env);
        assert_eq!(
            r.get("default_device"),
            device,
            "{var}={rank}: {}",
            r.describe()
        );
        assert_eq!(r.get("ran_on"), "device");
        assert_eq!(r.get("results_correct"), "true");
        assert!(
            r.stderr().contains(&format!(
                "offload: local rank {rank} ({var}) takes device {device} (host-elf) of this node's 3"
            )),
            "{}",
            r.describe()
        );
        assert!(
            r.stderr()
                .contains(&format!("on device {device} (host-elf)")),
            "{}",
            r.describe()
        );
    }

    // An explicit default device wins; without a launcher's variable nothing is bound, and the run says why.
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_BIND", "local-rank"),
            ("OFFLOAD_HOST_DEVICES", "3"),
            ("SLURM_LOCALID", "1"),
            ("OMP_DEFAULT_DEVICE", "2"),
        ],
    );
    assert_eq!(r.get("default_device"), "2", "{}", r.describe());
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_BIND", "local-rank"),
            ("OFFLOAD_HOST_DEVICES", "3"),
        ],
    );
    assert_eq!(r.get("default_device"), "0", "{}", r.describe());
    assert!(
        r.stderr()
            .contains("OFFLOAD_BIND=local-rank, but no launcher set a local rank"),
        "{}",
        r.describe()
    );
    // Without devices the host is the default device, bound or not.
    let r = probe(
        &["double"],
        &[
            ("OFFLOAD_BIND", "local-rank"),
            ("SLURM_LOCALID", "1"),
            ("OMP_TARGET_OFFLOAD", "DISABLED"),
        ],
    );
    assert_eq!(r.get("ran_on"), "host", "{}", r.describe());
    assert_eq!(r.get("results_correct"), "true");
}

/// In an MPI job a region's failure names the rank (from the launcher's variable), since the ranks' logs interleave.
#[test]
fn a_failing_rank_names_itself() {
    for (var, rank) in [
        ("OMPI_COMM_WORLD_RANK", "2"),
        ("PMI_RANK", "5"),
        ("SLURM_PROCID", "7"),
    ] {
        let r = probe(
            &["double"],
            &[
                ("OMP_TARGET_OFFLOAD", "MANDATORY"),
                ("OFFLOAD_PLUGINS", ""),
                (var, rank),
            ],
        );
        assert!(!r.out.status.success(), "{}", r.describe());
        assert!(
            r.stderr().contains(&format!(
                "rank {rank} ({var}): offload: region offload_tests::kernels::double could not run on a device"
            )),
            "{}",
            r.describe()
        );
    }
}
