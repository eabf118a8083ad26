//! The scratch disk, swap and block scheduler end to end: one boot of the
//! cached Debian amd64 kernel with an ext4 scratch disk, a swap disk, bfq
//! (a module, packed early) and a disk throttle, checked from the guest's
//! provenance and the host envelope (the cache mode and AIO engine the
//! probe chose, the throttle); one boot with a zram swap that contest's
//! mem_load fills instead of a swap disk; and the bad inputs refused before
//! any boot (these use a fake kernel image with a config beside it, so they
//! need no QEMU).

mod support;

use loads::schema::Status;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::*;

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn scratch_disk_swap_and_bfq_are_set_up_and_recorded() {
    require_x86_64_boot();
    require_program("mke2fs");
    require_program("mkswap");
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let mut c = bootbench(["run", "--accel", "tcg", "--workloads", "fork", "--iterations", "1", "--warmup", "0"]);
    c.args(["--scratch-disk", "300M", "--swap", "64M", "--iosched", "bfq", "--disk-throttle", "64M,2000"]);
    c.args(["--append", "bootbench.fork.count=200", "-o"]).arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    // bfq is a module in Debian's kernel: packed in the early list with the
    // disk driver and ext4.
    let early = run.stderr.lines().find(|l| l.contains("early: ")).unwrap_or_default();
    for m in ["virtio_blk", "ext4", "jbd2", "crc32c_generic", "bfq"] {
        assert!(early.contains(m), "{m} not packed early: {early}\n{}", run.transcript());
    }
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    assert_eq!(doc.status, Status::Complete);
    assert_eq!(doc.workloads.len(), 1);
    assert_eq!(doc.workloads[0].iterations.len(), 1);

    // The guest's side.
    let s = doc.provenance.storage.as_ref().expect("provenance.storage");
    assert_eq!(s.scratch_device.as_deref(), Some("/dev/vda"));
    assert_eq!(s.scratch_fs.as_deref(), Some("ext4"));
    assert_eq!(s.scratch_mount.as_deref(), Some("/scratch"));
    assert_eq!(s.scratch_bytes, Some(300 << 20));
    assert_eq!(s.scheduler.as_deref(), Some("bfq"));
    assert_eq!(s.swap_device.as_deref(), Some("/dev/vdb"));
    // /proc/swaps leaves out the header page.
    let swap = s.swap_bytes.expect("swap_bytes");
    assert!(((64 << 20) - (64 << 10)..=64 << 20).contains(&swap), "swap_bytes {swap}");
    for word in ["bootbench.scratch=/dev/vda", "bootbench.swap=/dev/vdb", "bootbench.iosched=bfq"] {
        assert!(doc.provenance.kernel.cmdline.split_whitespace().any(|w| w == word), "{word}");
    }

    // The host's side.
    let h = boot.storage.as_ref().expect("envelope storage");
    let sd = h.scratch.as_ref().expect("scratch disk record");
    assert_eq!((sd.device.as_str(), sd.bytes), ("/dev/vda", 300 << 20));
    assert!(sd.tool_version.starts_with("mke2fs "), "{sd:?}");
    assert!(sd.command.iter().any(|a| a == "ext4"), "{sd:?}");
    let sw = h.swap.as_ref().expect("swap disk record");
    assert_eq!((sw.device.as_str(), sw.bytes), ("/dev/vdb", 64 << 20));
    assert!(sw.command.windows(2).any(|w| w == ["-p", "4096"]), "{sw:?}");
    assert_eq!(h.iosched.as_deref(), Some("bfq"));
    let drives: Vec<&String> = boot.qemu.argv.iter().filter(|a| a.contains("if=none,id=disk")).collect();
    assert_eq!(drives.len(), 2, "{:?}", boot.qemu.argv);
    assert!(drives[0].contains("scratch-") && drives[1].contains("swap-"), "{drives:?}");
    // How QEMU did the disks' I/O: cache=none (O_DIRECT) wherever a
    // directory on a disk takes it, with the engine the probe found, and
    // each disk throttled as asked; all of it in the envelope and the argv.
    let io = h.io.as_ref().expect("envelope storage.io");
    assert!(io.cache == "none" || io.reason.contains("cache=writeback"), "{io:?}");
    assert!(["io_uring", "native", "threads"].contains(&io.aio.as_str()), "{io:?}");
    if io.cache == "none" {
        assert!(io.reason.contains(&format!("cache=none,aio={}", io.aio)), "{io:?}");
    }
    let t = h.throttle.as_ref().expect("envelope storage.throttle");
    assert_eq!((t.bps_total, t.iops_total), (64 << 20, Some(2000)));
    for d in &drives {
        assert!(Path::new(d.trim_start_matches("file=")).starts_with(&io.dir), "{d} not in {io:?}");
        let keys = format!(
            ",cache={},aio={},throttling.bps-total={},throttling.iops-total=2000",
            io.cache,
            io.aio,
            64u64 << 20
        );
        assert!(d.ends_with(&keys), "{d}: want {keys}");
    }
    assert!(
        run.stderr
            .contains(&format!("run: disks cache={} aio={}, each throttled to 64 MiB/s, 2000 IOPS", io.cache, io.aio)),
        "{}",
        run.transcript()
    );
    // The images are gone after the boot.
    for d in drives {
        let file = d.trim_start_matches("file=").split(",format").next().unwrap_or_default();
        assert!(!Path::new(file).exists(), "{file} left behind");
    }
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn zram_swap_replaces_the_swap_disk_and_takes_mem_loads_pages() {
    require_x86_64_boot();
    require_program("mke2fs");
    let _boot = boot_lock();
    let dir = scratch();
    let suite = dir.path().join("zram.json");
    let rows = serde_json::json!({
        "name": "zram", "iterations": 1, "warmup": 0, "watchdog_s": 900,
        "workloads": [{ "name": "contest", "params": { "rows": ["no_load", "mem_load"], "files": 60, "lead_s": 3.0 } }]
    });
    std::fs::write(&suite, serde_json::to_vec(&rows).unwrap()).unwrap();
    let out = dir.path().join("results.json");
    let mut c = bootbench(["run", "--accel", "tcg", "--mem", "256M", "--zram", "128M", "--suite"]);
    c.arg(&suite).arg("-o").arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    let early = run.stderr.lines().find(|l| l.contains("early: ")).unwrap_or_default();
    for m in ["zram", "zsmalloc", "virtio_blk", "ext4"] {
        assert!(
            early.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').any(|w| w == m),
            "{m} not packed early: {early}"
        );
    }
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let s = doc.provenance.storage.as_ref().expect("provenance.storage");
    assert_eq!(s.swap_device, None, "--zram replaces the auto swap disk: {s:?}");
    assert!(boot.storage.as_ref().is_some_and(|h| h.swap.is_none()), "{:?}", boot.storage);
    let z = s.zram.as_ref().expect("provenance.storage.zram");
    assert_eq!((z.device.as_str(), z.disksize_bytes, z.priority), ("/dev/zram0", 128 << 20, 100));
    assert_eq!(z.algorithm.as_deref(), Some("lzo-rle"), "Debian's default compressor");
    let swap = z.swap_bytes.expect("swap_bytes");
    assert!(((128 << 20) - (64 << 10)..=128 << 20).contains(&swap), "swap_bytes {swap}");
    let contest = &doc.workloads[0];
    assert_eq!(contest.error, None);
    let it = &contest.iterations[0];
    assert!(it.errors.is_empty(), "{:?}", it.errors);
    let mem_row = it.detail["rows"].as_array().unwrap().iter().find(|r| r["row"] == "mem_load").unwrap().clone();
    assert!(mem_row["vmstat"]["pswpout"].as_i64().unwrap() > 0, "mem_load did not swap: {mem_row}");
    assert_eq!(mem_row["load_oom_kills"], 0, "{mem_row}");
    // zram held mem_load's pages at some point (they are freed when the
    // load stops, so only the peak shows it at the end).
    assert!(z.stored_bytes.is_some() && z.compressed_bytes.is_some(), "{z:?}");
    assert!(z.peak_used_bytes.unwrap_or(0) > 0, "zram never held a page: {z:?}");
    assert!(doc.provenance.kernel.cmdline.split_whitespace().any(|w| w == format!("bootbench.zram={}", 128u64 << 20)));
}

#[test]
#[ignore = "needs GNU cpio and the cached Debian kernel: run scripts/test"]
fn early_modules_are_listed_apart_and_not_repeated_late() {
    require_program("cpio");
    let k = default_kernel(bootbench::kernel::DebianArch::Amd64);
    let dir = scratch();
    let raw = dir.path().join("a.cpio");
    let mut c = bootbench(["image", "--compression", "none", "--early-modules", "virtio_pci,virtio_blk,ext4,bfq"]);
    c.args(["--modules", "virtio_console,virtio_pci", "--modules-dir"]).arg(k.modules_dir()).arg("-o").arg(&raw);
    let run = run_with_deadline(c, Duration::from_secs(900));
    run.assert_success();
    assert!(run.stdout.contains("early    virtio_ring"), "{}", run.transcript());
    let x = dir.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let st = Command::new("cpio").args(["-i", "-d", "--quiet", "-F"]).arg(&raw).current_dir(&x).status().unwrap();
    assert!(st.success());
    let read = |list: &str| std::fs::read_to_string(x.join("etc/bootbench").join(list)).unwrap();
    let (early, late) = (read("modules-early.load"), read("modules.load"));
    let names = |text: &str| -> Vec<String> {
        text.lines().map(|l| l.rsplit('/').next().unwrap().trim_end_matches(".ko").to_string()).collect()
    };
    let (early_names, late_names) = (names(&early), names(&late));
    let pos = |m: &str| early_names.iter().position(|n| n == m).unwrap_or_else(|| panic!("{m} not early: {early}"));
    assert!(pos("virtio_ring") < pos("virtio_blk") && pos("jbd2") < pos("ext4"), "{early}");
    assert!(early_names.contains(&"virtio_pci".to_string()) && early_names.contains(&"bfq".to_string()), "{early}");
    // virtio_pci and virtio_console's dependencies are loaded early already.
    assert_eq!(late_names, ["virtio_console"], "{late}");
    for rel in early.lines().chain(late.lines()) {
        assert!(x.join(rel).is_file(), "{rel} listed but not packed");
    }
}

/// A fake bzImage with a Debian-like config beside it (`config-fake`):
/// enough for every host-side check, never booted.
fn fake_kernel(dir: &Path, config: &str) -> std::path::PathBuf {
    let mut h = vec![0u8; 0x240];
    h[0x202..0x206].copy_from_slice(b"HdrS");
    h[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    h[0x236] = 1;
    let k = dir.join("vmlinuz-fake");
    std::fs::write(&k, h).unwrap();
    std::fs::write(dir.join("config-fake"), config).unwrap();
    k
}

const DEBIAN_LIKE: &str = "CONFIG_MQ_IOSCHED_DEADLINE=y\nCONFIG_MQ_IOSCHED_KYBER=m\nCONFIG_IOSCHED_BFQ=m\n\
    CONFIG_VIRTIO_BLK=m\nCONFIG_VIRTIO_PCI=m\nCONFIG_EXT4_FS=m\nCONFIG_CRYPTO_CRC32C=m\nCONFIG_VIRTIO_CONSOLE=m\n";

/// `bootbench run` with `args` that must be refused before any boot.
fn refused(kernel: Option<&Path>, args: &[&str]) -> CliRun {
    let mut c = bootbench(["run", "--iterations", "1", "--warmup", "0", "--workloads", "fork"]);
    if let Some(k) = kernel {
        c.arg("--kernel").arg(k);
    }
    c.args(args);
    // No QEMU on PATH: a run that got past the checks would fail naming it.
    let run = run_with_deadline(
        {
            let mut c: Command = c;
            c.env("PATH", "/nonexistent");
            c
        },
        Duration::from_secs(120),
    );
    assert_eq!(run.code(), Some(1), "expected a refusal:\n{}", run.transcript());
    assert!(run.stderr.starts_with("bootbench: error: "), "{}", run.transcript());
    assert!(!run.stderr.contains("QEMU"), "not refused before the boot:\n{}", run.transcript());
    run
}

#[test]
fn unknown_scheduler_is_refused_listing_what_the_kernel_offers() {
    let dir = scratch();
    let k = fake_kernel(dir.path(), DEBIAN_LIKE);
    let run = refused(Some(&k), &["--scratch-disk", "300M", "--iosched", "cfq"]);
    assert!(run.stderr.contains("unknown block scheduler 'cfq'"), "{}", run.stderr);
    assert!(run.stderr.contains("none, mq-deadline, kyber, bfq"), "{}", run.stderr);

    let no_bfq = DEBIAN_LIKE.replace("CONFIG_IOSCHED_BFQ=m", "# CONFIG_IOSCHED_BFQ is not set");
    let dir = scratch();
    let k = fake_kernel(dir.path(), &no_bfq);
    let run = refused(Some(&k), &["--scratch-disk", "300M", "--iosched", "bfq"]);
    assert!(run.stderr.contains("'bfq' is not built") && run.stderr.contains("CONFIG_IOSCHED_BFQ"), "{}", run.stderr);
    assert!(run.stderr.contains("offers: none, mq-deadline, kyber)"), "{}", run.stderr);
}

#[test]
fn zram_on_a_kernel_without_it_is_refused_naming_the_option() {
    let dir = scratch();
    let k = fake_kernel(dir.path(), DEBIAN_LIKE);
    let run = refused(Some(&k), &["--zram", "auto"]);
    assert!(run.stderr.contains("CONFIG_ZRAM") && run.stderr.contains("--zram"), "{}", run.stderr);
}

#[test]
fn iosched_without_a_scratch_disk_is_refused() {
    let run = refused(None, &["--iosched", "bfq"]);
    assert!(run.stderr.contains("--iosched bfq") && run.stderr.contains("no scratch disk"), "{}", run.stderr);
    let run = refused(None, &["--scratch-disk", "none", "--iosched", "mq-deadline"]);
    assert!(run.stderr.contains("--scratch-disk SIZE"), "{}", run.stderr);
}

#[test]
fn bad_sizes_are_refused_naming_the_option() {
    for (args, want) in [
        (["--scratch-disk", "lots"], "bad value 'lots' for --scratch-disk"),
        (["--scratch-disk", "10X"], "bad value '10X' for --scratch-disk"),
        (["--scratch-disk", "8M"], "at least 32 MiB"),
        (["--swap", "0"], "bad value '0' for --swap"),
        (["--zram", "lots"], "bad value 'lots' for --zram"),
        (["--zram", "8G"], "4 × --mem"),
    ] {
        let run = refused(None, &args);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn bad_disk_throttles_are_refused_naming_the_option_and_the_value() {
    for (value, want) in [
        ("0", "BPS must be more than 0"),
        ("fast", "expected BPS[,IOPS]"),
        ("-40M", "expected BPS[,IOPS]"),
        ("40M,0", "IOPS must be more than 0"),
        ("40M,lots", "expected BPS[,IOPS]"),
        ("99999999999999999999T", "BPS is more than"),
    ] {
        // `=` so that clap takes "-40M" as the value, not as a flag.
        let run = refused(None, &["--scratch-disk", "64M", &format!("--disk-throttle={value}")]);
        assert!(run.stderr.contains(&format!("bad value '{value}' for --disk-throttle")), "{value}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{value}: {}", run.stderr);
    }
}

#[test]
fn a_disk_throttle_is_refused_under_icount_and_without_a_disk() {
    let run = refused(None, &["--scratch-disk", "64M", "--disk-throttle", "40M", "--clock", "icount"]);
    assert!(run.stderr.contains("--disk-throttle 40M cannot be used with --clock icount"), "{}", run.stderr);
    let run = refused(None, &["--scratch-disk", "64M", "--disk-throttle", "40M,500", "--accel", "icount:2"]);
    assert!(run.stderr.contains("--disk-throttle 40M,500 cannot be used with --accel icount"), "{}", run.stderr);
    let run = refused(None, &["--disk-throttle", "40M"]);
    assert!(
        run.stderr.contains("--disk-throttle 40M limits the scratch and swap disks, but there is none"),
        "{}",
        run.stderr
    );
}
