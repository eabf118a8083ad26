//! The initramfs a run boots a kernel with: the user's `--initramfs`, or
//! one built for the suite with the modules the run needs (the results
//! port's, the NIC's for an upload or a lab job, a kernel tree's installed
//! into the run's scratch directory).

use crate::boot::image::{self as boot_image, ImageSpec, RESULT_PORT_MODULES};
use crate::boot::kernels::KernelUnderTest;
use crate::boot::options::RunOptions;
use anyhow::Context;
use qemu::Arch;
use sha2::{Digest, Sha256};
use std::path::Path;

/// The image for one kernel, with whether it carries the results port.
pub(crate) struct PreparedImage {
    /// The image.
    pub(crate) built: boot_image::BuiltImage,
    /// Whether it carries the results port's module.
    pub(crate) port: bool,
}

impl PreparedImage {
    /// The image as a boot's record names it.
    pub(crate) fn initramfs_ref(&self) -> crate::results::InitramfsRef {
        crate::results::InitramfsRef {
            path: self.built.path.clone(),
            sha256: self.built.sha256.clone(),
            bytes: self.built.bytes,
        }
    }
}

/// The image a run boots `k` with: `--initramfs`, or one built for the
/// suite with the modules the run needs.
pub(crate) fn prepare_image(
    args: &RunOptions,
    arch: Arch,
    suite: &loads::suite::Suite,
    k: &KernelUnderTest,
    early_modules: &[String],
    dir: &Path,
) -> anyhow::Result<PreparedImage> {
    if let Some(p) = &args.initramfs {
        let data = std::fs::read(p).with_context(|| format!("cannot read initramfs {}", p.display()))?;
        let built = boot_image::BuiltImage {
            path: p.clone(),
            sha256: hex::encode(Sha256::digest(&data)),
            bytes: data.len() as u64,
            raw_bytes: 0,
            init_bytes: 0,
            modules: Vec::new(),
            early_modules: Vec::new(),
            lab_modules: Vec::new(),
            files: Vec::new(),
        };
        return Ok(PreparedImage { built, port: !args.no_port });
    }
    let (modules, port) = match (args.no_port, k.virtio_console(), k.modules_known()) {
        (true, _, _) => (Vec::new(), false),
        (false, Some('y'), _) => (Vec::new(), true),
        (false, Some('m'), true) => (RESULT_PORT_MODULES.iter().map(|s| s.to_string()).collect(), true),
        (false, state, _) => {
            log::info!(
                "no results port for {}: virtio_console is {} (console only)",
                k.image.display(),
                match state {
                    Some('m') => "a module but the modules tree is unknown (give --modules-dir)",
                    Some(_) => "not built",
                    None => "unknown (no kernel config found)",
                }
            );
            (Vec::new(), false)
        }
    };
    let lab = args.lab.target()? != crate::boot::target::Target::Qemu;
    let modules = if args.serve || args.upload_url.is_some() || lab {
        crate::boot::run_upload::image_modules(k.config.as_deref(), k.modules_known(), modules)?
    } else {
        modules
    };
    let modules_dir = match (&k.tree, &k.modules_dir) {
        (Some(tree), None) if tree.modular && !(modules.is_empty() && early_modules.is_empty()) => {
            // Installed into the run's scratch directory: gone with the
            // run, and on Ctrl-C with the rest of it.
            let root = dir.join(format!("modules-{}", &k.image_sha256[..12]));
            let names: Vec<&str> = early_modules.iter().chain(&modules).map(String::as_str).collect();
            let installed = tree.install_modules(&names, &root)?;
            log::info!(
                "kernel tree {}: installed modules {} into {}",
                tree.dir.display(),
                installed.modules.join(","),
                installed.modules_dir.display()
            );
            Some(installed.modules_dir)
        }
        _ => k.modules_dir.clone(),
    };
    let spec = ImageSpec {
        arch,
        suite: suite.clone(),
        modules,
        early_modules: early_modules.to_vec(),
        modules_dir,
        init: None,
        // A plain archive starts the guest soonest (measured by `bootbench
        // overhead`), and every kernel unpacks it.
        compression: boot_image::DEFAULT_COMPRESSION,
    };
    let out = dir.join(format!("initramfs-{}.cpio{}", &k.image_sha256[..12], spec.compression.extension()));
    let built = boot_image::build(&spec, &out)?;
    Ok(PreparedImage { built, port })
}
