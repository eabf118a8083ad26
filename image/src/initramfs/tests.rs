//! Tests of the initramfs writer: reproducible bytes, path and mode
//! checks, the newc guard, and writing the image file.

use super::newc::{header_size, padded, write_entry, S_IFREG};
use super::*;
use std::io::Read;

/// One entry as read back with the `cpio` crate's reader.
#[derive(Debug, PartialEq)]
struct ReadEntry {
    name: String,
    ino: u32,
    mode: u32,
    nlink: u32,
    rdev: (u32, u32),
    data: Vec<u8>,
}

fn read_back(mut archive: &[u8]) -> Vec<ReadEntry> {
    let mut entries = Vec::new();
    loop {
        let mut reader = cpio::NewcReader::new(archive).unwrap();
        let e = reader.entry();
        if e.is_trailer() {
            break;
        }
        assert_eq!((e.uid(), e.gid(), e.mtime()), (0, 0, 0), "{}", e.name());
        assert_eq!((e.dev_major(), e.dev_minor()), (0, 0), "{}", e.name());
        let mut entry = ReadEntry {
            name: e.name().to_owned(),
            ino: e.ino(),
            mode: e.mode(),
            nlink: e.nlink(),
            rdev: (e.rdev_major(), e.rdev_minor()),
            data: Vec::new(),
        };
        reader.read_to_end(&mut entry.data).unwrap();
        entries.push(entry);
        archive = reader.finish().unwrap();
    }
    entries
}

fn sample() -> Initramfs {
    let mut fs = Initramfs::new();
    fs.add_file("init", 0o755, b"#!init\n".to_vec()).unwrap();
    fs.add_file("etc/bootbench/suite.json", 0o644, br#"{"name":"quick"}"#.to_vec()).unwrap();
    fs.add_dir("tmp", 0o1777).unwrap();
    fs.add_symlink("sbin/init", "/init").unwrap();
    fs.add_char_device("dev/console", 0o600, 5, 1).unwrap();
    fs.add_file("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko", 0o644, vec![0x7f; 1001]).unwrap();
    fs.add_file("empty", 0o600, Vec::new()).unwrap();
    fs
}

/// The same entries as [`sample`], added in another order.
fn sample_reordered() -> Initramfs {
    let mut fs = Initramfs::new();
    fs.add_file("empty", 0o600, Vec::new()).unwrap();
    fs.add_file("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko", 0o644, vec![0x7f; 1001]).unwrap();
    fs.add_char_device("dev/console", 0o600, 5, 1).unwrap();
    fs.add_symlink("sbin/init", "/init").unwrap();
    fs.add_dir("tmp", 0o1777).unwrap();
    fs.add_file("etc/bootbench/suite.json", 0o644, br#"{"name":"quick"}"#.to_vec()).unwrap();
    fs.add_file("init", 0o755, b"#!init\n".to_vec()).unwrap();
    fs
}

#[test]
fn same_bytes_whatever_the_order_of_adds() {
    for c in Compression::ALL {
        let a = sample().to_bytes(c).unwrap();
        assert_eq!(a, sample().to_bytes(c).unwrap(), "{c}: twice");
        assert_eq!(a, sample_reordered().to_bytes(c).unwrap(), "{c}: reordered");
    }
}

#[test]
fn read_back_with_the_cpio_crate() {
    let archive = sample().to_bytes(Compression::None).unwrap();
    assert_eq!(archive.len(), sample().raw_size());
    assert_eq!(archive.len() % 4, 0);
    let entries = read_back(&archive);
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "dev",
            "dev/console",
            "empty",
            "etc",
            "etc/bootbench",
            "etc/bootbench/suite.json",
            "init",
            "lib",
            "lib/modules",
            "lib/modules/6.1.0-28-amd64",
            "lib/modules/6.1.0-28-amd64/kernel",
            "lib/modules/6.1.0-28-amd64/kernel/drivers",
            "lib/modules/6.1.0-28-amd64/kernel/drivers/virtio",
            "lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko",
            "sbin",
            "sbin/init",
            "tmp",
        ]
    );
    let inos: Vec<u32> = entries.iter().map(|e| e.ino).collect();
    assert_eq!(inos, (1..=entries.len() as u32).collect::<Vec<_>>());
    let by_name = |n: &str| entries.iter().find(|e| e.name == n).unwrap();
    let init = by_name("init");
    assert_eq!((init.mode, init.nlink, init.data.as_slice()), (0o100755, 1, &b"#!init\n"[..]));
    let etc = by_name("etc");
    assert_eq!((etc.mode, etc.nlink, etc.data.len()), (0o040755, 2, 0));
    assert_eq!(by_name("tmp").mode, 0o041777);
    let link = by_name("sbin/init");
    assert_eq!((link.mode, link.data.as_slice()), (0o120777, &b"/init"[..]));
    let console = by_name("dev/console");
    assert_eq!((console.mode, console.rdev, console.data.len()), (0o020600, (5, 1), 0));
    let ko = by_name("lib/modules/6.1.0-28-amd64/kernel/drivers/virtio/virtio.ko");
    assert_eq!(ko.data, vec![0x7f; 1001]);
    assert_eq!(by_name("empty").data.len(), 0);
}

#[test]
fn directories_sort_before_their_children_and_siblings_with_longer_names() {
    let mut fs = Initramfs::new();
    fs.add_file("a-b", 0o644, Vec::new()).unwrap();
    fs.add_file("a/b", 0o644, Vec::new()).unwrap();
    fs.add_file("a.txt", 0o644, Vec::new()).unwrap();
    assert_eq!(fs.paths().collect::<Vec<_>>(), ["a", "a/b", "a-b", "a.txt"]);
}

#[test]
fn an_explicit_directory_mode_wins_over_an_implicit_parent() {
    for explicit_first in [true, false] {
        let mut fs = Initramfs::new();
        if explicit_first {
            fs.add_dir("etc", 0o700).unwrap();
            fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
        } else {
            fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
            fs.add_dir("etc", 0o700).unwrap();
        }
        let entries = read_back(&fs.to_bytes(Compression::None).unwrap());
        assert_eq!(entries[0].name, "etc");
        assert_eq!(entries[0].mode, 0o040700, "explicit_first={explicit_first}");
    }
    let mut fs = Initramfs::new();
    fs.add_dir("etc", 0o700).unwrap();
    fs.add_dir("etc", 0o700).unwrap();
    let err = fs.add_dir("etc", 0o755).unwrap_err();
    assert!(matches!(err, ImageError::DirectoryModeConflict { existing: 0o700, new: 0o755, .. }), "{err}");
}

#[test]
fn bad_paths_are_rejected_with_the_path_named() {
    let cases = [
        ("", "empty path"),
        ("/init", "absolute"),
        ("etc//x", "empty component"),
        ("etc/", "empty component"),
        ("./init", "'.' component"),
        ("a/./b", "'.' component"),
        ("../etc", "'..' component"),
        ("lib/../../etc", "'..' component"),
        ("a\0b", "NUL"),
    ];
    for (path, why) in cases {
        let mut fs = Initramfs::new();
        let err = fs.add_file(path, 0o644, Vec::new()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ImageError::InvalidPath { .. }), "{path:?}: {msg}");
        assert!(msg.contains(why), "{path:?}: {msg}");
        assert!(msg.contains(&format!("{path:?}")), "{path:?}: {msg}");
        assert!(fs.add_dir(path, 0o755).is_err());
        assert!(fs.add_symlink(path, "x").is_err());
        assert!(fs.is_empty(), "a rejected path leaves nothing behind");
    }
    let long = "x/".repeat(PATH_MAX / 2) + "x";
    assert!(Initramfs::new().add_file(&long, 0o644, Vec::new()).is_err());
}

#[test]
fn conflicting_entries_are_rejected_in_either_order() {
    let mut fs = Initramfs::new();
    fs.add_file("etc/x", 0o644, Vec::new()).unwrap();
    let err = fs.add_file("etc", 0o644, Vec::new()).unwrap_err();
    assert_eq!(err.to_string(), r#"cannot add file "etc": a directory is already there"#);
    let err = fs.add_dir("etc/x", 0o755).unwrap_err();
    assert_eq!(err.to_string(), r#"cannot add directory "etc/x": a file is already there"#);
    let err = fs.add_file("etc/x", 0o644, b"again".to_vec()).unwrap_err();
    assert!(matches!(err, ImageError::Conflict { existing: "file", new: "file", .. }), "{err}");
    let err = fs.add_file("etc/x/y", 0o644, Vec::new()).unwrap_err();
    assert_eq!(err.to_string(), r#"cannot add "etc/x/y": its parent "etc/x" is a file, not a directory"#);
    fs.add_symlink("bin", "usr/bin").unwrap();
    let err = fs.add_file("bin/sh", 0o755, Vec::new()).unwrap_err();
    assert!(matches!(err, ImageError::ParentNotDirectory { kind: "symlink", .. }), "{err}");
    // Nothing was half-added by the failures.
    assert_eq!(fs.paths().collect::<Vec<_>>(), ["bin", "etc", "etc/x"]);
}

#[test]
fn modes_and_symlink_targets_are_checked() {
    let mut fs = Initramfs::new();
    let err = fs.add_file("init", 0o100755, Vec::new()).unwrap_err();
    assert!(err.to_string().contains("0o100755"), "{err}");
    assert!(fs.add_dir("d", 0o10000).is_err());
    assert!(fs.add_file("suid", 0o4755, Vec::new()).is_ok());
    assert!(matches!(fs.add_symlink("l", "").unwrap_err(), ImageError::InvalidSymlinkTarget { .. }));
    assert!(matches!(fs.add_symlink("l", "a\0b").unwrap_err(), ImageError::InvalidSymlinkTarget { .. }));
}

#[test]
fn add_file_from_names_the_source() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("init.bin");
    fs::write(&src, b"binary").unwrap();
    let mut fs = Initramfs::new();
    fs.add_file_from("init", 0o755, &src).unwrap();
    let entries = read_back(&fs.to_bytes(Compression::None).unwrap());
    assert_eq!(entries[0].data, b"binary");

    let missing = dir.path().join("nope");
    let err = fs.add_file_from("other", 0o755, &missing).unwrap_err();
    assert!(matches!(err, ImageError::ReadSource { .. }));
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");
    // A bad archive path is reported before the source is even read.
    assert!(matches!(fs.add_file_from("/x", 0o755, &missing).unwrap_err(), ImageError::InvalidPath { .. }));
}

#[test]
fn compressed_archives_decompress_to_the_raw_one() {
    let fs = sample();
    let raw = fs.to_bytes(Compression::None).unwrap();
    let mut gunzipped = Vec::new();
    flate2::read::GzDecoder::new(&fs.to_bytes(Compression::Gzip).unwrap()[..]).read_to_end(&mut gunzipped).unwrap();
    assert_eq!(gunzipped, raw);
    assert_eq!(zstd::decode_all(&fs.to_bytes(Compression::Zstd).unwrap()[..]).unwrap(), raw);
}

#[test]
fn empty_archive_is_just_a_trailer() {
    let fs = Initramfs::new();
    let raw = fs.to_bytes(Compression::None).unwrap();
    assert_eq!(raw.len(), fs.raw_size());
    assert!(read_back(&raw).is_empty());
}

fn builder() -> cpio::newc::Builder {
    cpio::newc::Builder::new("f").mode(S_IFREG | 0o644).ino(1)
}

#[test]
fn guard_rejects_data_shorter_than_declared() {
    // Left to the cpio crate alone, this would write a header for 10
    // bytes, 4 bytes of data, no padding, and succeed.
    let err = write_entry(Vec::new(), builder(), "f", 10, &b"four"[..]).unwrap_err();
    assert!(matches!(err, ImageError::ShortData { declared: 10, written: 4, .. }), "{err}");
    assert_eq!(err.to_string(), r#"entry "f": data ended after 4 of the 10 bytes its header declares"#);
}

#[test]
fn guard_rejects_data_longer_than_declared() {
    let err = write_entry(Vec::new(), builder(), "f", 3, &b"four"[..]).unwrap_err();
    assert!(matches!(err, ImageError::LongData { declared: 3, .. }), "{err}");
}

#[test]
fn guard_passes_exact_data_with_padding() {
    let out = write_entry(Vec::new(), builder(), "f", 5, &b"five!"[..]).unwrap();
    assert_eq!(out.len(), header_size(1) + padded(5));
    let out = cpio::newc::trailer(out).unwrap();
    assert_eq!(read_back(&out)[0].data, b"five!");
}

#[test]
fn write_file_replaces_the_target_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("initramfs.cpio.gz");
    fs::write(&path, b"old").unwrap();
    let fs_ = sample();
    let size = fs_.write_file(&path, Compression::Gzip).unwrap();
    let written = fs::read(&path).unwrap();
    assert_eq!(size, written.len() as u64);
    assert_eq!(written, fs_.to_bytes(Compression::Gzip).unwrap());
    assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o644);
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["initramfs.cpio.gz"], "no temporary file is left behind");
}

#[test]
fn write_file_failures_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let err = sample().write_file(&dir.path().join("missing/initramfs.cpio"), Compression::None).unwrap_err();
    assert!(matches!(err, ImageError::CreateTemp { .. }), "{err}");
    assert!(err.to_string().contains("missing"), "{err}");
    // Renaming over a directory fails after the data was written: the
    // temporary file is removed and the directory is untouched.
    let target = dir.path().join("taken");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("keep"), b"x").unwrap();
    let err = sample().write_file(&target, Compression::None).unwrap_err();
    assert!(matches!(err, ImageError::FinishImage { what: "rename into place", .. }), "{err}");
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["taken"]);
    assert!(matches!(sample().write_file(Path::new("/"), Compression::None), Err(ImageError::BadOutputPath(_))));
}
