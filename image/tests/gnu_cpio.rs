//! Cross-checks archives against GNU cpio, the reference reader for newc:
//! it must list them in our order and extract the same contents, modes and
//! symlink targets.

use image::{Compression, Initramfs};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

const GNU_CPIO: &str = "/usr/bin/cpio";

/// Fails, rather than skips, without GNU cpio: CI installs it.
fn require_gnu_cpio() {
    assert!(
        Path::new(GNU_CPIO).exists(),
        "GNU cpio not found at {GNU_CPIO}; run scripts/setup to install the host packages (CI installs it)"
    );
}

/// Runs `program args` with `input` on stdin in `dir`; returns stdout and stderr.
fn run(program: &str, args: &[&str], dir: &Path, input: &[u8]) -> (Vec<u8>, String) {
    let mut child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    // Feed stdin from a thread so a child that fills its stdout pipe first
    // cannot deadlock against us.
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{program} {args:?} failed ({}):\n{stderr}", out.status);
    (out.stdout, stderr)
}

enum Expect {
    Dir(u32),
    File(u32, Vec<u8>),
    Symlink(&'static str),
}

fn sample() -> (Initramfs, Vec<(&'static str, Expect)>) {
    let big: Vec<u8> = (0..70_001u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let expected = vec![
        ("bin", Expect::Dir(0o755)),
        ("bin/sh", Expect::Symlink("../init")),
        ("etc", Expect::Dir(0o755)),
        ("etc/bootbench", Expect::Dir(0o750)),
        ("etc/bootbench/empty", Expect::File(0o600, Vec::new())),
        ("etc/bootbench/suite.json", Expect::File(0o644, br#"{"name":"quick","seed":1}"#.to_vec())),
        ("init", Expect::File(0o755, big)),
        ("lib", Expect::Dir(0o755)),
        ("lib/modules", Expect::Dir(0o755)),
        ("lib/modules/6.1.0-28-amd64", Expect::Dir(0o755)),
        ("lib/modules/6.1.0-28-amd64/kernel", Expect::Dir(0o755)),
        ("lib/modules/6.1.0-28-amd64/kernel/drivers", Expect::Dir(0o755)),
        ("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio", Expect::Dir(0o755)),
        ("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko", Expect::File(0o644, b"\x7fELF\x02".to_vec())),
        ("sbin", Expect::Dir(0o755)),
        ("sbin/init", Expect::Symlink("/init")),
        ("tmp", Expect::Dir(0o1777)),
        ("usr", Expect::Dir(0o755)),
        ("usr/bin", Expect::Dir(0o755)),
        ("usr/bin/suid", Expect::File(0o4755, b"x".to_vec())),
    ];
    let mut fs = Initramfs::new();
    // Add in reverse, leaves before their parents, to exercise implicit parents.
    for (path, expect) in expected.iter().rev() {
        match expect {
            Expect::Dir(mode) if *mode != 0o755 => fs.add_dir(path, *mode).unwrap(),
            Expect::Dir(_) => {} // created implicitly
            Expect::File(mode, data) => fs.add_file(path, *mode, data.clone()).unwrap(),
            Expect::Symlink(target) => fs.add_symlink(path, target).unwrap(),
        }
    }
    (fs, expected)
}

#[test]
fn gnu_cpio_lists_and_extracts_the_archive() {
    require_gnu_cpio();
    let (fs, expected) = sample();
    let tmp = tempfile::tempdir().unwrap();
    let archive_path = tmp.path().join("initramfs.cpio");
    let size = fs.write_file(&archive_path, Compression::None).unwrap();
    let archive = fs::read(&archive_path).unwrap();
    assert_eq!(size as usize, archive.len());
    assert_eq!(archive.len(), fs.raw_size());

    // Listing: exactly our entries, in our order.
    let (listing, _) = run(GNU_CPIO, &["-t", "--quiet"], tmp.path(), &archive);
    let listing = String::from_utf8(listing).unwrap();
    let listed: Vec<&str> = listing.lines().collect();
    let want: Vec<&str> = expected.iter().map(|(p, _)| *p).collect();
    assert_eq!(listed, want);

    // Extraction as root keeps modes, including setuid and sticky bits.
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let (_, stderr) = run(GNU_CPIO, &["-idv", "--no-absolute-filenames"], &root, &archive);
    assert!(!stderr.contains("warning"), "cpio warned:\n{stderr}");
    for (path, expect) in &expected {
        let on_disk = root.join(path);
        let meta = fs::symlink_metadata(&on_disk).unwrap_or_else(|e| panic!("{path} was not extracted: {e}"));
        let mode = meta.permissions().mode() & 0o7777;
        match expect {
            Expect::Dir(want) => {
                assert!(meta.is_dir(), "{path} is not a directory");
                assert_eq!(mode, *want, "{path}: mode {mode:o}");
            }
            Expect::File(want, data) => {
                assert!(meta.is_file(), "{path} is not a file");
                assert_eq!(mode, *want, "{path}: mode {mode:o}");
                assert_eq!(&fs::read(&on_disk).unwrap(), data, "{path}: contents");
            }
            Expect::Symlink(target) => {
                assert!(meta.file_type().is_symlink(), "{path} is not a symlink");
                assert_eq!(fs::read_link(&on_disk).unwrap(), Path::new(target), "{path}: target");
            }
        }
    }
}

#[test]
fn gnu_cpio_reads_the_gzip_archive() {
    require_gnu_cpio();
    let (fs, expected) = sample();
    let tmp = tempfile::tempdir().unwrap();
    // gzip is an Essential package on Debian, so it is always there.
    let (raw, _) = run("gzip", &["-dc"], tmp.path(), &fs.to_bytes(Compression::Gzip).unwrap());
    assert_eq!(raw, fs.to_bytes(Compression::None).unwrap());
    let (listing, _) = run(GNU_CPIO, &["-t", "--quiet"], tmp.path(), &raw);
    let listing = String::from_utf8(listing).unwrap();
    assert_eq!(listing.lines().collect::<Vec<_>>(), expected.iter().map(|(p, _)| *p).collect::<Vec<_>>());
}
