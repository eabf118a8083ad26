//! The userland pack built for real (mmdebstrap from the Debian archive, as
//! root): two cold builds of the checked-in lockfile give the same image
//! bytes, a third finds it cached and only verifies it, the image is a
//! read-only ext4 holding the compiler, and a pin the archive does not have
//! is refused naming the package. Slow and networked, so in the long tier.

mod support;

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
