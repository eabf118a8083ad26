//! kernbench for real, end to end on x86_64: the userland pack (built on
//! first use and cached) attached read-only and found by its serial, the
//! init mounting it at /pack, and a quick build (a handful of Linux
//! objects compiled by Debian's gcc and make, chrooted in the pack, the
//! objects on the ext4 scratch disk): one warmup and one timed build at the
//! optimal job count, in one boot under TCG. Checks the guest's figures
//! and that the envelope names the pack; prints the user:system split.

mod support;

use loads::schema::Status;
use support::*;

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn a_quick_kernbench_compiles_linux_objects_in_the_pack_and_records_the_pack() {
    require_x86_64_boot();
    support::require(nix::unistd::geteuid().is_root(), "root (mmdebstrap --mode=root builds the pack)");
    for program in ["mmdebstrap", "mke2fs"] {
        require_program(program);
    }
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let mut c = bootbench(["run", "--accel", "tcg", "--workloads", "kernbench", "--iterations", "1", "--warmup", "1"]);
    // --mem auto: what quick's four compilers at once need (960 MiB of
    // MemTotal), more than the base 1 GiB.
    c.args(["--append", "bootbench.kernbench.jobs=optimal", "-o"]).arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    assert_eq!(doc.status, Status::Complete);
    assert_eq!(boot.machine.mem_mib, bootbench::suite_choice::mem_for_mem_total(960), "--mem auto");
    let mem_total = doc.provenance.machine.mem_bytes >> 20;
    eprintln!("MemTotal of a {} MiB guest: {mem_total} MiB", boot.machine.mem_mib);
    assert!(mem_total >= 960, "the host's estimate of what the kernel keeps was too low: {mem_total} MiB");

    // The pack: found by serial and mounted by the guest, named by the host.
    let s = doc.provenance.storage.as_ref().expect("provenance.storage");
    assert_eq!(s.pack_mount.as_deref(), Some("/pack"));
    let device = s.pack_device.as_deref().expect("pack_device");
    assert_ne!(Some(device), s.scratch_device.as_deref(), "the pack is not the scratch disk");
    // That the scratch disk kept /dev/vda beside the pack is the guest's
    // own check (its serial is not the pack's): `doc.errors` is empty.
    let pack = boot.pack.as_ref().expect("the envelope records the pack");
    assert_eq!(pack.image_sha256, sha256_file(&pack.image));
    assert!(pack.packages.iter().any(|p| p.starts_with("gcc-12=")), "{:?}", pack.packages);
    assert!(pack.packages.iter().any(|p| p.starts_with("linux-source-6.1=")), "{:?}", pack.packages);
    assert_eq!(pack.linux_config.as_deref(), Some("x86_64_defconfig"));
    assert_eq!(pack.linux_config_sha256.as_ref().map(String::len), Some(64));

    // The build: every quick object compiled, timed, with the kernel's
    // accounting of the build's processes.
    let w = doc.workloads.iter().find(|w| w.name == "kernbench").expect("a kernbench result");
    assert_eq!(w.iterations.len(), 1, "{w:?}");
    // The guest read the pack's identity from the pack itself; it is the
    // key the host cached the image under, so results from other packs
    // (another compiler, another tree) have other parameters.
    assert_eq!(w.params["pack_id"], serde_json::json!(pack.key), "{:?}", w.params);
    let it = &w.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    let v = |k: &str| it.metrics.get(k).unwrap_or_else(|| panic!("no {k}: {:?}", it.metrics.keys())).value;
    let (elapsed, user, system) = (v("elapsed_optimal"), v("user_optimal"), v("system_optimal"));
    assert_eq!(it.detail["objects_optimal"], 4, "{:?}", it.detail);
    assert_eq!(it.detail["fs"], "ext4", "the objects went to the scratch disk: {:?}", it.detail);
    // Four compiles of real kernel files take seconds of CPU, mostly user.
    assert!(user > 1.0 && user > system, "user {user} s, system {system} s");
    let cpu = v("cpu_percent_optimal");
    assert!((cpu - (user + system) / elapsed * 100.0).abs() < 0.5, "{cpu}");
    eprintln!(
        "kernbench quick, {} under TCG: elapsed {elapsed:.1} s, user {user:.1} s, system {system:.1} s \
         (user:system {:.0}:{:.0}), {cpu:.0}% CPU, {} sleeps, {} context switches; boot wall {:.0} s",
        it.detail["jobs_optimal"],
        100.0 * user / (user + system),
        100.0 * system / (user + system),
        v("sleeps_optimal"),
        v("context_switches_optimal"),
        boot.boot.wall_s
    );
}
