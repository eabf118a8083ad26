//! The userland pack built for real (mmdebstrap from the Debian archive, as
//! root): two cold builds of the checked-in lockfile give the same image
//! bytes, a third finds it cached and only verifies it, the image is a
//! read-only ext4 holding the compiler, the Linux tree and its prepared
//! output tree that the manifest describes, and a pin the archive does not
//! have is refused naming the package. Slow and networked, so in the long
//! tier.

mod support;

use bootbench::pack::cache::{sha256_hex, CachedPack};
use bootbench::pack::{self, PackOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

fn lockfile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("packs/x86_64.lock")
}

fn options(lockfile: PathBuf, cache: &Path) -> PackOptions {
    PackOptions { arch: "x86_64".into(), lockfile: Some(lockfile), cache: Some(cache.to_path_buf()) }
}

/// What debugfs says about `what` (a command such as `stat /usr/bin/gcc-12`) in `image`.
fn debugfs(image: &Path, what: &str) -> String {
    let out = Command::new("debugfs").arg("-R").arg(what).arg(image).output().expect("run debugfs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The modification time (seconds) of `path` in `image`, from debugfs's `stat`.
fn mtime(image: &Path, path: &str) -> u64 {
    let stat = debugfs(image, &format!("stat {path}"));
    let hex = stat
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("mtime: 0x"))
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no mtime of {path}: {stat}"));
    u64::from_str_radix(hex, 16).unwrap()
}

/// The image carries the Linux tree and its prepared output tree as the
/// manifest says, the tarball gone, the guest's mount points empty, and
/// generated files no older than the sources they were made from.
fn assert_linux_tree(entry: &CachedPack, linux_version: &str) {
    let image = entry.image();
    let source = entry.manifest.source.as_ref().expect("the manifest describes the Linux tree");
    assert_eq!((source.package.as_str(), source.version.as_str()), ("linux-source-6.1", linux_version));
    assert_eq!((source.tree.as_str(), source.obj.as_str()), ("/usr/src/linux", "/usr/src/linux-obj"));
    assert_eq!(source.make_targets, ["x86_64_defconfig", "prepare"]);
    for (path, kind) in [
        ("/usr/src/linux/Makefile", "regular"),
        ("/usr/src/linux/kernel/fork.c", "regular"),
        ("/usr/src/linux-obj/.config", "regular"),
        ("/usr/src/linux-obj/include/generated/autoconf.h", "regular"),
        ("/usr/src/linux-obj/scripts/basic/fixdep", "regular"),
        ("/usr/src/linux-obj/tools/objtool/objtool", "regular"),
        ("/usr/src/linux-obj/source", "symlink"),
        ("/bootbench/work", "directory"),
        ("/proc", "directory"),
        ("/tmp", "directory"),
    ] {
        let stat = debugfs(&image, &format!("stat {path}"));
        assert!(stat.contains(&format!("Type: {kind}")), "{path} is not a {kind} in the pack: {stat}");
    }
    let gone = debugfs(&image, "stat /usr/src/linux-source-6.1.tar.xz");
    assert!(!gone.contains("Type:"), "the source tarball is still in the pack: {gone}");
    let work = debugfs(&image, "ls /bootbench/work");
    let names: Vec<&str> =
        work.split_whitespace().filter(|w| !w.starts_with('(') && w.parse::<u64>().is_err()).collect();
    assert_eq!(names, [".", ".."], "/bootbench/work is not empty: {work}");
    let config = Command::new("debugfs").args(["-R", "cat /usr/src/linux-obj/.config"]).arg(&image).output().unwrap();
    assert!(config.stdout.starts_with(b"#\n# Automatically generated file"), "not a .config");
    assert_eq!(sha256_hex(&config.stdout), source.config_sha256, "pack.json's config_sha256 is not the .config's");
    // make decides from these times: what prepare generated must not look older than its sources.
    let (fork_c, autoconf) = (
        mtime(&image, "/usr/src/linux/kernel/fork.c"),
        mtime(&image, "/usr/src/linux-obj/include/generated/autoconf.h"),
    );
    assert!(fork_c < autoconf, "kernel/fork.c ({fork_c}) is not older than autoconf.h ({autoconf})");
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_a_pack_builds_reproducibly_caches_and_refuses_a_gone_pin() {
    support::require(nix::unistd::geteuid().is_root(), "root (mmdebstrap --mode=root)");
    for program in ["mmdebstrap", "mke2fs", "dumpe2fs", "debugfs"] {
        support::require_program(program);
    }
    let first_cache = tempfile::tempdir().unwrap();
    let second_cache = tempfile::tempdir().unwrap();

    let first = pack::build(&options(lockfile(), first_cache.path())).expect("first cold build");
    assert!(!first.was_cached);
    let second = pack::build(&options(lockfile(), second_cache.path())).expect("second cold build");
    let (a, b) = (&first.entry.manifest, &second.entry.manifest);
    eprintln!(
        "pack: {} packages, {} bytes, sha256 {}; cold builds {:.1} s and {:.1} s",
        a.packages.len(),
        a.image_bytes,
        a.image_sha256,
        first.elapsed.as_secs_f64(),
        second.elapsed.as_secs_f64()
    );
    assert_eq!(a.image_sha256, b.image_sha256, "two cold builds of one lockfile differ");
    assert_eq!(a, b);
    let locked = pack::lockfile::Lockfile::read(&lockfile()).unwrap();
    assert_eq!(a.packages, locked.pins());

    // The cached pack is verified, not rebuilt, by the command too.
    let out = Command::new(support::bootbench_bin())
        .args(["pack", "build", "--lockfile"])
        .arg(lockfile())
        .arg("--cache")
        .arg(first_cache.path())
        .output()
        .expect("run bootbench pack build");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&a.image_sha256) && stdout.contains("cached, verified"), "{stdout}");

    let image = first.entry.image();
    let header =
        String::from_utf8_lossy(&Command::new("dumpe2fs").arg("-h").arg(&image).output().unwrap().stdout).into_owned();
    assert!(header.contains("read-only") && !header.contains("has_journal"), "{header}");
    // Debian's gcc-12 is a symlink to the triplet-prefixed compiler.
    let gcc = debugfs(&image, "stat /usr/bin/x86_64-linux-gnu-gcc-12");
    assert!(gcc.contains("Type: regular"), "no gcc-12 in the pack: {gcc}");
    assert!(debugfs(&image, "stat /usr/bin/cc").contains("Type: symlink"), "no cc alternative in the pack");
    assert_linux_tree(&first.entry, locked.packages.get("linux-source-6.1").expect("linux-source-6.1 is locked"));

    // A version the archive does not have is named.
    let text = std::fs::read_to_string(lockfile()).unwrap();
    let make = locked.packages.get("make").expect("make is locked");
    let gone = text.replace(&format!("package make {make}\n"), "package make 0.0-gone\n");
    let gone_lock = first_cache.path().join("gone.lock");
    std::fs::write(&gone_lock, gone).unwrap();
    let err = pack::build(&options(gone_lock, first_cache.path())).expect_err("a gone pin must fail");
    let chain = format!("{:#}", anyhow::Error::from(err));
    assert!(chain.contains("has no make version 0.0-gone"), "{chain}");
}

#[test]
#[ignore = "long tier: run scripts/test --long"]
fn long_tier_the_i386_pack_builds_reproducibly_with_its_own_host_programs() {
    support::require(nix::unistd::geteuid().is_root(), "root (mmdebstrap --mode=root)");
    for program in ["mmdebstrap", "mke2fs", "debugfs", "arch-test"] {
        support::require_program(program);
    }
    let i386 = |cache: &Path| PackOptions { arch: "i386".into(), lockfile: None, cache: Some(cache.to_path_buf()) };
    let (first_cache, second_cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = pack::build(&i386(first_cache.path())).expect("first cold i386 build");
    let second = pack::build(&i386(second_cache.path())).expect("second cold i386 build");
    let (a, b) = (&first.entry.manifest, &second.entry.manifest);
    eprintln!(
        "i386 pack: {} packages, {} bytes; cold builds {:.1} s and {:.1} s",
        a.packages.len(),
        a.image_bytes,
        first.elapsed.as_secs_f64(),
        second.elapsed.as_secs_f64()
    );
    assert_eq!((a.arch.as_str(), a.image_sha256.as_str()), ("i386", b.image_sha256.as_str()), "same bytes twice");
    let source = a.source.as_ref().expect("the manifest describes the Linux tree");
    assert_eq!(source.make_targets, ["i386_defconfig", "prepare"]);
    // The tree's host programs are i386 programs (ELF machine 3), built by
    // the pack's own gcc, so the i386 guest can run them.
    let out = Command::new("debugfs")
        .args(["-R", "cat /usr/src/linux-obj/scripts/basic/fixdep"])
        .arg(first.entry.image())
        .output()
        .expect("run debugfs");
    assert_eq!(out.stdout.get(..20).map(|h| (h[4], h[18])), Some((1, 3)), "fixdep: 32-bit ELF for EM_386");
}
