//! The initramfs: the static init for the
//! guest arch, the suite, and the kernel modules the run needs with their
//! dependency closure (loaded by the init in the listed order).

use crate::boot::init_build;
use crate::kernel::{self, DebianArch};
use anyhow::Context;
use image::modules::ModuleTree;
use image::{Compression, Initramfs};
use loads::known_loadfiles::CLIENT_TXT;
use loads::suite::Suite;
use loads::workload::ImageFile;
use qemu::Arch;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the init finds the suite (must match the init's `SUITE_PATH`).
pub const SUITE_PATH: &str = "etc/bootbench/suite.json";
/// Where the init finds the module list (must match the init's `MODULES_LIST`).
pub const MODULES_LIST: &str = "etc/bootbench/modules.load";
/// Where the init finds the early module list, loaded before the workloads
/// (must match the init's `EARLY_MODULES_LIST`).
pub const EARLY_MODULES_LIST: &str = "etc/bootbench/modules-early.load";
/// Where the init finds the lab list: modules packed whenever the kernel
/// has them, loaded only when the cmdline asks (must match the init's
/// `LAB_MODULES_LIST`).
pub const LAB_MODULES_LIST: &str = "etc/bootbench/modules-lab.load";
/// The lab list's modules: netconsole (`bootbench.netconsole`) and the
/// hardware watchdogs' drivers (`bootbench.hw_watchdog`, and the lab
/// agent's boot status): QEMU's i6300esb and Intel's TCO. A kernel that
/// lacks one, or builds it in, just has it missing from the list.
pub const LAB_MODULES: &[&str] = &["netconsole", "i6300esb", "iTCO_wdt"];
/// Modules a Debian kernel needs for the virtio-serial results port.
pub const RESULT_PORT_MODULES: &[&str] = &["virtio_console", "virtio_pci"];

/// The compression of the images `bootbench run` boots and `bootbench image`
/// builds unless told otherwise: none. Under TCG the kernel's decompressor
/// is the slowest step before the init; a plain archive skips it, and every
/// kernel unpacks one (no `CONFIG_RD_*` needed). Measured with `bootbench
/// overhead` (x86_64, Debian 6.1, icount, 1 vCPU, the init built with fat
/// LTO): the first workload starts at 1.7540 s of guest time from a plain
/// image, 1.8919 s from zstd and 1.8989 s from gzip (ratios to a trivial
/// init 1.013, 1.073 and 1.084). The plain image is larger (about 8 MB
/// against 2.9 MB for zstd): where the image travels over a slow link (TFTP
/// in a lab), `--compression zstd` trades start-up for transfer time.
pub const DEFAULT_COMPRESSION: Compression = Compression::None;

/// Whether a kernel with this config text can unpack an initramfs in
/// `compression`: a plain archive always; gzip and zstd when the config
/// builds the decompressor in (`CONFIG_RD_GZIP=y`, `CONFIG_RD_ZSTD=y`),
/// or when the config is unknown (tried; a failed boot says so).
pub fn config_unpacks(config: Option<&str>, compression: Compression) -> bool {
    let option = match compression {
        Compression::None => return true,
        Compression::Gzip => "CONFIG_RD_GZIP=y",
        Compression::Zstd => "CONFIG_RD_ZSTD=y",
    };
    config.is_none_or(|text| text.lines().any(|l| l.trim_end() == option))
}

/// What to put in an image.
#[derive(Debug, Clone)]
pub struct ImageSpec {
    /// Guest arch (selects the init build).
    pub arch: qemu::Arch,
    /// The suite to pack.
    pub suite: Suite,
    /// Module names to pack with their dependencies, loaded after the
    /// workloads.
    pub modules: Vec<String>,
    /// Module names to pack with their dependencies, loaded before the
    /// workloads (the scratch disk's driver and filesystem); a module in
    /// both lists is loaded early only.
    pub early_modules: Vec<String>,
    /// The kernel's `lib/modules/<release>` tree, required when `modules`
    /// or `early_modules` is not empty.
    pub modules_dir: Option<PathBuf>,
    /// A prebuilt static init to pack instead of building one.
    pub init: Option<PathBuf>,
    /// Compression of the archive.
    pub compression: Compression,
}

/// An image written to disk.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    /// Where it is.
    pub path: PathBuf,
    /// sha256 of the file.
    pub sha256: String,
    /// Size of the file.
    pub bytes: u64,
    /// Size of the uncompressed archive.
    pub raw_bytes: u64,
    /// Size of the init binary.
    pub init_bytes: u64,
    /// Modules packed for after the workloads, in load order.
    pub modules: Vec<String>,
    /// Modules packed for before the workloads, in load order.
    pub early_modules: Vec<String>,
    /// Modules of the lab list ([`LAB_MODULES`] with their dependencies),
    /// in load order.
    pub lab_modules: Vec<String>,
    /// Host files packed for the workloads (loadfiles): path and sha256.
    pub files: Vec<(String, String)>,
}

/// Why a file a workload reads in the guest cannot be packed.
#[derive(Debug, thiserror::Error)]
pub enum ImageFileError {
    /// The path is not absolute, or climbs with `..`.
    #[error("{reader} {path}: give an absolute path without `..` (the guest reads it at the same path)")]
    Path {
        /// Who reads it.
        reader: String,
        /// The path.
        path: String,
    },
    /// The host has no such file.
    #[error("{reader} {path} cannot be read on this host{hint}")]
    Missing {
        /// Who reads it.
        reader: String,
        /// The path.
        path: String,
        /// Where it comes from, when known.
        hint: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not the one the suite pins.
    #[error("{reader} {path} has sha256 {actual}, but the suite pins {expected}: a different loadfile measures something else")]
    Pinned {
        /// Who reads it.
        reader: String,
        /// The path.
        path: String,
        /// The pin.
        expected: String,
        /// The file's hash.
        actual: String,
    },
}

/// Where a missing image file comes from, when bootbench knows.
fn missing_hint(path: &str) -> &'static str {
    if path == CLIENT_TXT {
        " (Debian's `dbench` package installs it; `scripts/setup` installs that package)"
    } else {
        ""
    }
}

/// Reads `file` from the host and checks it; returns its path in the
/// archive, its bytes and their sha256.
fn read_image_file(file: &ImageFile) -> Result<(String, Vec<u8>, String), ImageFileError> {
    let path = Path::new(&file.path);
    let bad_path = || ImageFileError::Path { reader: file.reader.clone(), path: file.path.clone() };
    if !path.is_absolute() || path.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(bad_path());
    }
    let rel = file.path.trim_start_matches('/').to_string();
    if rel.is_empty() {
        return Err(bad_path());
    }
    let data = std::fs::read(path).map_err(|source| ImageFileError::Missing {
        reader: file.reader.clone(),
        path: file.path.clone(),
        hint: missing_hint(&file.path).to_string(),
        source,
    })?;
    let actual = hex::encode(Sha256::digest(&data));
    if let Some(expected) = &file.sha256 {
        if !expected.eq_ignore_ascii_case(&actual) {
            return Err(ImageFileError::Pinned {
                reader: file.reader.clone(),
                path: file.path.clone(),
                expected: expected.clone(),
                actual,
            });
        }
    }
    Ok((rel, data, actual))
}

/// Packs `names` with their dependencies, except those in `skip`, and
/// writes their load list at `list_path`; returns the names packed. Those
/// in `in_archive` are listed but not added again (another list packed
/// them).
fn pack_modules(
    img: &mut Initramfs,
    tree: &ModuleTree,
    names: &[String],
    skip: &[String],
    in_archive: &[String],
    list_path: &str,
) -> anyhow::Result<Vec<String>> {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut list = String::new();
    let mut packed = Vec::new();
    for m in tree.resolve(&names)? {
        if skip.contains(&m.name) {
            continue;
        }
        let rel = Path::new("lib/modules").join(tree.release()).join(&m.rel);
        let rel = rel.to_str().with_context(|| format!("module path {} is not UTF-8", m.path.display()))?;
        if !in_archive.contains(&m.name) {
            img.add_file_from(rel, 0o644, &m.path)?;
        }
        list.push_str(rel);
        list.push('\n');
        packed.push(m.name);
    }
    img.add_file(list_path, 0o644, list.into_bytes())?;
    Ok(packed)
}

/// Builds the image described by `spec` into `output`.
pub fn build(spec: &ImageSpec, output: &Path) -> anyhow::Result<BuiltImage> {
    let bar = crate::terminal::spinner(format!("building the initramfs {}", output.display()));
    let built = build_quietly(spec, output);
    bar.finish_and_clear();
    built
}

fn build_quietly(spec: &ImageSpec, output: &Path) -> anyhow::Result<BuiltImage> {
    let init = match &spec.init {
        Some(p) => {
            init_build::check_static(p)?;
            p.clone()
        }
        None => init_build::build(spec.arch.profile().init_target)?,
    };
    let init_bytes = std::fs::metadata(&init).with_context(|| format!("cannot read {}", init.display()))?.len();
    let mut img = Initramfs::new();
    img.add_file_from("init", 0o755, &init)?;
    for dir in ["dev", "proc", "sys", "run", "work", "tmp"] {
        img.add_dir(dir, 0o755)?;
    }
    // With a console node in the archive the kernel opens fds 0-2 for the
    // init before it runs, so even its first message reaches the console.
    img.add_char_device("dev/console", 0o600, 5, 1)?;
    // Rust's runtime opens /dev/null on any of fds 0-2 the kernel left
    // closed, before `main`, and aborts (a kernel panic in PID 1) without
    // the node; the init then replaces it with /dev/console.
    img.add_char_device("dev/null", 0o666, 1, 3)?;
    img.add_file(SUITE_PATH, 0o644, spec.suite.to_json().into_bytes())?;
    let mut files = Vec::new();
    for file in loads::workloads::image_files(&spec.suite)? {
        let (rel, data, sha256) = read_image_file(&file)?;
        img.add_file(&rel, 0o644, data)?;
        files.push((file.path, sha256));
    }
    let mut packed = Vec::new();
    let mut packed_early = Vec::new();
    let mut packed_lab = Vec::new();
    let asked = !spec.modules.is_empty() || !spec.early_modules.is_empty();
    let tree = match &spec.modules_dir {
        Some(dir) if asked => Some(ModuleTree::open(dir)?),
        // Only the lab list would come from it: a tree that does not open
        // just leaves the list out.
        Some(dir) => ModuleTree::open(dir).ok(),
        None if asked => anyhow::bail!(
            "modules {:?} were asked for, but no kernel modules tree is known (give --modules-dir)",
            [spec.early_modules.as_slice(), spec.modules.as_slice()].concat()
        ),
        None => None,
    };
    if let Some(tree) = &tree {
        if !spec.early_modules.is_empty() {
            packed_early = pack_modules(&mut img, tree, &spec.early_modules, &[], &[], EARLY_MODULES_LIST)?;
        }
        if !spec.modules.is_empty() {
            // The early list runs first: what it loaded is there already.
            packed = pack_modules(&mut img, tree, &spec.modules, &packed_early, &[], MODULES_LIST)?;
        }
        let lab = lab_modules_in(tree);
        if !lab.is_empty() {
            // Loaded without the late list (a watchdog before the
            // workloads): what the late list packed is listed again.
            packed_lab = pack_modules(&mut img, tree, &lab, &packed_early, &packed, LAB_MODULES_LIST)?;
        }
    }
    let bytes = img.write_file(output, spec.compression)?;
    let data = std::fs::read(output).with_context(|| format!("cannot read back {}", output.display()))?;
    Ok(BuiltImage {
        path: output.to_path_buf(),
        sha256: hex::encode(Sha256::digest(&data)),
        bytes,
        raw_bytes: img.raw_size() as u64,
        init_bytes,
        modules: packed,
        early_modules: packed_early,
        lab_modules: packed_lab,
        files,
    })
}

/// The [`LAB_MODULES`] that `tree` has as modules (with every dependency).
fn lab_modules_in(tree: &ModuleTree) -> Vec<String> {
    LAB_MODULES.iter().filter(|m| !tree.is_builtin(m) && tree.resolve(&[m]).is_ok()).map(|m| m.to_string()).collect()
}

/// The modules tree an image is packed from: the one given, none when no
/// module is asked for, or else the Debian kernel's of `arch` cached under
/// `cache_root`.
pub fn modules_dir_for(
    arch: Arch,
    given: Option<&Path>,
    needs_modules: bool,
    cache_root: &Path,
) -> anyhow::Result<Option<PathBuf>> {
    match (given, needs_modules) {
        (Some(d), _) => Ok(Some(d.to_path_buf())),
        (None, false) => Ok(None),
        (None, true) => {
            let debian = DebianArch::for_target(arch)?;
            let k = kernel::cached(debian, cache_root)?.with_context(|| {
                format!(
                    "--modules and --early-modules need a modules tree: give --modules-dir, or run `bootbench kernel fetch --arch {arch}`"
                )
            })?;
            Ok(Some(k.modules_dir()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_image_only_for_a_kernel_that_builds_its_decompressor_in() {
        let debian = "CONFIG_RD_GZIP=y\nCONFIG_RD_ZSTD=y\nCONFIG_RD_XZ=y\n";
        let gzip_only = "CONFIG_RD_GZIP=y\n# CONFIG_RD_ZSTD is not set\n";
        let neither = "# CONFIG_RD_GZIP is not set\n# CONFIG_RD_ZSTD is not set\n";
        for c in Compression::ALL {
            assert!(config_unpacks(Some(debian), c), "{c}");
            assert!(config_unpacks(None, c), "{c}: an unknown config is tried");
        }
        assert!(config_unpacks(Some(gzip_only), Compression::Gzip));
        assert!(!config_unpacks(Some(gzip_only), Compression::Zstd));
        assert!(!config_unpacks(Some(neither), Compression::Gzip));
        assert!(config_unpacks(Some(neither), Compression::None), "a plain archive needs no decompressor");
    }

    #[test]
    fn the_lab_list_has_the_lab_modules_the_kernel_has_and_shares_files_with_the_late_list() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("6.1.0-test");
        for m in ["drivers/net/netconsole.ko", "drivers/net/virtio_net.ko", "drivers/net/net_failover.ko"] {
            let p = root.join("kernel").join(m);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, m).unwrap();
        }
        // netconsole needs net_failover here (a made-up dependency, shared
        // with the late list's virtio_net); i6300esb is built in, iTCO_wdt
        // missing.
        std::fs::write(
            root.join("modules.dep"),
            "kernel/drivers/net/netconsole.ko: kernel/drivers/net/net_failover.ko
             kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko
             kernel/drivers/net/net_failover.ko:
",
        )
        .unwrap();
        std::fs::write(
            root.join("modules.builtin"),
            "kernel/drivers/watchdog/i6300esb.ko
",
        )
        .unwrap();
        let tree = ModuleTree::open(&root).unwrap();
        assert_eq!(lab_modules_in(&tree), ["netconsole"]);
        let mut img = Initramfs::new();
        let late = pack_modules(&mut img, &tree, &["virtio_net".into()], &[], &[], MODULES_LIST).unwrap();
        assert_eq!(late, ["net_failover", "virtio_net"]);
        let lab = pack_modules(&mut img, &tree, &lab_modules_in(&tree), &[], &late, LAB_MODULES_LIST).unwrap();
        assert_eq!(lab, ["net_failover", "netconsole"], "the lab list loads its dependencies itself");
        let out = dir.path().join("img.cpio");
        img.write_file(&out, Compression::None).unwrap();
        let data = std::fs::read(&out).unwrap();
        let count = |needle: &str| data.windows(needle.len()).filter(|w| *w == needle.as_bytes()).count();
        assert_eq!(count("kernel/drivers/net/netconsole.ko\0"), 1);
        let list = "lib/modules/6.1.0-test/kernel/drivers/net/net_failover.ko\nlib/modules/6.1.0-test/kernel/drivers/net/netconsole.ko\n";
        assert_eq!(count(list), 1, "the lab list, in load order");
    }

    #[test]
    fn the_modules_tree_is_the_given_one_none_or_the_cached_kernels() {
        let given = Path::new("/some/lib/modules/6.1");
        let cache = Path::new("/nonexistent/cache");
        assert_eq!(modules_dir_for(Arch::X86_64, Some(given), true, cache).unwrap().as_deref(), Some(given));
        assert_eq!(
            modules_dir_for(Arch::Ppc64, None, false, cache).unwrap(),
            None,
            "no module asked for: no tree needed"
        );
        // Debian ships no big-endian ppc64 kernel, so there is no cached tree.
        let e = modules_dir_for(Arch::Ppc64, None, true, cache).unwrap_err().to_string();
        assert!(e.contains("no big-endian ppc64 kernel"), "{e}");
    }

    #[test]
    fn a_loadfile_is_packed_only_as_pinned_and_named_in_every_refusal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.txt");
        std::fs::write(&path, b"Close 1 NT_STATUS_OK\n").unwrap();
        let sha = hex::encode(Sha256::digest(b"Close 1 NT_STATUS_OK\n"));
        let file = |path: &str, sha256: Option<&str>| ImageFile {
            path: path.to_string(),
            sha256: sha256.map(str::to_string),
            reader: "dbench's loadfile".into(),
        };
        let p = path.to_str().unwrap();
        let (rel, data, got) = read_image_file(&file(p, Some(&sha.to_uppercase()))).unwrap();
        assert_eq!(
            (rel.as_str(), data.as_slice(), got.as_str()),
            (&p[1..], &b"Close 1 NT_STATUS_OK\n"[..], sha.as_str())
        );
        assert_eq!(read_image_file(&file(p, None)).unwrap().2, sha, "unpinned: packed, its hash recorded");
        let e = read_image_file(&file(p, Some("00"))).unwrap_err().to_string();
        assert!(e.contains(p) && e.contains(&sha) && e.contains("pins 00") && e.contains("dbench's loadfile"), "{e}");
        let e = read_image_file(&file("/nonexistent/x.txt", None)).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/x.txt cannot be read"), "{e}");
        let e = read_image_file(&file("/nonexistent/usr/share/dbench/client.txt", None)).unwrap_err().to_string();
        assert!(!e.contains("scripts/setup"), "the hint is for Debian's path only: {e}");
        assert!(
            missing_hint(CLIENT_TXT).contains("`dbench` package") && missing_hint(CLIENT_TXT).contains("scripts/setup")
        );
        assert_eq!(missing_hint("/srv/client.txt"), "");
        for bad in ["client.txt", "/a/../etc/shadow", "/"] {
            let e = read_image_file(&file(bad, None)).unwrap_err();
            assert!(matches!(e, ImageFileError::Path { .. }), "{bad}: {e}");
            assert!(e.to_string().contains(bad), "{e}");
        }
    }
}
