//! The trivial init that `bootbench overhead` measures bootbench's start-up
//! against: built static like the real init, packed as /init, booted once
//! through `bootbench run --initramfs` under icount with one vCPU (as the
//! comparison boots it). The console must show its boot-time event and the
//! kernel's clean power-off, with no panic and no timeout.

mod support;

use bootbench::overhead::startup::{build_trivial_image, trivial_boottime, POWER_DOWN_LINE};
use image::Compression;
use qemu::Arch;
use support::*;

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn the_trivial_init_prints_its_boot_time_and_powers_off() {
    require_x86_64_boot();
    let _boot = boot_lock();
    let dir = scratch();
    let image = dir.path().join("trivial.cpio.zst");
    let built = build_trivial_image(Arch::X86_64, Compression::Zstd, &image)
        .unwrap_or_else(|e| panic!("cannot build the trivial image: {e:#}"));
    assert!(built.bytes > 0 && built.init_bytes > built.bytes, "{built:?}");
    let out = dir.path().join("results.json");
    let run = run_with_deadline(
        {
            let mut c = bootbench(["run", "--clock", "icount", "--smp", "1", "--initramfs"]);
            c.arg(&image).arg("-o").arg(&out);
            c
        },
        BOOT_DEADLINE,
    );
    // No result stream comes from this init, so `run` reports the boot as
    // incomplete (exit 2); the verdict here is the console's.
    let boot = only_boot(&out, &run);
    let log = &boot.console_log;
    assert!(
        log.lines().any(|l| l.starts_with("@@BOOTBENCH EVENT trivial-init boottime=")),
        "no trivial-init event:\n{log}"
    );
    assert!(log.contains(POWER_DOWN_LINE), "no clean power-off:\n{log}");
    assert!(!log.contains("Kernel panic"), "the kernel panicked:\n{log}");
    assert_eq!(boot.boot.classification, "incomplete", "QEMU must exit by itself: {:?}", boot.boot.detail);
    let t = trivial_boottime(log).unwrap_or_else(|e| panic!("{e}:\n{log}"));
    // About 1.75 s of guest time for the Debian kernel under icount.
    assert!((0.5..30.0).contains(&t), "implausible boot time {t} s");
}
