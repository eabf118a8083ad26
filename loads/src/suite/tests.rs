//! Tests of suites, the built-in suites and the cmdline keys.

use super::*;

#[test]
fn builtins_are_valid() {
    for n in BUILTIN_SUITES {
        Suite::builtin(n).unwrap().validate().unwrap();
    }
    assert!(matches!(Suite::builtin("huge"), Err(SuiteError::UnknownSuite(_))));
}

#[test]
fn cmdline_overrides_apply() {
    let cfg = CmdlineConfig::parse(
        "console=ttyS0 panic=-1 bootbench.iterations=3 bootbench.warmup=0 bootbench.fork.count=77 bootbench.accel=tcg",
    )
    .unwrap();
    let s = cfg.apply(Suite::builtin("quick").unwrap()).unwrap();
    assert_eq!(s.iterations, 3);
    assert_eq!(s.warmup, 0);
    assert_eq!(s.workloads[0].params["count"], serde_json::json!(77));
    assert_eq!(cfg.accel.as_deref(), Some("tcg"));
}

#[test]
fn unknown_key_is_an_error_naming_it() {
    let e = CmdlineConfig::parse("quiet bootbench.itrations=3").unwrap_err();
    assert!(e.to_string().contains("bootbench.itrations"), "{e}");
    let e = CmdlineConfig::parse("bootbench.nosuch.param=1").unwrap_err();
    assert!(matches!(e, SuiteError::UnknownKey { .. }));
}

#[test]
fn bad_values_are_errors_naming_key_and_value() {
    for (line, key) in [
        ("bootbench.iterations=0", "bootbench.iterations"),
        ("bootbench.iterations=many", "bootbench.iterations"),
        ("bootbench.accel=warp", "bootbench.accel"),
        ("bootbench.suite=huge", "bootbench.suite"),
        ("bootbench.workloads=fork,nope", "bootbench.workloads"),
        ("bootbench.watchdog=", "bootbench.watchdog"),
    ] {
        let e = CmdlineConfig::parse(line).unwrap_err().to_string();
        assert!(e.contains(key), "{line}: {e}");
    }
}

#[test]
fn upload_and_network_keys_parse() {
    let cfg = CmdlineConfig::parse(
        "bootbench.upload=http://10.0.2.2:8080 bootbench.token=abc bootbench.ip=10.0.2.15/24 \
         bootbench.gw=10.0.2.2 bootbench.dns=10.0.2.3,1.1.1.1 bootbench.iface=eth1 \
         bootbench.upload_attempts=3 bootbench.upload_timeout=5",
    )
    .unwrap();
    assert_eq!(cfg.upload.as_deref(), Some("http://10.0.2.2:8080"));
    assert_eq!(cfg.token.as_deref(), Some("abc"));
    assert_eq!(cfg.ip, Some(IpSetting::Static { addr: [10, 0, 2, 15].into(), prefix: 24 }));
    assert_eq!(cfg.gw, Some([10, 0, 2, 2].into()));
    assert_eq!(cfg.dns, Some(vec![[10, 0, 2, 3].into(), [1, 1, 1, 1].into()]));
    assert_eq!(cfg.iface.as_deref(), Some("eth1"));
    assert_eq!((cfg.upload_attempts, cfg.upload_timeout_s), (Some(3), Some(5)));
    let cfg =
        CmdlineConfig::parse("bootbench.upload=https://lab.example/bb bootbench.token=t bootbench.ip=dhcp").unwrap();
    assert_eq!(cfg.ip, Some(IpSetting::Dhcp));
    let cfg = CmdlineConfig::parse("bootbench.upload=http://h bootbench.token=t bootbench.ip=kernel").unwrap();
    assert_eq!(cfg.ip, Some(IpSetting::Kernel));
}

#[test]
fn bad_upload_and_network_values_name_the_key() {
    let up = "bootbench.upload=http://10.0.2.2:1 bootbench.token=t";
    for (extra, key, word) in [
        ("bootbench.ip=10.0.2.15", "bootbench.ip", "ADDR/PREFIX"),
        ("bootbench.ip=10.0.2.300/24", "bootbench.ip", "not an IPv4"),
        ("bootbench.ip=10.0.2.15/33", "bootbench.ip", "prefix"),
        ("bootbench.gw=router", "bootbench.gw", "not an IPv4"),
        ("bootbench.dns=1.1.1.1,x", "bootbench.dns", "'x'"),
        ("bootbench.dns=1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4", "bootbench.dns", "at most 3"),
        ("bootbench.iface=eth0/x", "bootbench.iface", "interface name"),
        ("bootbench.upload_attempts=0", "bootbench.upload_attempts", "at least 1"),
        ("bootbench.upload_attempts=99", "bootbench.upload_attempts", "at most 20"),
        ("bootbench.upload_timeout=0", "bootbench.upload_timeout", "at least 1"),
    ] {
        let e = CmdlineConfig::parse(&format!("{up} {extra}")).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(word), "{extra}: {e}");
    }
    for (line, word) in [
        ("bootbench.upload=ftp://h bootbench.token=t", "http"),
        ("bootbench.upload=10.0.2.2:8080 bootbench.token=t", "not a URL"),
        ("bootbench.upload=http://u:p@h/ bootbench.token=t", "credentials"),
        ("bootbench.upload=http://h/?x=1 bootbench.token=t", "query"),
    ] {
        let e = CmdlineConfig::parse(line).unwrap_err().to_string();
        assert!(e.contains("bootbench.upload") && e.contains(word), "{line}: {e}");
    }
    // The token may come from the initramfs's secrets segment instead.
    assert_eq!(CmdlineConfig::parse("bootbench.upload=http://h").unwrap().token, None);
    let e = CmdlineConfig::parse("bootbench.ip=dhcp").unwrap_err().to_string();
    assert!(e.contains("bootbench.ip") && e.contains("bootbench.upload"), "{e}");
}

#[test]
fn storage_keys_parse() {
    let cfg = CmdlineConfig::parse(
        "bootbench.scratch=/dev/vda bootbench.scratch_fs=ext4 bootbench.swap=/dev/vdb bootbench.iosched=mq-deadline",
    )
    .unwrap();
    assert_eq!(cfg.scratch.as_deref(), Some("/dev/vda"));
    assert_eq!(cfg.scratch_fs.as_deref(), Some("ext4"));
    assert_eq!(cfg.swap.as_deref(), Some("/dev/vdb"));
    assert_eq!(cfg.iosched.as_deref(), Some("mq-deadline"));
    assert_eq!(CmdlineConfig::parse("bootbench.alive=10").unwrap().alive_s, Some(10));
    assert_eq!(CmdlineConfig::parse("bootbench.alive=2").unwrap().alive_s, Some(2));
    for bad_alive in ["bootbench.alive=1", "bootbench.alive=3601", "bootbench.alive=1m"] {
        let e = CmdlineConfig::parse(bad_alive).unwrap_err().to_string();
        assert!(e.contains("bootbench.alive"), "{e}");
    }
    let cfg = CmdlineConfig::parse("bootbench.zram=67108864").unwrap();
    assert_eq!(cfg.zram_bytes, Some(64 << 20));
    for bad_size in ["bootbench.zram=4096", "bootbench.zram=64M", "bootbench.zram=-1"] {
        let e = CmdlineConfig::parse(bad_size).unwrap_err().to_string();
        assert!(e.contains("bootbench.zram"), "{e}");
    }
    let cfg = CmdlineConfig::parse("bootbench.swap=/dev/vda").unwrap();
    assert_eq!((cfg.scratch, cfg.swap.as_deref()), (None, Some("/dev/vda")));
    assert_eq!(cfg.pack, None);
    let cfg = CmdlineConfig::parse(&format!("bootbench.pack={PACK_SERIAL}")).unwrap();
    assert_eq!(cfg.pack.as_deref(), Some(PACK_SERIAL));
    for s in IO_SCHEDULERS {
        CmdlineConfig::parse(&format!("bootbench.scratch=/dev/vda bootbench.iosched={s}")).unwrap();
    }
}

#[test]
fn bad_storage_keys_name_key_and_problem() {
    for (line, key, word) in [
        ("bootbench.scratch=vda", "bootbench.scratch", "/dev/NAME"),
        ("bootbench.scratch=/dev/", "bootbench.scratch", "/dev/NAME"),
        ("bootbench.scratch=/dev/../etc", "bootbench.scratch", "/dev/NAME"),
        ("bootbench.swap=/dev/disk/by-id/x", "bootbench.swap", "/dev/NAME"),
        ("bootbench.scratch=/dev/vda bootbench.scratch_fs=Ext4!", "bootbench.scratch_fs", "filesystem type"),
        ("bootbench.scratch=/dev/vda bootbench.iosched=cfq", "bootbench.iosched", "mq-deadline, kyber, bfq"),
        ("bootbench.iosched=bfq", "bootbench.iosched", "bootbench.scratch"),
        ("bootbench.scratch_fs=xfs", "bootbench.scratch_fs", "bootbench.scratch"),
        ("bootbench.scratch=/dev/vda bootbench.swap=/dev/vda", "bootbench.swap", "cannot also be"),
        ("bootbench.pack=", "bootbench.pack", "value is required"),
        ("bootbench.pack=/dev/vdc", "bootbench.pack", "disk serial"),
        ("bootbench.pack=twenty-one-characters", "bootbench.pack", "disk serial"),
    ] {
        let e = CmdlineConfig::parse(line).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(word), "{line}: {e}");
    }
}

#[test]
fn quoted_words_split_like_the_kernel() {
    assert_eq!(split_cmdline(r#"a "b c" d="e f"  g"#), vec!["a", "b c", "d=e f", "g"]);
}

#[test]
fn suite_file_errors_name_the_file() {
    let e = Suite::from_json("my.json", r#"{"name":"x","workloads":[],"bogus":1}"#).unwrap_err();
    assert!(e.to_string().contains("my.json"));
    let e = Suite::from_json("my.json", r#"{"name":"x","workloads":[]}"#).unwrap_err();
    assert!(matches!(e, SuiteError::Empty(_)));
    let e = Suite::from_json("s", r#"{"name":"x","workloads":[{"name":"nope"}]}"#).unwrap_err();
    assert!(e.to_string().contains("nope"));
}

/// Every numeric cmdline key with the range [`LIMITS`] gives it.
fn numeric_keys() -> Vec<(&'static str, (u64, u64))> {
    vec![
        ("iterations", LIMITS.iterations),
        ("warmup", LIMITS.warmup),
        ("seed", (0, u64::MAX)),
        ("watchdog", LIMITS.watchdog_s),
        ("upload_attempts", LIMITS.upload_attempts),
        ("upload_timeout", LIMITS.upload_timeout_s),
        ("alive", LIMITS.alive_s),
        ("zram", LIMITS.zram_bytes),
    ]
}

/// The cmdline a numeric key needs around it to be legal on its own.
fn with_companions(key: &str, value: &str) -> String {
    match key {
        "upload_attempts" | "upload_timeout" => {
            format!("bootbench.upload=http://10.0.2.2:8080 bootbench.token=t bootbench.{key}={value}")
        }
        _ => format!("bootbench.{key}={value}"),
    }
}

/// The value a parsed config holds for `key`.
fn parsed_value(cfg: &CmdlineConfig, key: &str) -> Option<u64> {
    match key {
        "iterations" => cfg.iterations.map(u64::from),
        "warmup" => cfg.warmup.map(u64::from),
        "seed" => cfg.seed,
        "watchdog" => cfg.watchdog_s,
        "upload_attempts" => cfg.upload_attempts.map(u64::from),
        "upload_timeout" => cfg.upload_timeout_s,
        "alive" => cfg.alive_s,
        "zram" => cfg.zram_bytes,
        _ => None,
    }
}

/// Checks one value of one key: either a clear error naming the key, or a
/// value inside its range that the suite then accepts.
fn check_extreme(key: &str, range: (u64, u64), value: &str) {
    match CmdlineConfig::parse(&with_companions(key, value)) {
        Ok(cfg) => {
            let v = parsed_value(&cfg, key).unwrap_or_else(|| panic!("bootbench.{key}={value} parsed to nothing"));
            assert!((range.0..=range.1).contains(&v), "bootbench.{key}={value} accepted out of {range:?}");
            assert_eq!(value.parse::<u64>().ok(), Some(v), "bootbench.{key}={value} changed on the way");
            let suite = cfg.apply(Suite::builtin("quick").unwrap());
            assert!(suite.is_ok(), "bootbench.{key}={value}: {suite:?}");
        }
        Err(SuiteError::BadValue { key: k, why, .. }) => {
            assert_eq!(k, format!("bootbench.{key}"), "the error names another key");
            assert!(!why.is_empty());
            if let Ok(v) = value.parse::<u64>() {
                assert!(!(range.0..=range.1).contains(&v), "bootbench.{key}={value} refused inside {range:?}: {why}");
            }
        }
        Err(e) => panic!("bootbench.{key}={value}: unexpected error {e}"),
    }
}

#[test]
fn every_numeric_key_at_its_extremes_is_accepted_in_range_or_refused_by_name() {
    for (key, (lo, hi)) in numeric_keys() {
        let mut values: Vec<String> =
            [0, 1, lo, hi, u64::from(u32::MAX), u64::MAX, i64::MAX as u64].iter().map(u64::to_string).collect();
        values.extend([lo.saturating_sub(1), hi.saturating_add(1)].iter().map(u64::to_string));
        values.extend(
            ["-1", "18446744073709551616", "99999999999999999999999", "1e3", "0x10", " 5", "+5"].map(String::from),
        );
        for v in &values {
            check_extreme(key, (lo, hi), v);
        }
    }
    // The value a new user tried (issue 14): refused, not a panic in PID 1.
    let e = CmdlineConfig::parse("bootbench.watchdog=18446744073709551615 bootbench.workloads=fork").unwrap_err();
    assert!(e.to_string().contains("must be at most 604800"), "{e}");
}

proptest::proptest! {
    #[test]
    fn any_number_for_any_numeric_key_is_in_range_or_refused(value in proptest::num::u64::ANY, k in 0usize..8) {
        let keys = numeric_keys();
        let (key, range) = keys[k % keys.len()];
        check_extreme(key, range, &value.to_string());
    }
}

#[test]
fn suite_files_out_of_range_are_refused_naming_the_field() {
    let mut s = Suite::builtin("quick").unwrap();
    s.watchdog_s = u64::MAX;
    let e = s.validate().unwrap_err();
    assert!(e.to_string().contains("watchdog_s = 18446744073709551615 is out of range"), "{e}");
    let mut s = Suite::builtin("quick").unwrap();
    s.workloads[0].iterations = Some(0);
    let e = s.validate().unwrap_err();
    assert!(e.to_string().contains("workloads[0].iterations = 0"), "{e}");
    let json = r#"{"name":"x","watchdog_s":0,"workloads":[{"name":"fork"}]}"#;
    let e = Suite::from_json("x.json", json).unwrap_err();
    assert!(e.to_string().contains("watchdog_s = 0"), "{e}");
}

#[test]
fn test_faults_are_named_and_checked() {
    let cfg = CmdlineConfig::parse("bootbench.test_fault=segv,orphans").unwrap();
    assert_eq!(cfg.test_faults, ["segv", "orphans"]);
    let e = CmdlineConfig::parse("bootbench.test_fault=meltdown").unwrap_err();
    assert!(e.to_string().contains("bootbench.test_fault") && e.to_string().contains("init-panic"), "{e}");
}

#[test]
fn the_lava_switch_parses_and_a_bad_value_names_the_key() {
    assert_eq!(CmdlineConfig::parse("console=ttyS0").unwrap().lava, None);
    assert_eq!(CmdlineConfig::parse("bootbench.lava=1").unwrap().lava, Some(true));
    assert_eq!(CmdlineConfig::parse("bootbench.lava=0").unwrap().lava, Some(false));
    let e = CmdlineConfig::parse("bootbench.lava=maybe").unwrap_err().to_string();
    assert!(e.contains("bootbench.lava") && e.contains("maybe") && e.contains("expected 0 or 1"), "{e}");
}

#[test]
fn lab_keys_parse() {
    let cfg = CmdlineConfig::parse(
        "bootbench.role=agent bootbench.lab=http://10.0.2.2:8080/bb bootbench.machine=box-1.lab_a \
         bootbench.ip=dhcp bootbench.token=t",
    )
    .unwrap();
    assert_eq!(cfg.role(), Role::Agent);
    assert_eq!(cfg.lab.as_deref(), Some("http://10.0.2.2:8080/bb"));
    assert_eq!(cfg.machine.as_deref(), Some("box-1.lab_a"));
    assert_eq!(cfg.ip, Some(IpSetting::Dhcp));
    let cfg = CmdlineConfig::parse(
        "bootbench.role=candidate bootbench.after=reboot bootbench.netconsole=10.0.2.2:6666 \
         bootbench.hw_watchdog=300 bootbench.lab_job=18446744073709551615 bootbench.iface=eth1",
    )
    .unwrap();
    assert_eq!(cfg.role(), Role::Candidate);
    assert_eq!(cfg.after, Some(AfterRun::Reboot));
    assert_eq!(cfg.netconsole, Some("10.0.2.2:6666".parse().unwrap()));
    assert_eq!(cfg.hw_watchdog(), Some(300));
    assert_eq!(cfg.lab_job, Some(u64::MAX));
    assert_eq!(CmdlineConfig::parse("bootbench.after=halt").unwrap().after, Some(AfterRun::Halt));
    assert_eq!(CmdlineConfig::parse("bootbench.after=poweroff").unwrap().after, Some(AfterRun::PowerOff));
    let off = CmdlineConfig::parse("bootbench.hw_watchdog=0").unwrap();
    assert_eq!((off.hw_watchdog_s, off.hw_watchdog()), (Some(0), None));
    let none = CmdlineConfig::parse("quiet").unwrap();
    assert_eq!((none.role(), none.after, none.hw_watchdog()), (Role::Candidate, None, None));
}

#[test]
fn bad_lab_values_name_the_key_and_the_problem() {
    let agent = "bootbench.role=agent bootbench.lab=http://10.0.2.2:1 bootbench.machine=box1";
    for (line, key, word) in [
        ("bootbench.role=server", "bootbench.role", "agent or candidate"),
        ("bootbench.role=agent bootbench.lab=ftp://h bootbench.machine=m", "bootbench.lab", "http"),
        ("bootbench.role=agent bootbench.lab=http://h bootbench.machine=a/b", "bootbench.machine", "machine name"),
        ("bootbench.role=agent bootbench.lab=http://h bootbench.machine=.x", "bootbench.machine", "machine name"),
        ("bootbench.role=agent bootbench.machine=m", "bootbench.lab", "needs bootbench.lab"),
        ("bootbench.role=agent bootbench.lab=http://h", "bootbench.machine", "needs"),
        ("bootbench.lab=http://h", "bootbench.lab", "role=agent"),
        ("bootbench.machine=m", "bootbench.machine", "role=agent"),
        ("bootbench.after=shutdown", "bootbench.after", "poweroff, reboot or halt"),
        ("bootbench.netconsole=10.0.2.2", "bootbench.netconsole", "IPV4:PORT"),
        ("bootbench.netconsole=10.0.2.2:0", "bootbench.netconsole", "1 to 65535"),
        ("bootbench.netconsole=10.0.2.2:65536", "bootbench.netconsole", "1 to 65535"),
        ("bootbench.netconsole=host:6666", "bootbench.netconsole", "not an IPv4"),
        ("bootbench.netconsole=255.255.255.255:6666", "bootbench.netconsole", "one host"),
        ("bootbench.hw_watchdog=3601", "bootbench.hw_watchdog", "at most 3600"),
        ("bootbench.hw_watchdog=-1", "bootbench.hw_watchdog", "whole number"),
        ("bootbench.lab_job=x", "bootbench.lab_job", "whole number"),
        ("bootbench.ip=dhcp", "bootbench.ip", "bootbench.role=agent"),
        ("bootbench.token=t", "bootbench.token", "bootbench.role=agent"),
    ] {
        let e = CmdlineConfig::parse(line).unwrap_err().to_string();
        assert!(e.contains(key) && e.contains(word), "{line}: {e}");
    }
    // What an agent or netconsole uses is accepted with them.
    CmdlineConfig::parse(&format!("{agent} bootbench.iface=eth0 bootbench.token=t")).unwrap();
    CmdlineConfig::parse("bootbench.netconsole=10.0.2.2:6666 bootbench.ip=dhcp").unwrap();
    let e = CmdlineConfig::parse(&format!("{agent} bootbench.upload_attempts=2")).unwrap_err().to_string();
    assert!(e.contains("bootbench.upload_attempts") && e.contains("bootbench.upload=URL"), "{e}");
}

#[test]
fn a_hardware_watchdog_must_outlast_two_alive_ticks() {
    // Default alive interval 60 s: 120 s is one late tick from a reset.
    let e = CmdlineConfig::parse("bootbench.hw_watchdog=120").unwrap_err().to_string();
    assert!(e.contains("bootbench.hw_watchdog") && e.contains("twice the alive interval (60 s)"), "{e}");
    assert_eq!(CmdlineConfig::parse("bootbench.hw_watchdog=121").unwrap().hw_watchdog(), Some(121));
    let e = CmdlineConfig::parse("bootbench.hw_watchdog=20 bootbench.alive=10").unwrap_err().to_string();
    assert!(e.contains("(10 s)"), "{e}");
    let cfg = CmdlineConfig::parse("bootbench.hw_watchdog=21 bootbench.alive=10").unwrap();
    assert_eq!(cfg.hw_watchdog(), Some(21));
    // Off needs no margin.
    CmdlineConfig::parse("bootbench.hw_watchdog=0 bootbench.alive=3600").unwrap();
}

/// Found by the `suite_json` and `cmdline` fuzz targets: serde_json's
/// default float parsing could read a number one ULP off, so a suite with
/// such a parameter had another sha256 after its canonical JSON was read
/// back (the guest records the sha256 of the suite it read).
#[test]
fn a_suites_numbers_keep_their_value_and_its_sha256_through_its_json() {
    for number in ["29999999999999999999999999999999999999", "5.9629039448892714e+84"] {
        let json = format!(r#"{{"name":"x","workloads":[{{"name":"fork","params":{{"n":{number}}}}}]}}"#);
        let s = Suite::from_json("x.json", &json).unwrap();
        let back = Suite::from_json("x.json", &s.to_json()).unwrap();
        assert_eq!(back, s, "{number}");
        assert_eq!(back.sha256(), s.sha256(), "{number}");
    }
}

#[test]
fn a_cmdline_refused_for_another_key_still_says_how_the_run_ends() {
    // The watchdog below twice the alive interval refuses the whole parse.
    let line = "console=ttyS0 bootbench.after=reboot bootbench.hw_watchdog=30";
    assert!(CmdlineConfig::parse(line).is_err());
    assert_eq!(AfterRun::from_raw_cmdline(line), Some(AfterRun::Reboot));
    assert_eq!(AfterRun::from_raw_cmdline("bootbench.after=halt bootbench.after=bogus"), Some(AfterRun::Halt));
    assert_eq!(AfterRun::from_raw_cmdline("bootbench.after=bogus xbootbench.after=reboot"), None);
    assert_eq!(AfterRun::from_raw_cmdline(""), None);
    // Words as the kernel splits them: quotes hold a word together.
    assert_eq!(AfterRun::from_raw_cmdline("\"bootbench.after=reboot\" bootbench.x=1"), Some(AfterRun::Reboot));
    assert_eq!(AfterRun::from_raw_cmdline("x=\"a bootbench.after=halt\""), None);
}

#[test]
fn a_scratch_filesystem_is_named_by_device_or_by_label_never_both() {
    let c = CmdlineConfig::parse("bootbench.scratch_label=bb-scratch bootbench.iosched=bfq").unwrap();
    assert_eq!((c.scratch_label.as_deref(), c.scratch.as_deref()), (Some("bb-scratch"), None));
    assert_eq!(c.iosched.as_deref(), Some("bfq"), "the scheduler applies to a labelled scratch filesystem too");
    for bad in ["", "seventeen-letters", "bb/scratch", "bb=x", "bb,x"] {
        let e = CmdlineConfig::parse(&format!("bootbench.scratch_label={bad}")).unwrap_err().to_string();
        assert!(e.contains("bootbench.scratch_label"), "{bad}: {e}");
    }
    assert!(CmdlineConfig::parse("bootbench.scratch_label=sixteen-letters").is_ok());
    let e = CmdlineConfig::parse("bootbench.scratch=/dev/vda bootbench.scratch_label=bb").unwrap_err().to_string();
    assert!(e.contains("not both"), "{e}");
    let e = CmdlineConfig::parse("bootbench.scratch_label=bb bootbench.scratch_fs=xfs").unwrap_err().to_string();
    assert!(e.contains("bootbench.scratch_fs") && e.contains("ext2, ext3 or ext4"), "{e}");
    assert!(CmdlineConfig::parse("bootbench.scratch_label=bb bootbench.scratch_fs=ext3").is_ok());
    let e = CmdlineConfig::parse("bootbench.scratch_fs=xfs").unwrap_err().to_string();
    assert!(e.contains("bootbench.scratch_label=LABEL"), "{e}");
}

#[test]
fn a_pack_from_a_pack_store_needs_its_label_and_its_sha256_and_is_not_the_scratch_filesystem() {
    let sha = "0f".repeat(32);
    let c = CmdlineConfig::parse(&format!("bootbench.pack_label=bb-packs bootbench.pack_sha256={sha}")).unwrap();
    assert_eq!(
        (c.pack_label.as_deref(), c.pack_sha256.as_deref(), c.pack.as_deref()),
        (Some("bb-packs"), Some(sha.as_str()), None)
    );
    for (line, says) in [
        ("bootbench.pack_label=bb-packs".to_string(), "needs bootbench.pack_sha256"),
        (format!("bootbench.pack_sha256={sha}"), "needs bootbench.pack_label"),
        (format!("bootbench.pack_label=bb bootbench.pack_sha256={sha} bootbench.pack=bootbench-pack"), "not both"),
        (
            format!("bootbench.pack_label=bb bootbench.pack_sha256={sha} bootbench.scratch_label=bb"),
            "cannot be the scratch",
        ),
        (format!("bootbench.pack_label=bb bootbench.pack_sha256={}", sha.to_uppercase()), "64 lower-case hex"),
        ("bootbench.pack_label=bb bootbench.pack_sha256=../../x".to_string(), "64 lower-case hex"),
        (format!("bootbench.pack_label=b/b bootbench.pack_sha256={sha}"), "volume label"),
    ] {
        let e = CmdlineConfig::parse(&line).unwrap_err().to_string();
        assert!(e.contains(says), "{line}: {e}");
    }
}
