use super::*;
use std::path::Path;
use std::process::Command;

const DEBIAN: &str = "CONFIG_MQ_IOSCHED_DEADLINE=y\nCONFIG_MQ_IOSCHED_KYBER=m\nCONFIG_IOSCHED_BFQ=m\n\
    CONFIG_VIRTIO_BLK=m\nCONFIG_VIRTIO_PCI=m\nCONFIG_EXT4_FS=m\nCONFIG_CRYPTO_CRC32C=m\n";

fn cfg(text: &str) -> KernelConfig {
    KernelConfig::from_text(Path::new("/boot/config-test"), text)
}

fn plan(scratch: &str, swap: &str, iosched: Option<&str>) -> Result<StoragePlan, ScratchDiskError> {
    StoragePlan::decide(
        SizeChoice::parse("--scratch-disk", scratch)?,
        SizeChoice::parse("--swap", swap)?,
        SizeChoice::None,
        iosched,
        None,
        1024,
    )
}

#[test]
fn sizes_parse() {
    let p = |s| SizeChoice::parse("--scratch-disk", s);
    assert_eq!(p("300M").unwrap(), SizeChoice::Bytes(300 << 20));
    assert_eq!(p("300").unwrap(), SizeChoice::Bytes(300 << 20));
    assert_eq!(p("4G").unwrap(), SizeChoice::Bytes(4 << 30));
    assert_eq!(p("4g").unwrap(), SizeChoice::Bytes(4 << 30));
    assert_eq!(p("2GiB").unwrap(), SizeChoice::Bytes(2 << 30));
    assert_eq!(p("1T").unwrap(), SizeChoice::Bytes(1 << 40));
    assert_eq!(p("65536K").unwrap(), SizeChoice::Bytes(64 << 20));
    assert_eq!(p("none").unwrap(), SizeChoice::None);
    assert_eq!(p("auto").unwrap(), SizeChoice::Auto);
    for bad in ["", "0", "0M", "lots", "10X", "-1G", "1.5G", "65T", "99999999999999999999G"] {
        let e = p(bad).unwrap_err().to_string();
        assert!(e.contains("--scratch-disk") && e.contains(&format!("'{bad}'")), "{bad}: {e}");
    }
}

#[test]
fn auto_follows_contest_and_memory() {
    let auto = |contest, mem| {
        StoragePlan::decide(SizeChoice::Auto, SizeChoice::Auto, SizeChoice::None, None, contest, mem).unwrap()
    };
    assert_eq!(auto(None, 1024), StoragePlan::default());
    let p = auto(Some(0), 1024);
    assert_eq!(p.scratch_bytes, Some(3 << 30));
    assert_eq!(auto(Some(1280 << 20), 1024).scratch_bytes, Some((3 << 30) + (1280 << 20)), "dbench_load's room");
    assert_eq!(p.swap_bytes, Some(1 << 30));
    assert_eq!(p.devices(), (Some("/dev/vda"), Some("/dev/vdb")));
    let p = plan("300M", "none", Some("bfq")).unwrap();
    assert_eq!((p.scratch_bytes, p.swap_bytes), (Some(300 << 20), None));
    let p = plan("none", "64M", None).unwrap();
    assert_eq!(p.devices(), (None, Some("/dev/vda")), "a lone swap disk is the first disk");
    let p = plan("300M", "auto", None).unwrap();
    assert_eq!(p.swap_bytes, Some(1 << 30), "auto swap is the guest RAM with a scratch disk");
}

#[test]
fn bad_plans_are_refused() {
    let e = plan("none", "none", Some("bfq")).unwrap_err().to_string();
    assert!(e.contains("--iosched bfq") && e.contains("--scratch-disk"), "{e}");
    let e = plan("auto", "auto", Some("kyber")).unwrap_err().to_string();
    assert!(e.contains("no scratch disk"), "{e}");
    let e = plan("8M", "none", None).unwrap_err().to_string();
    assert!(e.contains("--scratch-disk") && e.contains("at least 32 MiB"), "{e}");
    let e = plan("none", "512K", None).unwrap_err().to_string();
    assert!(e.contains("--swap") && e.contains("at least 1 MiB"), "{e}");
}

#[test]
fn cmdline_keys_describe_the_disks() {
    let p = plan("300M", "64M", Some("bfq")).unwrap();
    let keys: Vec<String> = p.cmdline_keys().iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(
        keys,
        ["bootbench.scratch=/dev/vda", "bootbench.scratch_fs=ext4", "bootbench.swap=/dev/vdb", "bootbench.iosched=bfq"]
    );
    // The init's parser accepts every key the host writes.
    let line = keys.join(" ");
    let c = loads::suite::CmdlineConfig::parse(&line).unwrap();
    assert_eq!(c.iosched.as_deref(), Some("bfq"));
}

#[test]
fn schedulers_are_checked_against_the_config() {
    let debian = cfg(DEBIAN);
    assert_eq!(offered_schedulers(&debian), ["none", "mq-deadline", "kyber", "bfq"]);
    let p = plan("300M", "none", Some("bfq")).unwrap();
    let k = for_kernel(&p, Some(&debian), true).unwrap();
    assert_eq!(k.early_modules, ["virtio_pci", "virtio_blk", "ext4", "crc32c_generic", "bfq"]);
    let p = plan("300M", "none", Some("kyber")).unwrap();
    assert_eq!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.last().unwrap(), "kyber-iosched");
    for built_in in ["mq-deadline", "none"] {
        let p = plan("300M", "none", Some(built_in)).unwrap();
        assert_eq!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.len(), 4, "{built_in}");
    }

    let p = plan("300M", "none", Some("cfq")).unwrap();
    let e = for_kernel(&p, Some(&debian), true).unwrap_err().to_string();
    assert!(e.contains("'cfq'") && e.contains("none, mq-deadline, kyber, bfq"), "{e}");
    let no_bfq = cfg(&DEBIAN.replace("CONFIG_IOSCHED_BFQ=m", "# CONFIG_IOSCHED_BFQ is not set"));
    let p = plan("300M", "none", Some("bfq")).unwrap();
    let e = for_kernel(&p, Some(&no_bfq), true).unwrap_err().to_string();
    assert!(e.contains("'bfq'") && e.contains("CONFIG_IOSCHED_BFQ") && e.contains("none, mq-deadline, kyber"), "{e}");
    assert!(!e.contains("kyber, bfq"), "{e}");
}

#[test]
fn drivers_built_in_need_no_modules_and_missing_ones_are_errors() {
    let built_in = cfg("CONFIG_VIRTIO_BLK=y\nCONFIG_VIRTIO_PCI=y\nCONFIG_EXT4_FS=y\nCONFIG_CRYPTO_CRC32C=y\n");
    let p = plan("300M", "64M", None).unwrap();
    assert!(for_kernel(&p, Some(&built_in), false).unwrap().early_modules.is_empty());
    let no_ext4 = cfg(&DEBIAN.replace("CONFIG_EXT4_FS=m", "# CONFIG_EXT4_FS is not set"));
    let e = for_kernel(&p, Some(&no_ext4), true).unwrap_err().to_string();
    assert!(e.contains("ext4") && e.contains("CONFIG_EXT4_FS") && e.contains("/boot/config-test"), "{e}");
    let e = for_kernel(&p, Some(&cfg(DEBIAN)), false).unwrap_err().to_string();
    assert!(e.contains("--modules-dir") && e.contains("virtio_pci"), "{e}");
    // A swap disk alone needs the virtio drivers, not ext4.
    let p = plan("none", "64M", None).unwrap();
    assert_eq!(for_kernel(&p, Some(&no_ext4), true).unwrap().early_modules, ["virtio_pci", "virtio_blk"]);
    // No disks, no needs.
    let p = plan("none", "none", None).unwrap();
    assert!(for_kernel(&p, Some(&no_ext4), true).unwrap().early_modules.is_empty());
}

#[test]
fn the_pack_alone_needs_virtio_and_ext4_and_a_kernel_without_ext4_is_refused_naming_it() {
    let p = plan("none", "none", None).unwrap().with_pack(true);
    let k = for_kernel(&p, Some(&cfg(DEBIAN)), true).unwrap();
    assert_eq!(k.early_modules, ["virtio_pci", "virtio_blk", "ext4", "crc32c_generic"]);
    let no_ext4 = cfg(&DEBIAN.replace("CONFIG_EXT4_FS=m", "# CONFIG_EXT4_FS is not set"));
    let e = for_kernel(&p, Some(&no_ext4), true).unwrap_err().to_string();
    assert!(e.contains("CONFIG_EXT4_FS") && e.contains("userland pack"), "{e}");
    // With a scratch disk too, each module once.
    let p = plan("300M", "none", None).unwrap().with_pack(true);
    let k = for_kernel(&p, Some(&cfg(DEBIAN)), true).unwrap();
    assert_eq!(k.early_modules, ["virtio_pci", "virtio_blk", "ext4", "crc32c_generic"]);
}

#[test]
fn zram_is_sized_from_memory_replaces_auto_swap_and_packs_its_modules() {
    let zram = |swap: &str, z: &str| {
        StoragePlan::decide(
            SizeChoice::Auto,
            SizeChoice::parse("--swap", swap)?,
            SizeChoice::parse("--zram", z)?,
            None,
            Some(0),
            1024,
        )
    };
    let p = zram("auto", "auto").unwrap();
    assert_eq!((p.zram_bytes, p.swap_bytes), (Some(512 << 20), None), "zram instead of the swap disk");
    assert!(p.cmdline_keys().contains(&("bootbench.zram", (512u64 << 20).to_string())));
    let p = zram("64M", "256M").unwrap();
    assert_eq!((p.zram_bytes, p.swap_bytes), (Some(256 << 20), Some(64 << 20)), "both when both are asked");
    assert_eq!(zram("auto", "none").unwrap().zram_bytes, None);
    for bad in ["512K", "5G"] {
        let e = zram("auto", bad).unwrap_err().to_string();
        assert!(e.contains("--zram") && e.contains("between"), "{bad}: {e}");
    }
    let p = zram("none", "auto").unwrap();
    let debian = cfg(&format!("{DEBIAN}CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP=\"lzo-rle\"\nCONFIG_CRYPTO_LZO=y\n"));
    assert!(for_kernel(&p, Some(&debian), true).unwrap().early_modules.ends_with(&["zram".to_string()]));
    let zstd = cfg(&format!("{DEBIAN}CONFIG_ZRAM=m\nCONFIG_ZRAM_DEF_COMP=\"zstd\"\nCONFIG_CRYPTO_ZSTD=m\n"));
    assert!(for_kernel(&p, Some(&zstd), true).unwrap().early_modules.ends_with(&["zram".into(), "zstd".into()]));
    let e = for_kernel(&p, Some(&cfg(DEBIAN)), true).unwrap_err().to_string();
    assert!(e.contains("CONFIG_ZRAM") && e.contains("--zram"), "{e}");
}

#[test]
fn page_size_follows_the_config() {
    assert_eq!(cfg(DEBIAN).page_size(), 4096);
    assert_eq!(cfg("CONFIG_PPC_64K_PAGES=y\n").page_size(), 65536);
    assert_eq!(cfg("# CONFIG_PPC_64K_PAGES is not set\n").page_size(), 4096);
}

#[test]
fn images_are_made_sparse_and_recorded() {
    if !["mke2fs", "mkswap"].iter().all(|p| Command::new(p).arg("-V").output().is_ok()) {
        panic!("missing prerequisite: mke2fs and mkswap (e2fsprogs, util-linux; run scripts/setup)");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = plan("64M", "4M", None).unwrap();
    let disks = make_disks(&p, 4096, dir.path(), "t").unwrap();
    assert_eq!(disks.files.len(), 2);
    let s = disks.record.scratch.as_ref().unwrap();
    assert_eq!((s.device.as_str(), s.bytes), ("/dev/vda", 64 << 20));
    assert!(s.tool_version.starts_with("mke2fs"), "{s:?}");
    let img = std::fs::read(&disks.files[0]).unwrap();
    assert_eq!(img.len() as u64, 64 << 20);
    // ext4 superblock magic at 1024 + 0x38.
    assert_eq!(&img[1024 + 0x38..1024 + 0x3a], &[0x53, 0xef]);
    let w = disks.record.swap.as_ref().unwrap();
    assert_eq!((w.device.as_str(), w.bytes), ("/dev/vdb", 4 << 20));
    assert!(w.tool_version.contains("util-linux"), "{w:?}");
    let swap = std::fs::read(&disks.files[1]).unwrap();
    assert_eq!(&swap[4096 - 10..4096], b"SWAPSPACE2");
    disks.remove();
    assert!(!disks.files[0].exists() && !disks.files[1].exists());
}

#[test]
fn tool_failure_names_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let p = plan("none", "4M", None).unwrap();
    // A page size mkswap refuses.
    let e = make_disks(&p, 3000, dir.path(), "bad").unwrap_err().to_string();
    assert!(e.contains("mkswap") && e.contains("-p 3000"), "{e}");
    assert!(!dir.path().join("swap-bad.img").exists(), "a failed image is removed");
}

#[test]
fn disk_throttles_parse_as_sizes_and_counts() {
    let t = |s| parse_disk_throttle(s).map(|t| (t.bps, t.iops));
    assert_eq!(t("40M").unwrap(), (40 << 20, None));
    assert_eq!(t("40").unwrap(), (40 << 20, None), "a bare number is MiB/s, as with the other sizes");
    assert_eq!(t("512K,100").unwrap(), (512 << 10, Some(100)));
    assert_eq!(t(" 1G , 2000 ").unwrap(), (1 << 30, Some(2000)));
    assert_eq!(t("909T").unwrap(), (909 << 40, None), "just under QEMU's 10^15");
    assert_eq!(t("1M,1000000000000000").unwrap(), (1 << 20, Some(1_000_000_000_000_000)));
    for (bad, says) in [
        ("0", "BPS must be more than 0"),
        ("0M,10", "BPS must be more than 0"),
        ("40M,0", "IOPS must be more than 0"),
        ("", "expected BPS[,IOPS]"),
        ("fast", "expected BPS[,IOPS]"),
        ("40X", "expected BPS[,IOPS]"),
        ("-40M", "expected BPS[,IOPS]"),
        ("40M,-5", "expected BPS[,IOPS]"),
        ("40M,", "expected BPS[,IOPS]"),
        (",500", "expected BPS[,IOPS]"),
        ("40M,5,5", "expected BPS[,IOPS]"),
        ("40M,1.5", "expected BPS[,IOPS]"),
        ("1.5M", "expected BPS[,IOPS]"),
        ("910T", "BPS is more than 1000000000000000 bytes per second"),
        ("99999999999999999999", "BPS is more than"),
        ("99999999999999999999T", "BPS is more than"),
        ("40M,1000000000000001", "IOPS is more than 1000000000000000"),
        ("40M,99999999999999999999", "IOPS is more than"),
    ] {
        let e = parse_disk_throttle(bad).unwrap_err().to_string();
        assert!(e.starts_with(&format!("bad value '{bad}' for --disk-throttle: ")), "{bad}: {e}");
        assert!(e.contains(says), "{bad}: {e}");
    }
}

#[test]
fn a_throttle_needs_a_disk_and_a_real_clock() {
    let p = plan("300M", "none", None).unwrap();
    assert_eq!(p.clone().with_throttle(None, Some("--clock icount")).unwrap().throttle, None, "no throttle, no check");
    let t = p.clone().with_throttle(Some("40M,500"), None).unwrap().throttle.unwrap();
    assert_eq!((t.bps, t.iops), (40 << 20, Some(500)));
    let e = p.clone().with_throttle(Some("40M"), Some("--clock icount")).unwrap_err().to_string();
    assert!(e.contains("--disk-throttle 40M") && e.contains("--clock icount") && e.contains("host time"), "{e}");
    let e = p.with_throttle(Some("40M"), Some("--accel icount")).unwrap_err().to_string();
    assert!(e.contains("--disk-throttle 40M cannot be used with --accel icount"), "{e}");
    let lone_swap = plan("none", "64M", None).unwrap();
    assert!(lone_swap.with_throttle(Some("1M"), None).unwrap().throttle.is_some(), "a swap disk is throttled too");
    let e = plan("none", "none", None).unwrap().with_throttle(Some("40M"), None).unwrap_err().to_string();
    assert!(e.contains("--disk-throttle 40M") && e.contains("give --scratch-disk SIZE"), "{e}");
    // A bad value is reported as such even where a throttle could not go.
    let e = plan("none", "none", None).unwrap().with_throttle(Some("0"), Some("--clock icount")).unwrap_err();
    assert!(e.to_string().contains("bad value '0' for --disk-throttle"), "{e}");
}

#[test]
fn the_images_record_the_throttle_and_leave_qemus_io_to_the_setup() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan("64M", "none", None).unwrap();
    let disks = make_disks(&p, 4096, dir.path(), "a").unwrap();
    assert_eq!(disks.record.throttle, None, "no throttle unless asked");
    disks.remove();
    p.throttle = Some(qemu::disk_io::DiskThrottle { bps: 8 << 20, iops: Some(300) });
    let disks = make_disks(&p, 4096, dir.path(), "b").unwrap();
    assert_eq!(disks.record.throttle, Some(ThrottleRecord { bps_total: 8 << 20, iops_total: Some(300) }));
    assert_eq!(disks.record.io, None, "the cache mode and AIO engine are the setup's to record");
    disks.remove();
}

#[test]
fn a_lab_scratch_partition_packs_every_disk_controller_built_as_a_module_and_needs_ext4() {
    let cfg = |text: &str| KernelConfig::from_text(Path::new("/boot/config"), text);
    let debian = cfg("CONFIG_SATA_AHCI=m\nCONFIG_BLK_DEV_SD=m\nCONFIG_BLK_DEV_NVME=m\nCONFIG_VIRTIO_PCI=m\n\
                      CONFIG_VIRTIO_BLK=m\nCONFIG_EXT4_FS=m\nCONFIG_CRYPTO_CRC32C=m\n");
    assert_eq!(
        lab_scratch_modules(&debian, true, None).unwrap(),
        ["ahci", "sd_mod", "nvme", "virtio_pci", "virtio_blk", "ext4", "crc32c_generic"]
    );
    // Built in, or absent (a machine without NVMe): nothing to pack.
    let built_in = cfg("CONFIG_SATA_AHCI=y\nCONFIG_BLK_DEV_SD=y\nCONFIG_EXT4_FS=y\nCONFIG_CRYPTO_CRC32C=y\n");
    assert_eq!(lab_scratch_modules(&built_in, false, None).unwrap(), Vec::<String>::new());
    let e = lab_scratch_modules(&debian, false, None).unwrap_err().to_string();
    assert!(e.contains("--modules-dir") && e.contains("ahci"), "{e}");
    let e = lab_scratch_modules(&cfg("CONFIG_SATA_AHCI=y\n"), true, None).unwrap_err().to_string();
    assert!(e.contains("CONFIG_EXT4_FS is not set"), "{e}");
    // --iosched: the scheduler's module too, or why not.
    let bfq = cfg("CONFIG_EXT4_FS=y\nCONFIG_IOSCHED_BFQ=m\n");
    assert_eq!(lab_scratch_modules(&bfq, true, Some("bfq")).unwrap(), ["bfq"]);
    assert_eq!(lab_scratch_modules(&bfq, true, Some("none")).unwrap(), Vec::<String>::new());
    let e = lab_scratch_modules(&bfq, true, Some("kyber")).unwrap_err().to_string();
    assert!(e.contains("CONFIG_MQ_IOSCHED_KYBER is not set"), "{e}");
    let e = lab_scratch_modules(&bfq, true, Some("cfq")).unwrap_err().to_string();
    assert!(e.contains("unknown block scheduler 'cfq'"), "{e}");
}

#[test]
fn a_lab_pack_store_packs_the_disk_modules_and_loop_and_needs_ext4_and_loop() {
    let cfg = |text: &str| KernelConfig::from_text(Path::new("/boot/config"), text);
    let debian = cfg("CONFIG_VIRTIO_PCI=m\nCONFIG_VIRTIO_BLK=m\nCONFIG_EXT4_FS=m\nCONFIG_BLK_DEV_LOOP=m\n");
    assert_eq!(lab_pack_modules(&debian, true).unwrap(), ["virtio_pci", "virtio_blk", "ext4", "loop"]);
    assert_eq!(
        lab_pack_modules(&cfg("CONFIG_EXT4_FS=y\nCONFIG_BLK_DEV_LOOP=y\n"), false).unwrap(),
        Vec::<String>::new()
    );
    let e = lab_pack_modules(&cfg("CONFIG_EXT4_FS=y\n"), true).unwrap_err().to_string();
    assert!(e.contains("CONFIG_BLK_DEV_LOOP is not set") && e.contains("loop"), "{e}");
    let e = lab_pack_modules(&cfg("CONFIG_BLK_DEV_LOOP=y\n"), true).unwrap_err().to_string();
    assert!(e.contains("CONFIG_EXT4_FS is not set"), "{e}");
    let e = lab_pack_modules(&debian, false).unwrap_err().to_string();
    assert!(e.contains("--modules-dir"), "{e}");
}
