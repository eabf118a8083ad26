//! Cross-arch end to end: the quick suite boots on i386, ppc64le and
//! big-endian ppc64 (pseries) under TCG, with the init cross-built for each,
//! and the guest's provenance says what it ran on: arch, word size,
//! endianness and page size (read from the kernel's own config, since ppc64
//! kernels commonly use 64 KiB pages). One boot per arch.
//!
//! Prerequisites, all installed by scripts/test: QEMU, the Debian i386 and
//! ppc64el kernels (`bootbench kernel fetch`), the big-endian ppc64 kernel
//! built into the cache (`bootbench kernel build`), and the cross toolchains
//! (scripts/setup). A missing one fails the test, naming it.

mod support;

use bootbench::boot::image::{self as boot_image, ImageSpec};
use bootbench::kernel::{self, build, check, DebianArch};
use image::Compression;
use loads::schema::Status;
use qemu::kernel_image::KernelKind;
use qemu::Arch;
use std::io::Read as _;
use std::path::PathBuf;
use support::*;

/// What the guest must report about itself on each arch.
struct Expected {
    arch: Arch,
    /// `uname -m` in the guest.
    uname: &'static [&'static str],
    word_bits: u32,
    endian: &'static str,
    /// ELF header of the init packed for the arch.
    init: KernelKind,
}

const I386: Expected = Expected {
    arch: Arch::I386,
    uname: &["i686", "i586", "i386"],
    word_bits: 32,
    endian: "little",
    init: KernelKind::Elf { machine: 3, class64: false, little_endian: true },
};
const PPC64LE: Expected = Expected {
    arch: Arch::Ppc64le,
    uname: &["ppc64le"],
    word_bits: 64,
    endian: "little",
    init: KernelKind::Elf { machine: 21, class64: true, little_endian: true },
};
const PPC64: Expected = Expected {
    arch: Arch::Ppc64,
    uname: &["ppc64"],
    word_bits: 64,
    endian: "big",
    init: KernelKind::Elf { machine: 21, class64: true, little_endian: false },
};

/// The image and config of the kernel `bootbench run --arch` boots by
/// default; fails the test when it is not in the cache.
#[track_caller]
fn default_kernel_of(arch: Arch) -> (PathBuf, PathBuf) {
    match DebianArch::for_target(arch) {
        Ok(debian) => {
            let k = default_kernel(debian);
            (k.image(), k.config())
        }
        Err(_) => {
            let root = kernel::default_cache_root();
            let k = build::cached(arch, &root)
                .unwrap_or_else(|e| panic!("missing prerequisite: a usable built {arch} kernel ({e:#})"))
                .unwrap_or_else(|| {
                    panic!(
                        "missing prerequisite: no {arch} kernel built into {} (scripts/test builds it: \
                         `bootbench kernel build --tree \"$(bootbench kernel source)\" --arch {arch}`)",
                        build::arch_dir(&root, arch).display()
                    )
                });
            k.verify().unwrap_or_else(|e| panic!("missing prerequisite: the built {arch} kernel is damaged ({e:#})"));
            (k.image(), k.config())
        }
    }
}

/// Boots the quick suite once on `want.arch` and checks the whole result.
fn quick_suite_boots(want: &Expected) {
    let arch = want.arch;
    require_program(arch.profile().qemu_binary.to_str().unwrap_or_default());
    let (image, config) = default_kernel_of(arch);
    let located = check::locate(&config).unwrap_or_else(|e| panic!("cannot read the {arch} kernel config: {e:#}"));
    let report = check::check(&located.config, arch);
    assert!(report.can_run(), "the default {arch} kernel cannot run the appliance:\n{}", report.render(false));
    let page_size = located.config.page_size().unwrap_or(4096);

    let _boot = boot_lock();
    let dir = scratch();
    let out = dir.path().join("results.json");
    let run = run_with_deadline(
        {
            let mut c = bootbench(["run", "--arch", arch.name(), "--accel", "tcg", "--suite", "quick", "-o"]);
            c.arg(&out);
            c
        },
        BOOT_DEADLINE,
    );
    eprintln!("{arch}: `bootbench run` took {:.1} s\n{}", run.elapsed.as_secs_f64(), run.stdout);
    run.assert_success();
    let boot = only_boot(&out, &run);
    assert_eq!(boot.boot.classification, "ok", "{:?}\n{}", boot.boot.detail, boot.console_log);
    assert_eq!(boot.machine.arch, arch.name());
    assert_eq!(boot.kernel.path, image);
    let doc = boot.result.as_ref().expect("an ok boot carries the guest document");
    assert_eq!(doc.status, Status::Complete, "errors: {:?}", doc.errors);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);

    let machine = &doc.provenance.machine;
    assert!(want.uname.contains(&machine.arch.as_str()), "{arch}: guest uname -m is {:?}", machine.arch);
    assert_eq!(machine.word_bits, want.word_bits, "{arch}");
    assert_eq!(machine.endian, want.endian, "{arch}");
    assert_eq!(machine.page_size, page_size, "{arch}: the kernel config selects {page_size}-byte pages");

    let quick = loads::suite::Suite::builtin("quick").expect("quick is built in");
    let names: Vec<&str> = doc.workloads.iter().map(|w| w.name.as_str()).collect();
    let wanted: Vec<&str> = quick.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, wanted, "{arch}: every workload of the quick suite ran, in order");
    for w in &doc.workloads {
        assert_eq!(w.error, None, "{arch}: workload {}", w.name);
        assert!(!w.iterations.is_empty(), "{arch}: workload {} has no iterations", w.name);
        for it in &w.iterations {
            for (name, m) in &it.metrics {
                assert!(m.value.is_finite(), "{arch}: {}.{name} = {}", w.name, m.value);
            }
        }
    }
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn quick_suite_on_i386() {
    quick_suite_boots(&I386);
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn quick_suite_on_ppc64le() {
    quick_suite_boots(&PPC64LE);
}

#[test]
#[ignore = "boots real kernels under QEMU: run scripts/test"]
fn quick_suite_on_big_endian_ppc64() {
    quick_suite_boots(&PPC64);
}

/// The ELF header of `/init` in a gzip'd newc archive.
fn packed_init_kind(archive: &std::path::Path) -> KernelKind {
    let file = std::fs::File::open(archive).expect("the image was written");
    let mut reader: Box<dyn std::io::Read> = Box::new(flate2::read::GzDecoder::new(file));
    loop {
        let entry = cpio::NewcReader::new(reader).expect("a newc archive");
        if entry.entry().is_trailer() {
            panic!("{} has no init", archive.display());
        }
        if entry.entry().name() == "init" {
            let mut head = Vec::new();
            let mut entry = entry;
            (&mut entry).take(64).read_to_end(&mut head).expect("init is readable");
            return KernelKind::from_header(&head).expect("init is an ELF file");
        }
        reader = entry.finish().expect("the archive continues");
    }
}

#[test]
#[ignore = "needs the cross toolchains (Debian rustc-web, gcc-12 cross compilers): run scripts/test"]
fn image_packs_the_static_init_built_for_each_arch() {
    // The three cross inits in one cargo run (this test runs first in this
    // binary, so the boots below find them built): their crates and links
    // share the cores.
    let arches = [&I386, &PPC64LE, &PPC64];
    let triples: Vec<&str> = arches.iter().map(|w| w.arch.profile().init_target).collect();
    let started = std::time::Instant::now();
    let bins = bootbench::boot::init_build::build_all(&triples).unwrap_or_else(|e| panic!("{e:#}"));
    eprintln!("cross inits for {triples:?} built in {:.1} s", started.elapsed().as_secs_f64());
    for want in arches {
        let dir = scratch();
        let out = dir.path().join("initramfs.cpio.gz");
        let spec = ImageSpec {
            arch: want.arch,
            suite: loads::suite::Suite::builtin("quick").expect("quick is built in"),
            modules: Vec::new(),
            early_modules: Vec::new(),
            modules_dir: None,
            init: None,
            compression: Compression::Gzip,
        };
        let built = boot_image::build(&spec, &out).unwrap_or_else(|e| panic!("{}: {e:#}", want.arch));
        assert_eq!(packed_init_kind(&built.path), want.init, "{}", want.arch);
        // The cargo build is cached: its binary is what was packed, and static.
        let bin = &bins[triples.iter().position(|t| *t == want.arch.profile().init_target).unwrap()];
        bootbench::boot::init_build::check_static(bin).unwrap_or_else(|e| panic!("{}: {e:#}", want.arch));
        assert_eq!(std::fs::metadata(bin).map(|m| m.len()).ok(), Some(built.init_bytes), "{}", want.arch);
    }
}
