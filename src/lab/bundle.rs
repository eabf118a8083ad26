//! `bootbench lab bundle`: what a lab needs to make the agent its
//! machine's default boot. The agent is the appliance's own init in role
//! `agent` ([`loads::lab_protocol`]): a kernel, an initramfs with the
//! machine's token in its secrets segment (never on the cmdline), the
//! exact cmdline, and ready-to-use entries for GRUB, iPXE and PXELINUX.
//! The initramfs carries the disk and ext4 modules the kernel builds as
//! modules, for the machine's pack store.

use super::LabError;
use crate::boot::image::{self as boot_image, ImageSpec};
use crate::boot::kernels::{resolve_kernels, KernelUnderTest};
use crate::boot::options::RunOptions;
use crate::boot::secrets_segment::{self, GuestSecrets};
use clap::Parser;
use loads::lab_protocol;
use std::path::{Path, PathBuf};

/// What `lab bundle` takes.
#[derive(Debug, Clone, clap::Args)]
pub struct BundleArgs {
    /// The machine's name, as `bootbench lab machine add` gave it.
    #[arg(long)]
    pub machine: String,
    /// The receiver's base URL as the machine reaches it, e.g.
    /// http://10.0.0.1:8080 (`bootbench serve` with the store that holds
    /// the machine).
    #[arg(long, value_name = "URL")]
    pub lab: String,
    /// The file holding the machine's token (what `lab machine add`
    /// printed); it goes into the initramfs's secrets segment.
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
    /// The agent's kernel: an image file or a kernel tree; by default the
    /// cached Debian kernel of --arch (fetched if missing). It must have
    /// KEXEC_FILE and the machine's network driver.
    #[arg(long, value_name = "IMAGE|TREE")]
    pub kernel: Option<PathBuf>,
    /// The machine's arch.
    #[arg(long, default_value = "x86_64")]
    pub arch: String,
    /// The kernel's modules tree (`lib/modules/RELEASE`), when --kernel is
    /// an image whose modules are not beside it.
    #[arg(long)]
    pub modules_dir: Option<PathBuf>,
    /// The machine's console: `ttyS0,115200n8` on x86, `hvc0` on pSeries
    /// by default.
    #[arg(long)]
    pub console: Option<String>,
    /// More cmdline words for the agent (e.g. `bootbench.iface=eth1`,
    /// `bootbench.ip=10.0.0.5/24`).
    #[arg(long)]
    pub append: Option<String>,
    /// Where to write the bundle (created; files in it are replaced).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// The directory.
    pub dir: PathBuf,
    /// The agent's cmdline.
    pub cmdline: String,
    /// The files, by name.
    pub files: Vec<String>,
}

/// The kernel file name in the bundle.
pub const KERNEL_FILE: &str = "vmlinuz";
/// The initramfs file name.
pub const INITRD_FILE: &str = "initramfs.cpio";
/// The cmdline file name.
pub const CMDLINE_FILE: &str = "cmdline";

#[derive(Debug, Parser)]
struct RunOnly {
    #[command(flatten)]
    run: RunOptions,
}

/// The console an arch's machines have by default.
fn default_console(arch: qemu::Arch) -> &'static str {
    match arch {
        qemu::Arch::Ppc64 | qemu::Arch::Ppc64le => "hvc0",
        _ => "ttyS0,115200n8",
    }
}

/// The agent's cmdline: its console, a reboot 10 s after a panic (so a
/// broken agent comes back by itself), the role, the receiver and the
/// machine, then the user's words.
pub fn agent_cmdline(args: &BundleArgs, arch: qemu::Arch) -> Result<String, LabError> {
    let bad = |why: String| LabError::Bundle { what: "the agent's cmdline".into(), why };
    results_uploader::parse_base_url(&args.lab).map_err(|e| bad(format!("--lab {}: {e}", args.lab)))?;
    if !lab_protocol::valid_machine_name(&args.machine) {
        return Err(bad(format!("--machine {}: not a machine name", args.machine)));
    }
    let console = args.console.clone().unwrap_or_else(|| default_console(arch).to_string());
    let mut c = qemu::KernelCmdline::new(arch.profile().cmdline_capacity).map_err(|e| bad(e.to_string()))?;
    let words = format!(
        "console={console} panic=10 {}=agent {}={} {}={} bootbench.accel=bare-metal {}",
        lab_protocol::ROLE_KEY,
        lab_protocol::LAB_URL_KEY,
        args.lab.trim_end_matches('/'),
        lab_protocol::MACHINE_KEY,
        args.machine,
        args.append.as_deref().unwrap_or("")
    );
    c.extend_raw(words.trim()).map_err(|e| bad(e.to_string()))?;
    Ok(c.as_str().to_string())
}

/// Writes the bundle.
pub fn write(args: &BundleArgs) -> anyhow::Result<Bundle> {
    let arch: qemu::Arch = args.arch.parse()?;
    let cmdline = agent_cmdline(args, arch)?;
    let token = crate::service::tokens::read_token_file(&args.token_file)?;
    let mut argv = vec!["run".to_string(), "--arch".into(), args.arch.clone()];
    if let Some(k) = &args.kernel {
        argv.extend(["--kernel".into(), k.display().to_string()]);
    }
    if let Some(m) = &args.modules_dir {
        argv.extend(["--modules-dir".into(), m.display().to_string()]);
    }
    let run = RunOnly::try_parse_from(&argv).map_err(|e| anyhow::anyhow!("internal: run options: {e}"))?.run;
    let kernels = resolve_kernels(&run, arch)?;
    let k: &KernelUnderTest =
        kernels.first().ok_or_else(|| anyhow::anyhow!("internal: no kernel resolved for the bundle"))?;
    std::fs::create_dir_all(&args.output).map_err(|source| LabError::Write { path: args.output.clone(), source })?;
    let modules = crate::boot::run_upload::image_modules(k.config.as_deref(), k.modules_known(), Vec::new())?;
    // The disk and ext4 modules, for a machine with a pack store (its
    // agent fetches packs into it): loaded at every start, whether or not
    // the machine has one, so a store added later needs no new bundle.
    let early_modules = match k.config.as_deref() {
        Some(config) => {
            let config = crate::boot::scratch_disk::KernelConfig::read(config)?;
            match crate::boot::scratch_disk::lab_scratch_modules(&config, k.modules_known(), None) {
                Ok(m) => m,
                Err(e) => {
                    log::warn!("the agent cannot keep a pack store: {}", loads::error_chain::error_chain(&e));
                    Vec::new()
                }
            }
        }
        None => Vec::new(),
    };
    let work = tempfile::Builder::new().prefix("bootbench-bundle-").tempdir()?;
    let spec = ImageSpec {
        arch,
        suite: loads::suite::Suite::builtin("quick")?,
        modules,
        early_modules,
        modules_dir: k.modules_dir.clone(),
        init: None,
        compression: boot_image::DEFAULT_COMPRESSION,
    };
    let plain = work.path().join("agent.cpio");
    boot_image::build(&spec, &plain)?;
    let segment = secrets_segment::segment(&GuestSecrets { upload_token: token, upload_ca_pem: None })?;
    let initrd = args.output.join(INITRD_FILE);
    remove_if_there(&initrd)?;
    secrets_segment::write_with_segment(&plain, &segment, &initrd)?;
    let kernel = args.output.join(KERNEL_FILE);
    std::fs::copy(&k.image, &kernel).map_err(|source| LabError::Write { path: kernel.clone(), source })?;
    let mut files = vec![KERNEL_FILE.to_string(), INITRD_FILE.to_string()];
    for (name, text) in [
        (CMDLINE_FILE, format!("{cmdline}\n")),
        ("grub.cfg", grub_entry(&args.machine, &cmdline)),
        ("ipxe.txt", ipxe_script(&cmdline)),
        ("pxelinux.cfg", pxelinux_entry(&args.machine, &cmdline)),
    ] {
        let path = args.output.join(name);
        std::fs::write(&path, text).map_err(|source| LabError::Write { path: path.clone(), source })?;
        files.push(name.to_string());
    }
    Ok(Bundle { dir: args.output.clone(), cmdline, files })
}

fn remove_if_there(path: &Path) -> Result<(), LabError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(LabError::Write { path: path.to_path_buf(), source: e })
        }
        _ => Ok(()),
    }
}

/// A GRUB menuentry, to be made the default (`GRUB_DEFAULT`): the files
/// are expected in /boot/bootbench/ of the machine's boot partition.
pub fn grub_entry(machine: &str, cmdline: &str) -> String {
    format!(
        "# bootbench lab agent for machine {machine}: copy {KERNEL_FILE} and {INITRD_FILE} to /boot/bootbench/,\n\
         # add this entry (e.g. to /etc/grub.d/40_custom), make it the default and run update-grub.\n\
         menuentry 'bootbench agent ({machine})' --id bootbench-agent {{\n\
         \tlinux /boot/bootbench/{KERNEL_FILE} {cmdline}\n\
         \tinitrd /boot/bootbench/{INITRD_FILE}\n\
         }}\n"
    )
}

/// An iPXE script (the files served next to it over HTTP or TFTP).
pub fn ipxe_script(cmdline: &str) -> String {
    format!(
        "#!ipxe\n# bootbench lab agent: serve {KERNEL_FILE} and {INITRD_FILE} next to this script.\n\
         kernel {KERNEL_FILE} initrd={INITRD_FILE} {cmdline}\ninitrd {INITRD_FILE}\nboot\n"
    )
}

/// A PXELINUX entry (the files in the TFTP root's bootbench/ directory).
pub fn pxelinux_entry(machine: &str, cmdline: &str) -> String {
    format!(
        "# bootbench lab agent for machine {machine}: put {KERNEL_FILE} and {INITRD_FILE} in bootbench/ under the TFTP root.\n\
         DEFAULT bootbench-agent\nLABEL bootbench-agent\n  KERNEL bootbench/{KERNEL_FILE}\n  INITRD bootbench/{INITRD_FILE}\n  APPEND {cmdline}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> BundleArgs {
        BundleArgs {
            machine: "box1".into(),
            lab: "http://10.0.0.1:8080/".into(),
            token_file: "/nonexistent".into(),
            kernel: None,
            arch: "x86_64".into(),
            modules_dir: None,
            console: None,
            append: Some("bootbench.iface=eth1".into()),
            output: "/nonexistent".into(),
        }
    }

    #[test]
    fn the_agent_cmdline_names_role_receiver_machine_and_console_and_never_a_token() {
        let c = agent_cmdline(&args(), qemu::Arch::X86_64).unwrap();
        assert_eq!(
            c,
            "console=ttyS0,115200n8 panic=10 bootbench.role=agent bootbench.lab=http://10.0.0.1:8080 \
             bootbench.machine=box1 bootbench.accel=bare-metal bootbench.iface=eth1"
        );
        assert!(agent_cmdline(&args(), qemu::Arch::Ppc64).unwrap().starts_with("console=hvc0 "));
        // The agent's cmdline parses in the guest as an agent's.
        let parsed = loads::suite::CmdlineConfig::parse(&c);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn bad_machine_names_urls_and_duplicate_keys_are_refused_naming_them() {
        let e = agent_cmdline(&BundleArgs { machine: "a b".into(), ..args() }, qemu::Arch::X86_64).unwrap_err();
        assert!(e.to_string().contains("--machine a b"), "{e}");
        let e = agent_cmdline(&BundleArgs { lab: "ftp://x".into(), ..args() }, qemu::Arch::X86_64).unwrap_err();
        assert!(e.to_string().contains("--lab ftp://x"), "{e}");
        let e =
            agent_cmdline(&BundleArgs { append: Some("panic=5".into()), ..args() }, qemu::Arch::X86_64).unwrap_err();
        assert!(e.to_string().contains("panic"), "{e}");
    }

    #[test]
    fn the_boot_entries_carry_the_exact_cmdline_and_the_files() {
        let c = "console=ttyS0 bootbench.role=agent";
        for text in [grub_entry("m", c), ipxe_script(c), pxelinux_entry("m", c)] {
            assert!(text.contains(c) && text.contains(KERNEL_FILE) && text.contains(INITRD_FILE), "{text}");
        }
        assert!(ipxe_script(c).starts_with("#!ipxe\n"));
        assert!(grub_entry("m", c).contains(&format!("linux /boot/bootbench/{KERNEL_FILE} {c}\n")));
    }
}
