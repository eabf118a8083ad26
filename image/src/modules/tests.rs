//! Tests of module indexing and dependency resolution, against module
//! trees built from synthetic ELF objects.

use super::*;
use object::{Architecture, BinaryFormat, Endianness, SectionKind};
use std::io::Write;

/// A minimal relocatable ELF object with a `.modinfo` section.
fn elf_module(modinfo: &[&str], arch: Architecture, endian: Endianness) -> Vec<u8> {
    let mut obj = object::write::Object::new(BinaryFormat::Elf, arch, endian);
    let section = obj.add_section(Vec::new(), b".modinfo".to_vec(), SectionKind::ReadOnlyString);
    let mut data = Vec::new();
    for entry in modinfo {
        data.extend_from_slice(entry.as_bytes());
        data.push(0);
    }
    obj.append_section_data(section, &data, 1);
    obj.write().unwrap()
}

fn ko(name: &str, depends: &str) -> Vec<u8> {
    let modinfo = [format!("name={name}"), "intree=Y".into(), format!("depends={depends}"), "vermagic=6.1.0".into()];
    elf_module(&modinfo.iter().map(String::as_str).collect::<Vec<_>>(), Architecture::X86_64, Endianness::Little)
}

fn put(root: &Path, rel: &str, data: &[u8]) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, data).unwrap();
}

/// A tree shaped like Debian's 6.1 virtio modules, without modules.dep.
fn virtio_tree() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("6.1.0-28-amd64");
    for (rel, name, depends) in [
        ("kernel/drivers/virtio/virtio.ko", "virtio", ""),
        ("kernel/drivers/virtio/virtio_ring.ko", "virtio_ring", "virtio"),
        ("kernel/net/core/failover.ko", "failover", ""),
        ("kernel/drivers/net/net_failover.ko", "net_failover", "failover"),
        ("kernel/drivers/net/virtio_net.ko", "virtio_net", "net_failover,virtio,virtio_ring"),
        ("kernel/drivers/virtio/virtio_pci_modern_dev.ko", "virtio_pci_modern_dev", ""),
        ("kernel/drivers/virtio/virtio_pci_legacy_dev.ko", "virtio_pci_legacy_dev", ""),
        (
            "kernel/drivers/virtio/virtio_pci.ko",
            "virtio_pci",
            "virtio_pci_modern_dev,virtio_ring,virtio,virtio_pci_legacy_dev",
        ),
        ("kernel/drivers/gpu/drm/virtio/virtio-gpu.ko", "virtio_gpu", "virtio,virtio_ring"),
    ] {
        put(&root, rel, &ko(name, depends));
    }
    tmp
}

fn names(files: &[ModuleFile]) -> Vec<&str> {
    files.iter().map(|f| f.name.as_str()).collect()
}

#[test]
fn resolves_dependencies_first_from_modinfo() {
    let tmp = virtio_tree();
    let tree = ModuleTree::open(&tmp.path().join("6.1.0-28-amd64")).unwrap();
    assert_eq!(tree.release(), "6.1.0-28-amd64");
    let files = tree.resolve(&["virtio-net", "virtio_pci"]).unwrap();
    assert_eq!(
        names(&files),
        [
            "failover",
            "net_failover",
            "virtio",
            "virtio_ring",
            "virtio_net",
            "virtio_pci_modern_dev",
            "virtio_pci_legacy_dev",
            "virtio_pci"
        ]
    );
    let net = &files[4];
    assert_eq!(net.rel, Path::new("kernel/drivers/net/virtio_net.ko"));
    assert!(net.path.is_absolute());
    assert_eq!(net.path, tree.dir().join(&net.rel));
    // A dash in the file name is an underscore in the module name.
    let gpu = tree.resolve(&["virtio_gpu"]).unwrap();
    assert_eq!(names(&gpu), ["virtio", "virtio_ring", "virtio_gpu"]);
    assert_eq!(gpu[2].rel, Path::new("kernel/drivers/gpu/drm/virtio/virtio-gpu.ko"));
}

#[test]
fn each_module_once() {
    let tmp = virtio_tree();
    let tree = ModuleTree::open(&tmp.path().join("6.1.0-28-amd64")).unwrap();
    let files = tree.resolve(&["virtio_ring", "virtio_net", "virtio-net", "virtio"]).unwrap();
    assert_eq!(names(&files), ["virtio", "virtio_ring", "failover", "net_failover", "virtio_net"]);
    assert!(tree.resolve(&[]).unwrap().is_empty());
}

#[test]
fn unknown_module_names_module_and_tree() {
    let tmp = virtio_tree();
    let dir = tmp.path().join("6.1.0-28-amd64");
    let tree = ModuleTree::open(&dir).unwrap();
    let err = tree.resolve(&["virtio_net", "e1000-e"]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ModulesError::UnknownModule { ref name, .. } if name == "e1000_e"), "{msg}");
    assert!(msg.contains("e1000_e") && msg.contains(&tree.dir().display().to_string()), "{msg}");
}

#[test]
fn unknown_dependency_names_who_needs_it() {
    let tmp = tempfile::tempdir().unwrap();
    put(tmp.path(), "kernel/a.ko", &ko("a", "b"));
    let err = ModuleTree::open(tmp.path()).unwrap().resolve(&["a"]).unwrap_err();
    assert!(
        matches!(err, ModulesError::UnknownDependency { ref name, ref needed_by, .. } if name == "b" && needed_by == "a")
    );
}

#[test]
fn builtin_modules_are_skipped() {
    let tmp = virtio_tree();
    let dir = tmp.path().join("6.1.0-28-amd64");
    put(&dir, "modules.builtin", b"kernel/drivers/virtio/virtio.ko\nkernel/drivers/block/virtio_blk.ko\n");
    let tree = ModuleTree::open(&dir).unwrap();
    assert!(tree.is_builtin("virtio-blk"));
    let files = tree.resolve(&["virtio_blk", "virtio_ring"]).unwrap();
    assert_eq!(names(&files), ["virtio_ring"], "virtio is built in, and so is virtio_blk");
}

#[test]
fn a_cycle_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    put(tmp.path(), "kernel/a.ko", &ko("a", "b"));
    put(tmp.path(), "kernel/b.ko", &ko("b", "c"));
    put(tmp.path(), "kernel/c.ko", &ko("c", "a"));
    put(tmp.path(), "kernel/x.ko", &ko("x", "a"));
    let err = ModuleTree::open(tmp.path()).unwrap().resolve(&["x"]).unwrap_err();
    assert_eq!(err.to_string(), "module dependency cycle: a -> b -> c -> a");
}

#[test]
fn modules_dep_is_used_when_present() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("6.1.0-1-amd64");
    // The files are not ELF: with modules.dep they are never parsed.
    for rel in ["kernel/a.ko", "kernel/b.ko", "kernel/c-d.ko.zst", "updates/e.ko"] {
        put(&dir, rel, b"not elf");
    }
    let abs_e = dir.join("updates/e.ko");
    let dep = format!(
        "kernel/a.ko: kernel/c-d.ko.zst kernel/b.ko\nkernel/b.ko:\n\nkernel/c-d.ko.zst: kernel/b.ko\nupdates/e.ko:\n{}: {}\n",
        "/lib/modules/6.1.0-1-amd64/kernel/x.ko",
        abs_e.display()
    );
    put(&dir, "modules.dep", dep.as_bytes());
    put(&dir, "kernel/x.ko", b"");
    let tree = ModuleTree::open(&dir).unwrap();
    let files = tree.resolve(&["a", "x"]).unwrap();
    assert_eq!(names(&files), ["b", "c_d", "a", "e", "x"]);
    assert_eq!(files[1].rel, Path::new("kernel/c-d.ko.zst"));
    assert_eq!(files[3].rel, Path::new("updates/e.ko"));

    // A module listed in modules.dep whose file is gone.
    fs::remove_file(dir.join("kernel/b.ko")).unwrap();
    assert!(matches!(tree.resolve(&["b"]).unwrap_err(), ModulesError::ReadModule { .. }));
    // A module on disk that modules.dep does not list is unknown, as to modprobe.
    put(&dir, "kernel/new.ko", &ko("new", ""));
    assert!(matches!(tree.resolve(&["new"]).unwrap_err(), ModulesError::UnknownModule { .. }));
}

#[test]
fn malformed_modules_dep_names_file_and_line() {
    let tmp = tempfile::tempdir().unwrap();
    put(tmp.path(), "modules.dep", b"kernel/a.ko:\nkernel/b.ko kernel/a.ko\n");
    let err = ModuleTree::open(tmp.path()).unwrap_err();
    assert!(matches!(err, ModulesError::BadDepLine { line: 2, .. }), "{err}");
    assert!(err.to_string().contains("modules.dep:2"), "{err}");
    put(tmp.path(), "modules.dep", b"kernel/a.txt:\n");
    assert!(matches!(ModuleTree::open(tmp.path()).unwrap_err(), ModulesError::BadDepLine { line: 1, .. }));
}

#[test]
fn compressed_and_big_endian_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let ppc = elf_module(&["name=ibmvnic", "depends=zdep,gzdep"], Architecture::PowerPc64, Endianness::Big);
    put(tmp.path(), "kernel/ibmvnic.ko", &ppc);
    put(tmp.path(), "kernel/zdep.ko.zst", &zstd::encode_all(&ko("zdep", "")[..], 3).unwrap());
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&ko("gzdep", "")).unwrap();
    put(tmp.path(), "kernel/gzdep.ko.gz", &gz.finish().unwrap());
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &ko("xzed", "xzdep")[..], &mut xz).unwrap();
    put(tmp.path(), "kernel/xzed.ko.xz", &xz);
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &ko("xzdep", "")[..], &mut xz).unwrap();
    put(tmp.path(), "kernel/xzdep.ko.xz", &xz);
    put(tmp.path(), "kernel/truncated.ko.xz", b"\xfd7zXZ\0");
    let tree = ModuleTree::open(tmp.path()).unwrap();
    assert_eq!(names(&tree.resolve(&["ibmvnic"]).unwrap()), ["zdep", "gzdep", "ibmvnic"]);
    assert_eq!(names(&tree.resolve(&["xzed"]).unwrap()), ["xzdep", "xzed"]);
    assert_eq!(read_depends(&tmp.path().join("kernel/xzed.ko.xz")).unwrap(), ["xzdep"]);
    let err = tree.resolve(&["truncated"]).unwrap_err();
    assert!(err.to_string().starts_with("cannot read module "), "{err}");
    assert!(err.to_string().contains("truncated.ko.xz"), "{err}");
}

#[test]
fn broken_module_files_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    put(tmp.path(), "kernel/text.ko", b"hello");
    let no_modinfo = object::write::Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    put(tmp.path(), "kernel/bare.ko", &no_modinfo.write().unwrap());
    put(tmp.path(), "kernel/renamed.ko", &ko("original", ""));
    let tree = ModuleTree::open(tmp.path()).unwrap();
    assert!(matches!(tree.resolve(&["text"]).unwrap_err(), ModulesError::BadElf { .. }));
    assert!(matches!(tree.resolve(&["bare"]).unwrap_err(), ModulesError::NoModinfo { .. }));
    let err = tree.resolve(&["renamed"]).unwrap_err();
    assert!(matches!(err, ModulesError::NameMismatch { .. }), "{err}");
}

#[test]
fn symlinks_are_not_followed_and_updates_win() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("rel");
    put(tmp.path(), "elsewhere/kernel/outside.ko", &ko("outside", ""));
    put(&dir, "kernel/drivers/dup.ko", &ko("dup", ""));
    put(&dir, "updates/dkms/dup.ko", &ko("dup", ""));
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), dir.join("build")).unwrap();
    let tree = ModuleTree::open(&dir).unwrap();
    assert!(matches!(tree.resolve(&["outside"]).unwrap_err(), ModulesError::UnknownModule { .. }));
    assert_eq!(tree.resolve(&["dup"]).unwrap()[0].rel, Path::new("updates/dkms/dup.ko"));
}

#[test]
fn open_rejects_missing_and_non_directories() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(matches!(ModuleTree::open(&tmp.path().join("nope")).unwrap_err(), ModulesError::OpenTree { .. }));
    put(tmp.path(), "file", b"");
    assert!(matches!(ModuleTree::open(&tmp.path().join("file")).unwrap_err(), ModulesError::NotADirectory { .. }));
}

#[test]
fn modinfo_parsing() {
    let info = parse_modinfo(b"license=GPL\0depends=a-b,,c\0\0\0name=x-y\0softdep=pre: crc32c\0");
    assert_eq!(info, Modinfo { name: Some("x_y".into()), depends: vec!["a_b".into(), "c".into()] });
    assert_eq!(parse_modinfo(b"depends=\0"), Modinfo::default());
}
