//! The walking skeleton end to end: the Debian amd64 kernel boots the
//! appliance under TCG and the host gets a checked result in its envelope;
//! the initramfs reads back with GNU cpio and is reproducible; bad input of
//! every kind ends in a clear error naming the input.
//!
//! Boots are few and short (`--warmup 0`, small fork counts) and run one at
//! a time; each is checked for as much as it can show.

mod support;

use bootbench::boot::image::{self as boot_image, ImageSpec, RESULT_PORT_MODULES};
use bootbench::suite_choice::{apply_overrides, load_suite};
use loads::schema::{Better, Status};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::*;

/// A fork count small enough for a quick boot, and the cmdline word for it.
const FORK_COUNT: u64 = 200;

fn fork_count_word() -> String {
    format!("bootbench.fork.count={FORK_COUNT}")
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn default_kernel_boots_under_tcg_with_a_complete_checked_result() {
    let k = require_x86_64_boot();
    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let run = run_with_deadline(
        {
            let mut c =
                bootbench(["run", "--accel", "tcg", "--iterations", "2", "--warmup", "0", "--workloads", "fork"]);
            c.args(["--label", "skeleton"]);
            c.args(["--append", &fork_count_word(), "-o"]).arg(&out);
            c
        },
        BOOT_DEADLINE,
    );
    run.assert_success();
    // The table names the kernel and the metric with its unit.
    assert!(run.stdout.contains(&k.info.release) && run.stdout.contains("forks/s"), "{}", run.transcript());
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    assert_eq!(boot.label, "skeleton");
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert_eq!(doc.status, Status::Complete, "errors: {:?}", doc.errors);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    assert_eq!(doc.schema_version, loads::schema::SCHEMA_VERSION);

    // The workload: 2 iterations of `fork`, every metric with unit and direction.
    let names: Vec<&str> = doc.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["fork"], "--workloads fork must run fork alone");
    let fork = &doc.workloads[0];
    assert_eq!(fork.name, "fork");
    assert_eq!(fork.error, None);
    assert_eq!(fork.warmup, 0);
    assert_eq!(fork.params.get("count").and_then(|v| v.as_u64()), Some(FORK_COUNT), "{:?}", fork.params);
    assert_eq!(fork.iterations.len(), 2);
    for it in &fork.iterations {
        let rate = it.metrics.get("fork_rate").expect("fork_rate metric");
        assert_eq!((rate.unit.as_str(), rate.better), ("forks/s", Better::Higher));
        assert!(rate.value.is_finite() && rate.value > 0.0, "{rate:?}");
        let lat = it.metrics.get("fork_latency").expect("fork_latency metric");
        assert_eq!((lat.unit.as_str(), lat.better), ("us", Better::Lower));
        // Rate and latency describe the same forks.
        assert!((rate.value * lat.value / 1e6 - 1.0).abs() < 1e-6, "{rate:?} vs {lat:?}");
        assert_eq!(it.detail.get("forks").and_then(|v| v.as_u64()), Some(FORK_COUNT), "{:?}", it.detail);
    }

    // Provenance, as the guest saw it.
    let p = &doc.provenance;
    assert_eq!(p.kernel.release, k.info.release);
    for word in ["console=ttyS0", "panic=-1", "bootbench.accel=tcg", &fork_count_word()] {
        assert!(p.kernel.cmdline.split_whitespace().any(|w| w == word), "'{word}' not in {}", p.kernel.cmdline);
    }
    let m = &p.machine;
    assert_eq!((m.arch.as_str(), m.word_bits, m.endian.as_str()), ("x86_64", 64, "little"));
    assert_eq!(m.page_size, 4096);
    assert_eq!(m.cpus, 2);
    // 1 GiB of guest RAM, less what the kernel reserves.
    assert!(m.mem_bytes > 768 << 20 && m.mem_bytes <= 1 << 30, "mem_bytes {}", m.mem_bytes);
    assert_eq!(m.accel.as_deref(), Some("tcg"));
    assert!(!m.cpu_model.is_empty());
    assert!(!p.mitigations.is_empty(), "no mitigations recorded");
    assert!(p.mitigations.contains_key("spectre_v2"), "{:?}", p.mitigations.keys());
    assert_eq!(p.bootbench.version, env!("CARGO_PKG_VERSION"));
    assert!(!p.started_at.is_empty() && p.finished_at >= p.started_at, "{} .. {}", p.started_at, p.finished_at);
    // The guest cannot hash its own kernel; the host fills it in.
    let image_sha = sha256_file(&k.image());
    assert_eq!(p.kernel.image_sha256.as_deref(), Some(image_sha.as_str()));

    // Guest timings, in CLOCK_BOOTTIME seconds.
    let t = &doc.timings;
    assert!(t.init_start_s > 0.0, "{t:?}");
    let first = t.first_workload_s.expect("first_workload_s");
    let done = t.workloads_done_s.expect("workloads_done_s");
    assert!(t.init_start_s <= first && first <= done, "{t:?}");

    // PID 1 alone: nothing else in userspace while measuring.
    let quiet = fork.quiet.as_ref().expect("quiet observation");
    assert_eq!(quiet.other_userspace_tasks, 0, "{quiet:?}");
    assert!(quiet.measured_s > 0.0, "{quiet:?}");

    // The host envelope.
    assert!(boot.qemu.version.starts_with("QEMU emulator version"), "{}", boot.qemu.version);
    let argv = &boot.qemu.argv;
    assert!(argv[0].ends_with("qemu-system-x86_64"), "{argv:?}");
    for flag in ["-no-reboot", "-kernel", "-initrd", "-append"] {
        assert!(argv.iter().any(|a| a == flag), "{flag} missing from {argv:?}");
    }
    let kernel_arg = argv.iter().position(|a| a == "-kernel").map(|i| &argv[i + 1]);
    assert_eq!(kernel_arg.map(Path::new), Some(k.image().as_path()));
    assert_eq!(boot.cmdline, p.kernel.cmdline.trim(), "envelope cmdline and /proc/cmdline differ");
    assert_eq!(boot.kernel.image_sha256, image_sha);
    assert_eq!(boot.kernel.config_sha256.as_deref(), Some(sha256_file(&k.config()).as_str()));
    assert!(boot.kernel.package.as_deref().is_some_and(|p| p.contains(&k.info.version)), "{:?}", boot.kernel.package);
    assert_eq!((boot.machine.smp, boot.machine.mem_mib, boot.machine.accel.as_str()), (2, 1024, "tcg"));
    // The initramfs hash is the image's: the build is reproducible, so the
    // same spec built here gives the same bytes.
    let suite = apply_overrides(load_suite("quick", "x86_64").unwrap(), Some(2), Some(0), Some("fork")).unwrap();
    let spec = ImageSpec {
        arch: qemu::Arch::X86_64,
        suite,
        modules: RESULT_PORT_MODULES.iter().map(|s| s.to_string()).collect(),
        early_modules: Vec::new(),
        modules_dir: Some(k.modules_dir()),
        init: None,
        // What `run` packs for this kernel: a plain archive.
        compression: boot_image::DEFAULT_COMPRESSION,
    };
    assert_eq!(spec.compression, image::Compression::None);
    let rebuilt = boot_image::build(&spec, &dir.path().join("again.cpio")).expect("rebuild the initramfs");
    assert_eq!(boot.initramfs.sha256, rebuilt.sha256, "the envelope's initramfs hash is not the image's");
    assert_eq!(boot.initramfs.bytes, rebuilt.bytes);
    let hello = boot.boot.to_hello_s.expect("to_hello_s");
    assert!(hello > 0.0 && hello < boot.boot.wall_s, "{:?}", boot.boot);

    // Both channels delivered the stream, each on its own.
    let channel = |name: &str| boot.channels.iter().find(|c| c.name == name).cloned();
    let console = channel("console").expect("console channel report");
    assert!(console.intact, "console: {:?}", console.detail);
    let port = channel("port").expect("port channel report: the Debian kernel has virtio_console as a module");
    assert!(port.intact, "virtio results port: {:?}", port.detail);
    assert!(boot.console_log.contains("@@BOOTBENCH EVENT hello"));
    assert!(boot.console_log.contains("@@BOOTBENCH EVENT poweroff status=complete"));
}

/// Lists a newc archive with GNU cpio, `-v` for owners and dates.
fn cpio_list(archive: &[u8]) -> String {
    use std::io::Write;
    let mut child = Command::new("cpio")
        .args(["-t", "-v", "--numeric-uid-gid", "--quiet"])
        // Dates in UTC, so mtime 0 lists as 1970 whatever the local zone.
        .env("TZ", "UTC")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cannot run cpio");
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let data = archive.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().expect("cpio did not finish");
    writer.join().expect("writer thread").expect("cannot feed cpio");
    assert!(out.status.success(), "cpio -t failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("cpio listing is UTF-8")
}

/// Decompresses with the external tool (`gzip -dc`, `zstd -dc`).
fn decompress(tool: &str, path: &Path) -> Vec<u8> {
    let out = Command::new(tool).arg("-dc").arg(path).output().unwrap_or_else(|e| panic!("cannot run {tool}: {e}"));
    assert!(out.status.success(), "{tool} -dc {} failed: {}", path.display(), String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn image_cmd_line(out: &Path, compression: &str, modules_dir: &Path) -> CliRun {
    let mut c = bootbench(["image", "--compression", compression, "--modules", "virtio_console", "--modules-dir"]);
    c.arg(modules_dir).arg("-o").arg(out);
    let run = run_with_deadline(c, Duration::from_secs(900));
    run.assert_success();
    run
}

#[test]
#[ignore = "needs GNU cpio, zstd and the cached Debian kernel: run scripts/test"]
fn initramfs_reads_back_with_gnu_cpio_and_is_reproducible() {
    for tool in ["cpio", "gzip", "zstd"] {
        require_program(tool);
    }
    let k = default_kernel(bootbench::kernel::DebianArch::Amd64);
    let dir = scratch();
    let raw = dir.path().join("a.cpio");
    image_cmd_line(&raw, "none", &k.modules_dir());
    let listing = cpio_list(&std::fs::read(&raw).unwrap());
    let names: Vec<&str> = listing.lines().filter_map(|l| l.split_whitespace().last()).collect();
    let release = &k.info.release;
    for want in [
        "init".to_string(),
        "dev".into(),
        "dev/console".into(),
        "dev/null".into(),
        "etc/bootbench/suite.json".into(),
        "etc/bootbench/modules.load".into(),
        "work".into(),
        format!("lib/modules/{release}/kernel/drivers/char/virtio_console.ko"),
        format!("lib/modules/{release}/kernel/drivers/virtio/virtio_ring.ko"),
    ] {
        assert!(names.contains(&want.as_str()), "{want} not in the archive:\n{listing}");
    }
    // Sorted component by component, so a directory comes right before its children.
    let mut sorted = names.clone();
    sorted.sort_by_key(|n| n.split('/').collect::<Vec<_>>());
    assert_eq!(names, sorted, "entries are not sorted");
    for line in listing.lines() {
        // mode links uid gid size|major,minor date... name
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!((f[2], f[3]), ("0", "0"), "owner is not 0:0: {line}");
        assert!(line.contains("1970"), "mtime is not 0: {line}");
    }
    let console = listing.lines().find(|l| l.ends_with(" dev/console")).unwrap();
    assert!(console.starts_with('c') && console.contains("5,") && console.contains(" 1 "), "{console}");
    let null = listing.lines().find(|l| l.ends_with(" dev/null")).unwrap();
    assert!(null.starts_with('c') && null.contains("1,") && null.contains(" 3 "), "{null}");

    // What cpio extracts is what was packed.
    let x = dir.path().join("x");
    std::fs::create_dir(&x).unwrap();
    let st = Command::new("cpio")
        .args(["-i", "-d", "--quiet", "-F"])
        .arg(&raw)
        .current_dir(&x)
        .status()
        .expect("cannot run cpio -i");
    assert!(st.success());
    let init = bootbench::boot::init_build::build("x86_64-unknown-linux-gnu").expect("init build");
    assert_eq!(sha256_file(&x.join("init")), sha256_file(&init), "extracted init differs from the built one");
    let suite: loads::suite::Suite =
        serde_json::from_slice(&std::fs::read(x.join("etc/bootbench/suite.json")).unwrap()).unwrap();
    assert_eq!(suite, load_suite("quick", "x86_64").unwrap());
    let load = std::fs::read_to_string(x.join("etc/bootbench/modules.load")).unwrap();
    let order: Vec<&str> = load.lines().collect();
    let pos =
        |m: &str| order.iter().position(|l| l.ends_with(&format!("/{m}.ko"))).unwrap_or_else(|| panic!("{m}: {load}"));
    assert!(pos("virtio_ring") < pos("virtio_console"), "dependencies must load first:\n{load}");
    for rel in &order {
        assert!(x.join(rel).is_file(), "{rel} listed but not packed");
    }

    // Compressed forms read back with the external decompressors, and every
    // build of the same input gives the same bytes.
    for (compression, tool, ext) in [("gzip", "gzip", "gz"), ("zstd", "zstd", "zst")] {
        let a = dir.path().join(format!("a.cpio.{ext}"));
        let b = dir.path().join(format!("b.cpio.{ext}"));
        image_cmd_line(&a, compression, &k.modules_dir());
        image_cmd_line(&b, compression, &k.modules_dir());
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{compression} builds differ");
        assert_eq!(decompress(tool, &a), std::fs::read(&raw).unwrap(), "{compression} does not hold the raw archive");
    }
}

/// Boots with `append` for a failure case; returns the run and its one boot.
fn boot_expecting_failure(append: &str, extra: &[&str]) -> (CliRun, bootbench::results::BootRecord) {
    let dir = scratch();
    let out = dir.path().join("results.json");
    let mut c = bootbench(["run", "--iterations", "1", "--warmup", "0"]);
    c.args(extra).args(["--append", append, "-o"]).arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    assert_eq!(run.code(), Some(2), "a failed boot must exit 2:\n{}", run.transcript());
    let boot = only_boot(&out, &run);
    (run, boot)
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn unknown_cmdline_key_is_reported_by_the_guest_and_fails_the_run() {
    require_x86_64_boot();
    let _boot = boot_lock();
    let (run, boot) = boot_expecting_failure("bootbench.itrations=3", &[]);
    // The boot itself worked: the init reported the error and powered off.
    assert_eq!(boot.boot.classification, "ok", "{:?}", boot.boot.detail);
    let doc = boot.result.expect("the guest document");
    assert_eq!(doc.status, Status::Error);
    assert!(doc.workloads.is_empty(), "nothing may run with a bad configuration");
    let err = doc.errors.iter().find(|e| e.location == "config").expect("a config error");
    assert!(err.message.contains("unknown kernel cmdline key 'bootbench.itrations'"), "{}", err.message);
    assert!(boot.console_log.contains("configuration error: unknown kernel cmdline key 'bootbench.itrations'"));
    assert!(
        run.stdout.contains("bootbench.itrations") || run.stderr.contains("bootbench.itrations"),
        "{}",
        run.transcript()
    );
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn bad_cmdline_value_is_reported_by_the_guest_and_fails_the_run() {
    require_x86_64_boot();
    let _boot = boot_lock();
    let (run, boot) = boot_expecting_failure("bootbench.iterations=zero", &[]);
    assert_eq!(boot.boot.classification, "ok", "{:?}", boot.boot.detail);
    let doc = boot.result.expect("the guest document");
    assert_eq!(doc.status, Status::Error);
    let err = doc.errors.iter().find(|e| e.location == "config").expect("a config error");
    let want = "bad value 'zero' for kernel cmdline key 'bootbench.iterations'";
    assert!(err.message.contains(want), "{}", err.message);
    assert!(boot.console_log.contains(want));
    assert!(run.stdout.contains("zero") || run.stderr.contains("zero"), "{}", run.transcript());
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn kernel_panic_is_classified_at_once_not_at_the_timeout() {
    require_x86_64_boot();
    let _boot = boot_lock();
    // No /init to run: the kernel looks for a root device, finds none and
    // panics. The timeouts are long, so only the panic line can end it early.
    let limits = ["--timeout-boot", "900", "--timeout-silence", "900", "--timeout-total", "1800"];
    let (run, boot) = boot_expecting_failure("rdinit=/nonexistent", &limits);
    // The kernel's own panic, named apart: no init ever ran (fault matrix
    // case 3).
    assert_eq!(boot.boot.classification, "boot_failure", "{:?}\n{}", boot.boot.detail, boot.console_log);
    let detail = boot.boot.detail.clone().unwrap_or_default();
    assert!(detail.contains("Kernel panic - not syncing") && detail.contains("started no init"), "{detail}");
    eprintln!(
        "fault-matrix: 3 no init (rdinit=/nonexistent) | verdict {} | kept nothing to keep | exit {:?} | wall {:.1} s",
        boot.boot.classification,
        run.status.code(),
        run.elapsed.as_secs_f64()
    );
    assert!(boot.result.is_none());
    assert!(boot.result_error.is_some());
    // Far below the 900 s the other limits would have taken.
    assert!(run.elapsed < Duration::from_secs(300), "took {:?}", run.elapsed);
    assert!(boot.boot.wall_s < 300.0, "{:?}", boot.boot);
    assert!(run.stderr.contains("panic"), "{}", run.transcript());
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn boot_timeout_is_classified_as_hang() {
    require_x86_64_boot();
    let _boot = boot_lock();
    let (run, boot) = boot_expecting_failure(&fork_count_word(), &["--timeout-boot", "1"]);
    assert_eq!(boot.boot.classification, "hang", "{:?}", boot.boot.detail);
    let detail = boot.boot.detail.clone().unwrap_or_default();
    assert!(detail.contains("did not say hello within 1s"), "{detail}");
    assert!(boot.boot.wall_s < 30.0, "{:?}", boot.boot);
    assert!(run.stderr.contains("hang"), "{}", run.transcript());
}

/// A file with the x86 boot-protocol header of a 64-bit bzImage: enough for
/// the host's checks, never booted.
fn fake_bzimage(path: &Path) {
    let mut h = vec![0u8; 0x240];
    h[0x202..0x206].copy_from_slice(b"HdrS");
    h[0x206..0x208].copy_from_slice(&0x020fu16.to_le_bytes());
    h[0x236] = 1;
    std::fs::write(path, h).unwrap();
}

/// `bootbench run` that must fail before any boot, quickly, with exit 1.
fn run_refused(mut c: Command) -> CliRun {
    let run = run_with_deadline(
        {
            c.args(["--iterations", "1"]);
            c
        },
        Duration::from_secs(120),
    );
    assert_eq!(run.code(), Some(1), "expected a refusal:\n{}", run.transcript());
    assert!(run.stderr.starts_with("bootbench: error: "), "{}", run.transcript());
    assert!(!run.stderr.contains("run: boot"), "it booted:\n{}", run.transcript());
    assert_eq!(run.stderr.lines().count(), 1, "one line, the whole error chain once:\n{}", run.transcript());
    run
}

#[test]
fn missing_kernel_file_is_refused_naming_it() {
    let dir = scratch();
    let missing = dir.path().join("vmlinuz-missing");
    let mut c = bootbench(["run", "--kernel"]);
    c.arg(&missing);
    let run = run_refused(c);
    assert!(run.stderr.contains(&format!("kernel image {}", missing.display())), "{}", run.stderr);
    assert!(run.stderr.contains("cannot read") || run.stderr.contains("does not exist"), "{}", run.stderr);
}

#[test]
fn a_text_file_as_kernel_is_refused_before_any_boot() {
    let dir = scratch();
    let text = dir.path().join("vmlinuz-notes");
    std::fs::write(&text, "these are my notes, not a kernel\n").unwrap();
    let mut c = bootbench(["run", "--kernel"]);
    c.arg(&text);
    let run = run_refused(c);
    let want = format!("kernel image {} is neither a bzImage nor an ELF vmlinux", text.display());
    assert!(run.stderr.contains(&want), "{}", run.stderr);

    // A real kernel for another arch is refused the same way.
    let bz = dir.path().join("vmlinuz-x86");
    fake_bzimage(&bz);
    let mut c = bootbench(["run", "--arch", "ppc64le", "--kernel"]);
    c.arg(&bz);
    let run = run_refused(c);
    assert!(run.stderr.contains("is an x86_64 bzImage, but arch ppc64le needs"), "{}", run.stderr);
}

#[test]
fn missing_qemu_binary_is_refused_naming_it() {
    let dir = scratch();
    let bz = dir.path().join("vmlinuz-fake");
    fake_bzimage(&bz);
    let empty_path = dir.path().join("empty-bin");
    std::fs::create_dir(&empty_path).unwrap();
    let mut c = bootbench(["run", "--kernel"]);
    c.arg(&bz).env("PATH", &empty_path);
    let run = run_refused(c);
    assert!(run.stderr.contains("QEMU binary 'qemu-system-x86_64' not found"), "{}", run.stderr);
    assert!(run.stderr.contains("run scripts/setup"), "{}", run.stderr);
}

#[test]
fn a_mem_too_small_for_kernbench_is_refused_before_the_pack_or_a_boot() {
    let dir = scratch();
    let bz = dir.path().join("vmlinuz-fake");
    fake_bzimage(&bz);
    // Quick's four objects compiled at once: 960 MiB of MemTotal.
    let mut c = bootbench(["run", "--accel", "tcg", "--workloads", "kernbench", "--mem", "1G", "--kernel"]);
    c.arg(&bz);
    let run = run_refused(c);
    let e = &run.stderr;
    assert!(e.contains("--mem 1024 MiB is too small: the quick target at the maximal job level"), "{e}");
    assert!(e.contains("needs about 960 MiB") && e.contains("MemTotal estimated at 952 MiB"), "the guest's check: {e}");
    assert!(e.contains("it needs --mem 1088M or more"), "{e}");
    assert!(!run.stderr.contains("pack:"), "refused before the pack is built or verified: {}", run.stderr);
    // The suite as the guest will see it: --append's keys count.
    let mut c = bootbench(["run", "--accel", "tcg", "--workloads", "kernbench", "--mem", "300M", "--kernel"]);
    c.arg(&bz).args(["--append", "bootbench.kernbench.jobs=half"]);
    let run = run_refused(c);
    assert!(
        run.stderr.contains("at the half job level (-j1 on 2 CPUs")
            && run.stderr.contains("it needs --mem 512M or more"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_hosts_own_upload_and_storage_keys_do_not_make_append_refused() {
    // The guest sees --append beside the keys the host adds (upload URL,
    // token, scratch disk); the host must not check --append without them.
    // A missing kernel is refused after the suite's checks, before a boot.
    let dir = scratch();
    let missing = dir.path().join("vmlinuz-missing");
    let mut c = bootbench([
        "run",
        "--accel",
        "tcg",
        "--upload-url",
        "http://10.0.2.2:9/",
        "--upload-token",
        "t-0123456789abcdef01",
    ]);
    c.args(["--append", "bootbench.ip=dhcp bootbench.upload_attempts=5", "--kernel"]).arg(&missing);
    let run = run_refused(c);
    assert!(run.stderr.contains(&format!("kernel image {}", missing.display())), "got past the checks: {}", run.stderr);
}

#[test]
fn a_kernel_tree_for_another_arch_or_not_built_is_refused_naming_what_to_do() {
    let dir = scratch();
    let tree = dir.path().join("linux");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("Makefile"), "VERSION = 6\n").unwrap();
    std::fs::write(tree.join("Kconfig"), "mainmenu \"Linux\"\n").unwrap();
    let config = bootbench::kernel::config_fragment::fragment(qemu::Arch::X86_64) + "CONFIG_MODULES=y\n";
    std::fs::write(tree.join(".config"), config).unwrap();
    let mut c = bootbench(["run", "--arch", "ppc64le", "--kernel"]);
    c.arg(&tree);
    let run = run_refused(c);
    let want = format!("--arch ppc64le, but the kernel tree {} is configured for x86_64 (its .config)", tree.display());
    assert!(run.stderr.contains(&want), "{}", run.stderr);
    // Without --arch the tree's own arch is taken, and its missing image named.
    let mut c = bootbench(["run", "--kernel"]);
    c.arg(&tree);
    let run = run_refused(c);
    let want = format!(
        "kernel tree {0} is not built: {0}/arch/x86/boot/bzImage is missing; build it with `make -C {0} -j$(nproc) bzImage modules`",
        tree.display()
    );
    assert!(run.stderr.contains(&want), "{}", run.stderr);
    // A ppc64le tree boots as ppc64le without --arch: the make command is
    // its cross build.
    let config = bootbench::kernel::config_fragment::fragment(qemu::Arch::Ppc64le) + "CONFIG_MODULES=y\n";
    std::fs::write(tree.join(".config"), config).unwrap();
    let mut c = bootbench(["run", "--kernel"]);
    c.arg(&tree);
    let run = run_refused(c);
    let want = format!(
        "{0}/vmlinux is missing; build it with `make -C {0} ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- -j$(nproc) vmlinux modules`",
        tree.display()
    );
    assert!(run.stderr.contains(&want), "{}", run.stderr);
}

/// Quick, with fork alone and few forks: the boot checks the tree's
/// kernel, not the workloads.
#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_built_kernel_tree_boots_with_the_modules_installed_from_it() {
    let k = require_x86_64_boot();
    let _boot = boot_lock();
    let dir = scratch();
    let tree = debian_kernel_as_built_tree(&k, &dir.path().join("linux"));
    let out = dir.path().join("results.json");
    // No --arch: the tree's .config says x86_64.
    let mut c = bootbench(["run", "--accel", "tcg", "--iterations", "1", "--warmup", "0", "--workloads", "fork"]);
    c.arg("--kernel").arg(&tree).args(["--append", &fork_count_word(), "-o"]).arg(&out);
    let run = run_with_deadline(c, BOOT_DEADLINE);
    run.assert_success();
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    assert_eq!(boot.machine.arch, "x86_64");
    // The envelope says what the tree was: its image, config and release.
    assert_eq!(boot.kernel.path, tree.join("arch/x86/boot/bzImage"));
    assert_eq!(boot.kernel.package.as_deref(), Some(format!("tree {} (no git)", tree.display()).as_str()));
    assert_eq!(boot.kernel.release.as_deref(), Some(k.info.release.as_str()));
    assert_eq!(boot.kernel.config_sha256.as_deref(), Some(sha256_file(&k.config()).as_str()));
    let doc = boot.result.as_ref().expect("an ok boot must carry the guest document");
    assert_eq!(doc.status, Status::Complete, "errors: {:?}", doc.errors);
    assert_eq!(doc.provenance.kernel.release, k.info.release);
    // The results port's modules came from the run's own install of the
    // tree, not from the cache, and the port delivered the document.
    let installed = run
        .stderr
        .lines()
        .find(|l| l.starts_with(&format!("run: kernel tree {}: installed modules ", tree.display())))
        .unwrap_or_else(|| panic!("no install line:\n{}", run.transcript()));
    let into = installed.rsplit(" into ").next().unwrap();
    assert!(
        into.contains("/bootbench-run-") && into.ends_with(&format!("/lib/modules/{}", k.info.release)),
        "{installed}"
    );
    for m in RESULT_PORT_MODULES {
        assert!(installed.contains(m), "{m} not installed: {installed}");
    }
    assert!(!Path::new(into).exists(), "the install lives as long as the run: {into}");
    let port = boot.channels.iter().find(|c| c.name == "port").expect("a results port");
    assert!(port.intact, "{:?}", port.detail);
}
