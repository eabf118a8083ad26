//! Tests of the runner against fake QEMU binaries (shell scripts) that
//! print what a guest would, or hang, or fail.

use super::*;
use crate::accel::Accel;
use crate::arch::Arch;
use crate::cmdline::{CmdlineError, KernelCmdline};
use crate::outcome::Classification;
use loads::console_protocol::{encode, event, StreamKind, EVENT_HELLO, EVENT_POWEROFF};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::thread;

/// A directory with a fake x86_64 kernel, an initramfs, and a fake
/// "QEMU" shell script.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(script_body: &str) -> Fake {
        let dir = tempfile::tempdir().unwrap();
        let mut bz = vec![0u8; 0x240];
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
        bz[0x236] = 1;
        std::fs::write(dir.path().join("vmlinuz"), bz).unwrap();
        std::fs::write(dir.path().join("initrd"), b"").unwrap();
        let qemu = dir.path().join("fake-qemu");
        std::fs::write(&qemu, format!("#!/bin/sh\n{script_body}\n")).unwrap();
        std::fs::set_permissions(&qemu, std::fs::Permissions::from_mode(0o755)).unwrap();
        Fake { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn spec(&self) -> BootSpec {
        let mut profile = Arch::X86_64.profile();
        profile.qemu_binary = self.path("fake-qemu");
        let mut spec = BootSpec::new(profile, self.path("vmlinuz"), self.path("initrd")).unwrap();
        spec.timeouts = Timeouts {
            boot: Duration::from_secs(20),
            silence: Duration::from_secs(20),
            total: Duration::from_secs(40),
            after_panic: Duration::from_secs(1),
            after_poweroff: Duration::from_secs(1),
        };
        spec
    }

    /// Replaces the fake QEMU's script body.
    fn set_script(&self, body: &str) {
        std::fs::write(self.path("fake-qemu"), format!("#!/bin/sh\n{body}\n")).unwrap();
    }

    /// Writes `text` to a file the script can `cat`.
    fn text_file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// Boots, retrying while the just-written script is busy (ETXTBSY: a
/// test thread forked while another held the script open for writing).
fn boot_retrying(spec: &BootSpec) -> Result<BootOutcome, RunnerError> {
    for _ in 0..50 {
        match boot(spec) {
            Err(RunnerError::Spawn { source, .. }) if source.raw_os_error() == Some(libc::ETXTBSY) => {
                thread::sleep(Duration::from_millis(20))
            }
            other => return other,
        }
    }
    boot(spec)
}

fn stream(doc: &str) -> String {
    encode(StreamKind::Result, "t", doc).into_iter().map(|l| l + "\n").collect()
}

#[test]
fn full_stream_then_exit_is_ok_and_argv_arrives_intact() {
    let doc = r#"{"schema_version":1,"status":"complete"}"#;
    let fake = Fake::new("");
    let console = fake.text_file(
        "console.txt",
        &format!("Linux version 6.1\r\n{}\r\n{}{}\n", event(EVENT_HELLO, "v1"), stream(doc), event(EVENT_POWEROFF, "")),
    );
    let args = fake.path("args.txt");
    fake.set_script(&format!(
        "for a in \"$@\"; do printf '%s\\n' \"$a\"; done > '{}'\ncat '{}'\nexit 0",
        args.display(),
        console.display()
    ));
    let mut spec = fake.spec();
    spec.cmdline.extend_raw("quiet bootbench.label=\"a b\"").unwrap();
    let out = boot_retrying(&spec).unwrap();
    assert_eq!(out.classification, Classification::Ok, "{out:#?}");
    assert_eq!(out.document.as_deref(), Some(doc));
    assert_eq!(out.qemu_status, Some(0));
    assert!(out.timings.to_hello.is_some() && out.timings.to_poweroff.is_some());
    assert_eq!(out.events[0], ("hello".to_string(), "v1".to_string()));
    let got: Vec<String> = std::fs::read_to_string(&args).unwrap().lines().map(str::to_string).collect();
    let i = got.iter().position(|a| a == "-append").unwrap();
    assert_eq!(got[i + 1], r#"console=ttyS0 panic=-1 quiet bootbench.label="a b""#);
    assert_eq!(got, out.argv[1..]);
}

#[test]
fn panic_is_classified_without_waiting_for_the_total_timeout() {
    // `sleep` is a child of the script and holds the console open: the
    // whole process group must be killed.
    let fake = Fake::new(
        "echo '[    0.5] Linux version'\necho '[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs'\nsleep 60\n",
    );
    let t0 = Instant::now();
    let out = boot_retrying(&fake.spec()).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert_eq!(
        out.classification,
        Classification::BootFailure {
            line: "[    1.2] Kernel panic - not syncing: VFS: Unable to mount root fs".to_string()
        }
    );
    assert_eq!(out.qemu_status, None);
    assert!(out.notes.iter().any(|n| n.contains("of the kernel panic")), "{:?}", out.notes);
}

#[test]
fn silent_guest_is_a_boot_hang() {
    let fake = Fake::new("exec sleep 60");
    let mut spec = fake.spec();
    spec.timeouts.boot = Duration::from_millis(700);
    let t0 = Instant::now();
    let out = boot_retrying(&spec).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
    match out.classification {
        Classification::Hang { which: HangKind::Boot, detail } => assert!(detail.contains("hello"), "{detail}"),
        other => panic!("expected boot hang, got {other:?}"),
    }
}

#[test]
fn silence_after_hello_is_a_silence_hang() {
    let fake = Fake::new(&format!("echo '{}'\nexec sleep 60", event(EVENT_HELLO, "x")));
    let mut spec = fake.spec();
    spec.timeouts.boot = Duration::from_millis(300);
    spec.timeouts.silence = Duration::from_millis(800);
    let out = boot_retrying(&spec).unwrap();
    assert!(matches!(out.classification, Classification::Hang { which: HangKind::Silence, .. }), "{out:#?}");
    assert!(out.timings.to_hello.is_some());
}

#[test]
fn stuck_power_off_with_complete_stream_is_ok() {
    let fake = Fake::new("");
    let console = fake
        .text_file("c.txt", &format!("{}\n{}{}\n", event(EVENT_HELLO, "x"), stream("{}"), event(EVENT_POWEROFF, "")));
    fake.set_script(&format!("cat '{}'\nexec sleep 60", console.display()));
    let out = boot_retrying(&fake.spec()).unwrap();
    assert_eq!(out.classification, Classification::Ok);
    assert!(out.notes.iter().any(|n| n.contains("poweroff event")), "{:?}", out.notes);
}

#[test]
fn silence_after_a_complete_result_is_ok_with_the_hang_recorded_beside_it() {
    // The guest printed its whole result, then hung before power-off (a
    // late module load or upload stuck): the result is kept, not retried
    // as a hang.
    let fake = Fake::new("");
    let console = fake.text_file("c.txt", &format!("{}\n{}", event(EVENT_HELLO, "x"), stream("{}")));
    fake.set_script(&format!("cat '{}'\nexec sleep 60", console.display()));
    let mut spec = fake.spec();
    spec.timeouts.silence = Duration::from_millis(800);
    let out = boot_retrying(&spec).unwrap();
    assert_eq!(out.classification, Classification::Ok, "{out:#?}");
    assert_eq!(out.document.as_deref(), Some("{}"));
    let late = out.late_failure.as_deref().unwrap_or_default();
    assert!(late.contains("hang (silence)") && late.contains("no console output"), "{late}");
}

#[test]
fn results_port_repairs_a_damaged_console_stream() {
    let doc = "p".repeat(2 * loads::console_protocol::CHUNK_BYTES + 100);
    let lines = encode(StreamKind::Result, "t", &doc);
    let fake = Fake::new("");
    let mut partial = format!("{}\n", event(EVENT_HELLO, "x"));
    for (i, l) in lines.iter().enumerate() {
        if i != 2 {
            partial.push_str(l);
            partial.push('\n');
        }
    }
    let console = fake.text_file("c.txt", &partial);
    let full = fake.text_file("full.txt", &stream(&doc));
    // Like QEMU, the script creates the file named in the -chardev option.
    fake.set_script(&format!(
        "for a in \"$@\"; do case \"$a\" in file,id=port0,path=*) port=\"${{a#file,id=port0,path=}}\";; esac; done\ncat '{}' > \"$port\"\ncat '{}'",
        full.display(),
        console.display()
    ));
    let mut spec = fake.spec();
    let port = fake.path("results.port");
    std::fs::write(&port, "stale").unwrap();
    spec.results_port = Some(port.clone());
    let out = boot_retrying(&spec).unwrap();
    assert_eq!(out.classification, Classification::Ok, "{out:#?}");
    assert_eq!(out.document.as_deref(), Some(doc.as_str()));
    assert!(out.argv.iter().any(|a| a.ends_with(&format!("name={RESULTS_PORT_NAME}"))));
    assert!(out.argv.contains(&"console=ttyS0 panic=-1 bootbench.port=org.bootbench.results".to_string()));
    // A cmdline naming another port contradicts the spec.
    let mut other = spec.clone();
    other.cmdline.push(PORT_CMDLINE_KEY, "elsewhere").unwrap();
    assert!(matches!(other.qemu_command(), Err(RunnerError::Cmdline(CmdlineError::DuplicateKey { .. }))));

    // Without the port the same console is incomplete, naming chunk 2.
    fake.set_script(&format!("cat '{}'", console.display()));
    spec.results_port = None;
    match boot_retrying(&spec).unwrap().classification {
        Classification::Incomplete { detail } => assert!(detail.contains("missing [2]"), "{detail}"),
        other => panic!("expected incomplete, got {other:?}"),
    }
}

#[test]
fn workload_results_and_damaged_streams_reach_the_outcome() {
    // The recorded boot of two workloads, with hackbench's chunk 3 and the
    // alive event damaged by printk lines landing in them.
    let recorded = include_str!("../fixtures/streams.txt");
    let mut console = String::new();
    for line in recorded.split_inclusive('\n') {
        let Some(rest) = line.strip_prefix("@@BOOTBENCH ") else {
            console.push_str(line);
            continue;
        };
        if rest.starts_with("W ") && rest.contains(" 3/5 ") || rest.starts_with("EVENT alive ") {
            console.push_str(&format!("{}[ 40.1] printk\r\n{}", &line[..60], &line[60..]));
        } else {
            console.push_str(line);
        }
    }
    let fake = Fake::new("");
    let c = fake.text_file("c.txt", &console);
    fake.set_script(&format!("cat '{}'", c.display()));
    let out = boot_retrying(&fake.spec()).unwrap();
    assert_eq!(out.classification, Classification::Ok, "{out:#?}");
    let doc: loads::schema::RunDocument = serde_json::from_str(out.document.as_deref().unwrap()).unwrap();
    let fork: loads::schema::WorkloadResult = serde_json::from_str(&out.workload_results[0]).unwrap();
    assert_eq!((out.workload_results.len(), &fork), (1, &doc.workloads[0]));
    assert!(
        out.notes.iter().any(|n| n.starts_with("a workload's result is not kept: workload stream ")
            && n.ends_with("is incomplete: 0 of 5 chunks missing [], 1 damaged [3]")),
        "{:?}",
        out.notes
    );
    assert!(
        out.notes.iter().any(|n| n.starts_with("ignored 1 event lines that fail their checksum")),
        "{:?}",
        out.notes
    );
    // Serialised without the field (an older outcome), it reads back empty.
    let mut j = serde_json::to_value(&out).unwrap();
    j.as_object_mut().unwrap().remove("workload_results");
    assert!(serde_json::from_value::<BootOutcome>(j).unwrap().workload_results.is_empty());
}

#[test]
fn qemu_failing_before_hello_keeps_its_stderr() {
    let fake = Fake::new("echo 'qemu-system-x86_64: could not load kernel' >&2\nexit 1");
    let out = boot_retrying(&fake.spec()).unwrap();
    match &out.classification {
        Classification::QemuFailure { status: Some(1), detail } => {
            assert!(detail.contains("could not load kernel"), "{detail}")
        }
        other => panic!("expected qemu failure, got {other:?}"),
    }
    assert!(out.qemu_stderr.contains("could not load kernel"));
}

#[test]
fn missing_binary_is_a_clear_error() {
    let fake = Fake::new("");
    let mut spec = fake.spec();
    spec.profile.qemu_binary = PathBuf::from("qemu-system-does-not-exist");
    let err = boot(&spec).unwrap_err();
    assert_eq!(
        err.to_string(),
        "QEMU binary 'qemu-system-does-not-exist' not found; run scripts/setup to install QEMU"
    );
    assert!(matches!(qemu_version(Path::new("qemu-system-does-not-exist")), Err(RunnerError::QemuNotFound { .. })));
}

#[test]
fn icount_boots_are_derandomised_unless_the_cmdline_says_otherwise() {
    let fake = Fake::new("");
    let mut spec = fake.spec();
    let appended = |spec: &BootSpec| {
        let argv = spec.qemu_command().unwrap().argv();
        let i = argv.iter().position(|a| a == "-append").unwrap();
        argv[i + 1].to_string_lossy().into_owned()
    };
    spec.accel = Accel::Tcg;
    assert_eq!(appended(&spec), "console=ttyS0 panic=-1", "real-clock boots keep their randomisation");
    spec.accel = Accel::Icount { shift: 0 };
    assert_eq!(appended(&spec), "console=ttyS0 panic=-1 nokaslr norandmaps randomize_kstack_offset=off");
    // The user's own choice of a key stands, and is not duplicated.
    spec.cmdline.push("randomize_kstack_offset", "on").unwrap();
    assert_eq!(appended(&spec), "console=ttyS0 panic=-1 randomize_kstack_offset=on nokaslr norandmaps");
    // No room left for the words: a clear error naming the word, no boot.
    spec.cmdline = KernelCmdline::new("console=ttyS0 panic=-1".len() + 1).unwrap();
    spec.cmdline.extend_raw("console=ttyS0 panic=-1").unwrap();
    match spec.qemu_command() {
        Err(RunnerError::Cmdline(CmdlineError::TooLong { word, .. })) => assert_eq!(word, "nokaslr"),
        other => panic!("expected a too-long cmdline, got {other:?}"),
    }
}

#[test]
fn spec_checks_console_and_kernel_arch() {
    let fake = Fake::new("");
    let mut spec = fake.spec();
    spec.profile = Arch::Ppc64le.profile();
    spec.cmdline = spec.profile.base_cmdline().unwrap();
    assert!(matches!(spec.qemu_command(), Err(RunnerError::Kernel(_))));
    let mut spec = fake.spec();
    spec.cmdline = KernelCmdline::new(2048).unwrap();
    spec.cmdline.push("console", "tty0").unwrap();
    assert!(matches!(spec.qemu_command(), Err(RunnerError::NoConsole { .. })));
}

#[test]
fn version_of_a_fake_binary() {
    let fake = Fake::new("echo 'QEMU emulator version 10.0.2'\necho 'Copyright'");
    let bin = fake.path("fake-qemu");
    let mut v = qemu_version(&bin);
    for _ in 0..50 {
        match &v {
            Err(RunnerError::Spawn { source, .. }) if source.raw_os_error() == Some(libc::ETXTBSY) => {
                thread::sleep(Duration::from_millis(20));
                v = qemu_version(&bin);
            }
            _ => break,
        }
    }
    assert_eq!(v.unwrap(), "QEMU emulator version 10.0.2");
}

/// A directory whose filesystem takes O_DIRECT: the temp dir, or beside
/// the sources when the temp dir is a tmpfs.
fn direct_io_dir() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    if crate::disk_io::direct_io_check(t.path()).is_ok() {
        return t;
    }
    let d = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
    crate::disk_io::direct_io_check(d.path()).expect("no directory here takes O_DIRECT");
    d
}

/// The disk probe of a fake QEMU, again while its script is busy being
/// written by another test's fork.
fn probe_fake(bin: &Path, dir: &Path, limit: Duration) -> DiskIoProbe {
    let mut p = probe_disk_io_within(bin, dir, limit);
    for _ in 0..50 {
        if !p.aio.iter().any(|(_, r)| r.as_ref().is_err_and(|e| e.contains("Text file busy"))) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
        p = probe_disk_io_within(bin, dir, limit);
    }
    p
}

#[test]
fn disk_probe_tries_engines_in_order_until_qemu_opens_one() {
    let fake = Fake::new("");
    let args = fake.path("args");
    // Refuses io_uring as a QEMU built without it does; takes the others
    // only when told to quit on its monitor.
    fake.set_script(&format!(
        "echo \"$@\" >> {args}\n\
         case \"$9\" in *aio=io_uring*) echo \"$0: -drive $9: aio=io_uring was specified, but is not supported in this build.\" >&2; exit 1;; esac\n\
         read line; [ \"$line\" = quit ] && exit 0; echo 'no quit' >&2; exit 3",
        args = args.display()
    ));
    let dir = direct_io_dir();
    let p = probe_fake(&fake.path("fake-qemu"), dir.path(), Duration::from_secs(10));
    assert_eq!(p.direct_io, Ok(()));
    assert_eq!(
        p.aio,
        [
            (DiskAio::IoUring, Err("aio=io_uring was specified, but is not supported in this build.".to_string())),
            (DiskAio::Native, Ok(())),
        ],
        "stops at the first engine that works"
    );
    let calls = std::fs::read_to_string(&args).unwrap();
    let last = calls.lines().last().unwrap();
    assert!(last.starts_with("-machine none -nodefaults -display none -monitor stdio -drive file="), "{last}");
    assert!(last.ends_with(",format=raw,if=none,id=probe0,cache=none,aio=native"), "{last}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the probe image is removed");
    let c = crate::disk_io::decide(&p);
    assert_eq!((c.cache, c.aio), (crate::disk_io::DiskCache::None, DiskAio::Native));
}

#[test]
fn disk_probe_of_a_qemu_that_never_quits_or_fails_silently() {
    let fake = Fake::new("sleep 30");
    let dir = direct_io_dir();
    let p = probe_fake(&fake.path("fake-qemu"), dir.path(), Duration::from_millis(300));
    assert_eq!(p.aio.len(), 3, "{p:?}");
    assert!(
        p.aio.iter().all(|(_, r)| r.as_ref().is_err_and(|e| e.contains("did not open the disk and quit"))),
        "{p:?}"
    );
    fake.set_script("exit 1");
    let p = probe_fake(&fake.path("fake-qemu"), dir.path(), Duration::from_secs(10));
    assert!(p.aio.iter().all(|(_, r)| r.as_ref().is_err_and(|e| e.contains("said nothing"))), "{p:?}");
    assert_eq!(crate::disk_io::decide(&p).cache, crate::disk_io::DiskCache::Writeback);
}

#[test]
fn disk_probe_runs_no_qemu_where_direct_io_is_pointless() {
    let shm = Path::new("/dev/shm");
    if crate::disk_io::direct_io_check(shm).is_ok() {
        return; // no tmpfs here to try
    }
    let fake = Fake::new("");
    let ran = fake.path("ran");
    fake.set_script(&format!("touch {}", ran.display()));
    let p = probe_disk_io(&fake.path("fake-qemu"), shm);
    assert!(p.direct_io.is_err() && p.aio.is_empty(), "{p:?}");
    assert!(!ran.exists(), "QEMU was run for a tmpfs directory");
}
