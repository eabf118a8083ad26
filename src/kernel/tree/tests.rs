//! Tests of tree detection, the arch and config checks, the not-built
//! errors and the module install, on fixture trees of fake files (and tiny
//! ELF modules with a `.modinfo`).

use super::*;
use crate::kernel::config_fragment::fragment;
use object::{Architecture, BinaryFormat, Endianness, SectionKind};

fn put(root: &Path, rel: &str, data: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap();
}

/// A relocatable ELF object with the `.modinfo` of module `name`.
fn ko(name: &str, depends: &str) -> Vec<u8> {
    let mut obj = object::write::Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let section = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyString);
    let info = format!("name={name}\0intree=Y\0depends={depends}\0vermagic=6.1.0\0");
    obj.append_section_data(section, info.as_bytes(), 1);
    obj.write().unwrap()
}

fn xz(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lzma_rs::xz_compress(&mut &data[..], &mut out).unwrap();
    out
}

/// The config of a kernel the appliance runs on, for `arch`, modular or not.
fn config(arch: Arch, modular: bool) -> String {
    let mut text = fragment(arch);
    text.push_str(if modular { "CONFIG_MODULES=y\n" } else { "# CONFIG_MODULES is not set\n" });
    text
}

/// A built in-place tree for `arch` at `dir`: source files, `.config`, the
/// arch's boot image and the release.
fn built_tree(dir: &Path, arch: Arch, modular: bool) {
    put(dir, "Makefile", b"VERSION = 6\n");
    put(dir, "Kconfig", b"mainmenu \"Linux\"\n");
    put(dir, ".config", config(arch, modular).as_bytes());
    put(dir, ArchBuild::of(arch).image_path, b"image");
    put(dir, "include/config/kernel.release", b"6.1.0-test\n");
    if modular {
        put(dir, "modules.order", b"");
    }
}

fn err(r: Result<KernelTree, TreeError>) -> String {
    let e = r.unwrap_err();
    let mut s = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(inner) = source {
        s.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    s
}

#[test]
fn a_built_source_tree_is_found_with_its_image_release_and_arch() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("linux");
    built_tree(&dir, Arch::X86_64, true);
    let tree = KernelTree::open(&dir, None).unwrap();
    assert_eq!(tree.arch, Arch::X86_64);
    assert_eq!(tree.image, dir.join("arch/x86/boot/bzImage"));
    assert_eq!(tree.release, "6.1.0-test");
    assert_eq!(tree.source, None);
    assert!(tree.modular);
    assert_eq!(tree.config_path, dir.join(".config"));
    assert_eq!(tree.describe(), format!("tree {} (no git)", dir.display()));
    assert!(looks_like_tree(&dir));
    // Any other directory is refused, naming it.
    let e = err(KernelTree::open(tmp.path(), None));
    assert!(e.contains(&format!("{} is a directory but not a kernel tree", tmp.path().display())), "{e}");
    assert!(!looks_like_tree(tmp.path()));
}

#[test]
fn the_arch_comes_from_the_config_for_each_arch_and_a_different_given_one_is_refused() {
    for arch in Arch::ALL {
        let tmp = tempfile::tempdir().unwrap();
        built_tree(tmp.path(), arch, false);
        let tree = KernelTree::open(tmp.path(), None).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(tree.arch, arch);
        // pseries boots the ELF vmlinux at the tree's root; x86 the bzImage.
        let image = if matches!(arch, Arch::Ppc64 | Arch::Ppc64le) { "vmlinux" } else { "arch/x86/boot/bzImage" };
        assert_eq!(tree.image, tmp.path().join(image), "{arch}");
        assert_eq!(KernelTree::open(tmp.path(), Some(arch)).unwrap().arch, arch);
        let other = if arch == Arch::X86_64 { Arch::Ppc64le } else { Arch::X86_64 };
        let e = err(KernelTree::open(tmp.path(), Some(other)));
        assert!(
            e.starts_with(&format!(
                "--arch {other}, but the kernel tree {} is configured for {arch} (its .config)",
                tmp.path().display()
            )),
            "{e}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    built_tree(tmp.path(), Arch::X86_64, false);
    put(tmp.path(), ".config", b"CONFIG_ARM64=y\n");
    let e = err(KernelTree::open(tmp.path(), None));
    assert!(e.starts_with("cannot tell the arch of the kernel tree"), "{e}");
}

#[test]
fn an_out_of_tree_build_dir_names_its_source_in_the_make_command_and_the_record() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, build) = (tmp.path().join("src"), tmp.path().join("build"));
    put(&src, "Makefile", b"VERSION = 6\n");
    put(&src, "Kconfig", b"mainmenu \"Linux\"\n");
    // What kbuild writes into O=: a Makefile that includes the source's,
    // and (usually) a `source` link.
    put(&build, "Makefile", format!("# Automatically generated\ninclude {}/Makefile\n", src.display()).as_bytes());
    put(&build, ".config", config(Arch::X86_64, true).as_bytes());
    let e = err(KernelTree::open(&build, None));
    let make = format!("make -C {} O={} -j$(nproc) bzImage modules", src.display(), build.display());
    assert!(e.contains(&format!("{}/arch/x86/boot/bzImage is missing", build.display())), "{e}");
    assert!(e.contains(&format!("build it with `{make}`")), "{e}");
    put(&build, "arch/x86/boot/bzImage", b"image");
    put(&build, "include/config/kernel.release", b"6.1.0-o\n");
    let e = err(KernelTree::open(&build, None));
    assert!(e.contains("modules.order is missing") && e.contains(&make), "{e}");
    put(&build, "modules.order", b"");
    let tree = KernelTree::open(&build, None).unwrap();
    assert_eq!(tree.source.as_deref(), Some(src.as_path()));
    assert_eq!(tree.build_command(), make);
    // The `source` link wins over the Makefile; git's commit is of the source.
    std::fs::remove_file(build.join("Makefile")).unwrap();
    std::os::unix::fs::symlink(&src, build.join("source")).unwrap();
    let tree = KernelTree::open(&build, None).unwrap();
    assert_eq!(tree.source.as_deref(), Some(src.as_path()));
    assert_eq!(tree.describe(), format!("tree {} (source {}, no git)", build.display(), src.display()));
    // git is a prerequisite (scripts/setup installs it): without it the
    // commit in the record would go unchecked, so the test fails instead.
    assert!(
        Command::new("git").arg("--version").output().is_ok_and(|o| o.status.success()),
        "missing prerequisite: git (run scripts/setup)"
    );
    {
        let git = |args: &[&str]| {
            let ok = Command::new("git").arg("-C").arg(&src).args(args).output().unwrap().status.success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        git(&["-c", "user.email=t@example.invalid", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "c"]);
        let head = Command::new("git").arg("-C").arg(&src).args(["rev-parse", "--short=12", "HEAD"]).output().unwrap();
        let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
        assert_eq!(tree.describe(), format!("tree {} (source {}, git {head})", build.display(), src.display()));
    }
}

#[test]
fn a_source_tree_built_out_of_tree_says_the_image_is_in_the_build_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("linux");
    put(&src, "Makefile", b"VERSION = 6\n");
    put(&src, "Kconfig", b"mainmenu \"Linux\"\n");
    put(&src, ".bootbench-build-x86_64/Makefile", b"include ../Makefile\n");
    put(&src, ".bootbench-build-x86_64/.config", b"CONFIG_X86_64=y\n");
    let e = err(KernelTree::open(&src, None));
    assert!(e.contains(&format!("kernel tree {} has no .config, so it is not built here", src.display())), "{e}");
    assert!(e.contains("the boot image is in the build directory"), "{e}");
    assert!(e.contains(&format!("found {}/.bootbench-build-x86_64", src.display())), "{e}");
    assert!(e.contains(&format!("`make -C {} x86_64_defconfig`", src.display())), "{e}");
    assert!(e.contains(&format!("then `make -C {} -j$(nproc) bzImage modules`", src.display())), "{e}");
    // With --arch, the arch's targets.
    let e = err(KernelTree::open(&src, Some(Arch::Ppc64le)));
    assert!(e.contains("ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- pseries_le_defconfig`"), "{e}");
    assert!(e.contains("-j$(nproc) vmlinux modules`"), "{e}");
}

#[test]
fn a_tree_not_built_yet_names_the_make_command_for_its_arch() {
    let cases = [
        (Arch::X86_64, true, "arch/x86/boot/bzImage", "-j$(nproc) bzImage modules"),
        (Arch::I386, false, "arch/x86/boot/bzImage", "-j$(nproc) bzImage"),
        (
            Arch::Ppc64le,
            true,
            "vmlinux",
            "ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- -j$(nproc) vmlinux modules",
        ),
        (Arch::Ppc64, false, "vmlinux", "ARCH=powerpc CROSS_COMPILE=powerpc64-linux-gnu- -j$(nproc) vmlinux"),
    ];
    for (arch, modular, image, tail) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        built_tree(dir, arch, modular);
        let make = format!("make -C {} {tail}", dir.display());
        for missing in [image, "include/config/kernel.release", "modules.order"] {
            if missing == "modules.order" && !modular {
                continue;
            }
            let aside = dir.join("aside");
            std::fs::rename(dir.join(missing), &aside).unwrap();
            let e = err(KernelTree::open(dir, None));
            assert_eq!(
                e,
                format!(
                    "kernel tree {} is not built: {}/{missing} is missing; build it with `{make}`",
                    dir.display(),
                    dir.display()
                ),
                "{arch}"
            );
            std::fs::rename(&aside, dir.join(missing)).unwrap();
        }
        KernelTree::open(dir, None).unwrap();
    }
}

#[test]
fn a_config_that_cannot_run_the_appliance_names_each_missing_option() {
    let tmp = tempfile::tempdir().unwrap();
    built_tree(tmp.path(), Arch::X86_64, true);
    let text = config(Arch::X86_64, true)
        .replace("CONFIG_DEVTMPFS=y", "# CONFIG_DEVTMPFS is not set")
        .replace("CONFIG_TMPFS=y", "CONFIG_TMPFS=m");
    put(tmp.path(), ".config", text.as_bytes());
    let e = err(KernelTree::open(tmp.path(), None));
    assert!(
        e.starts_with(&format!(
            "the kernel tree {} cannot run the appliance: its .config lacks CONFIG_DEVTMPFS, CONFIG_TMPFS;",
            tmp.path().display()
        )),
        "{e}"
    );
    // `bootbench kernel check`'s own report follows, with the reasons.
    assert!(e.contains("MISSING  CONFIG_DEVTMPFS is not set: the init mounts /dev as devtmpfs"), "{e}");
}

/// A modular x86_64 tree with a chain virtio_console -> virtio_ring ->
/// virtio (the ring xz-compressed, the console zstd-compressed, as a tree
/// whose modules were compressed in place), an unrelated module, a
/// built-in dependency, and modules.order in 6.2's `.o` form.
fn modular_tree(dir: &Path) {
    built_tree(dir, Arch::X86_64, true);
    put(dir, "drivers/virtio/virtio.ko", &ko("virtio", ""));
    put(dir, "drivers/virtio/virtio_ring.ko.xz", &xz(&ko("virtio_ring", "virtio")));
    put(
        dir,
        "drivers/char/virtio_console.ko.zst",
        &zstd::encode_all(&ko("virtio_console", "virtio_ring,crc32c")[..], 3).unwrap(),
    );
    put(dir, "drivers/net/dummy.ko", &ko("dummy", ""));
    put(dir, "drivers/block/virtio_blk.ko", &ko("virtio_blk", "virtio_ring,virtio"));
    put(
        dir,
        "modules.order",
        b"drivers/virtio/virtio.o\ndrivers/virtio/virtio_ring.o\ndrivers/char/virtio_console.o\n\
          drivers/net/dummy.o\ndrivers/block/virtio_blk.o\n",
    );
    put(dir, "modules.builtin", b"kernel/lib/crc32c.ko\n");
}

#[test]
fn the_modules_a_run_needs_are_installed_with_their_closure_and_read_back_as_a_modules_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("linux");
    modular_tree(&dir);
    let tree = KernelTree::open(&dir, None).unwrap();
    let root = tmp.path().join("install");
    let got = tree.install_modules(&["virtio-console", "virtio_blk"], &root).unwrap();
    assert_eq!(got.modules_dir, root.join("lib/modules/6.1.0-test"));
    assert_eq!(got.modules, ["virtio", "virtio_ring", "virtio_console", "virtio_blk"]);
    let m = &got.modules_dir;
    assert!(m.join("kernel/drivers/virtio/virtio_ring.ko.xz").is_file());
    assert!(m.join("kernel/drivers/char/virtio_console.ko.zst").is_file());
    assert!(!m.join("kernel/drivers/net/dummy.ko").exists(), "only what the run needs");
    let dep = std::fs::read_to_string(m.join("modules.dep")).unwrap();
    assert_eq!(
        dep,
        "kernel/drivers/virtio/virtio.ko: \n\
         kernel/drivers/virtio/virtio_ring.ko.xz: kernel/drivers/virtio/virtio.ko\n\
         kernel/drivers/char/virtio_console.ko.zst: kernel/drivers/virtio/virtio_ring.ko.xz kernel/drivers/virtio/virtio.ko\n\
         kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio_ring.ko.xz kernel/drivers/virtio/virtio.ko\n"
    );
    // The image packs from it as from any --modules-dir.
    let modules = image::modules::ModuleTree::open(m).unwrap();
    let order: Vec<String> = modules.resolve(&["virtio_console"]).unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(order, ["virtio", "virtio_ring", "virtio_console"]);
    assert!(modules.is_builtin("crc32c"));
}

#[test]
fn a_module_the_tree_does_not_build_is_named_with_who_needs_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("linux");
    modular_tree(&dir);
    let tree = KernelTree::open(&dir, None).unwrap();
    let e = tree.install_modules(&["bfq"], &tmp.path().join("a")).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "module bfq is not in {}/modules.order nor in its modules.builtin (the .config does not build it)",
            dir.display()
        )
    );
    put(&dir, "drivers/net/dummy.ko", &ko("dummy", "mii"));
    let e = tree.install_modules(&["dummy"], &tmp.path().join("b")).unwrap_err().to_string();
    assert!(e.starts_with("module mii, needed by dummy, is not in"), "{e}");
    std::fs::remove_file(dir.join("drivers/block/virtio_blk.ko")).unwrap();
    let e = tree.install_modules(&["virtio_blk"], &tmp.path().join("c")).unwrap_err().to_string();
    assert!(e.contains("listed in") && e.contains("as drivers/block/virtio_blk.o, but no .ko file is there"), "{e}");
    assert!(e.contains(&format!("`make -C {} -j$(nproc) bzImage modules`", dir.display())), "{e}");
    put(&dir, "drivers/virtio/virtio.ko", &ko("virtio", "virtio_console"));
    let e = tree.install_modules(&["virtio_console"], &tmp.path().join("d")).unwrap_err().to_string();
    assert!(e.ends_with("virtio_console -> virtio_ring -> virtio -> virtio_console"), "{e}");
}

#[test]
fn modules_order_lines_of_every_kernel_era_are_read() {
    let listed = listed_modules("drivers/a/x-y.o\nkernel/drivers/b/z.ko\n\ndrivers/c/w.ko\n");
    let want: BTreeMap<String, String> =
        [("x_y", "drivers/a/x-y.o"), ("z", "kernel/drivers/b/z.ko"), ("w", "drivers/c/w.ko")]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    assert_eq!(listed, want);
    let tmp = tempfile::tempdir().unwrap();
    put(tmp.path(), "drivers/b/z.ko.gz", b"gz");
    assert_eq!(module_file(tmp.path(), "kernel/drivers/b/z.ko"), Some(PathBuf::from("drivers/b/z.ko.gz")));
    assert_eq!(module_file(tmp.path(), "drivers/b/q.o"), None);
    assert_eq!(shell_word(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    assert_eq!(shell_word(Path::new("/src/linux-6.1")), "/src/linux-6.1");
}
