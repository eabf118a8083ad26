//! Whether a kernel can run the appliance, judged from its config: finds the
//! config of a kernel image (beside it, in its build tree or cache entry, or
//! embedded with IKCONFIG), parses it, and compares it with
//! [`config_fragment::REQUIREMENTS`](super::config_fragment::REQUIREMENTS).
//! It only reads files; it never boots or changes anything.

use super::config_fragment::{requirements, Need, Requirement};
use qemu::Arch;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// Errors while finding or reading a kernel config.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The path given does not exist.
    #[error("{path} does not exist")]
    NotFound {
        /// The path given.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is a kernel image, but no config was found for it.
    #[error("no config for the kernel {path}: looked for {looked_for}, and the image embeds none (IKCONFIG)")]
    NoConfig {
        /// The image.
        path: PathBuf,
        /// Where the config was looked for.
        looked_for: String,
    },
    /// The embedded config could not be decompressed.
    #[error("the config embedded in {path} (IKCONFIG) is damaged")]
    Embedded {
        /// The image.
        path: PathBuf,
        /// The decompression error.
        #[source]
        source: std::io::Error,
    },
    /// A text file that is not a kernel config.
    #[error("{path} is not a kernel config: {why}")]
    NotConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line number.
        why: String,
    },
    /// The config's arch cannot be told and none was given.
    #[error("cannot tell the arch of {path} (none of CONFIG_X86_64, CONFIG_X86_32, CONFIG_PPC64 is set); give --arch")]
    UnknownArch {
        /// Where the config came from.
        path: PathBuf,
    },
}

/// A parsed kernel `.config`: every option that is set, by name without
/// the `CONFIG_` prefix, with its raw value (`y`, `m`, a number or a quoted
/// string). Options that are absent or `# ... is not set` are not stored.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KernelConfig {
    values: BTreeMap<String, String>,
}

impl KernelConfig {
    /// Parses config text. Blank lines and comments are skipped; any other
    /// line must be `CONFIG_NAME=VALUE`. `origin` names the text in errors.
    pub fn parse(text: &str, origin: &Path) -> Result<KernelConfig, CheckError> {
        let mut values = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| CheckError::NotConfig {
                path: origin.to_path_buf(),
                why: format!("line {}: {why}: {line:.80}", n + 1),
            };
            let (name, value) = line.split_once('=').ok_or_else(|| bad("no '='"))?;
            let name = name.strip_prefix("CONFIG_").ok_or_else(|| bad("option does not start with CONFIG_"))?;
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(bad("bad option name"));
            }
            if value != "n" {
                values.insert(name.to_string(), value.to_string());
            }
        }
        if values.is_empty() {
            return Err(CheckError::NotConfig { path: origin.to_path_buf(), why: "no CONFIG_ option is set".into() });
        }
        Ok(KernelConfig { values })
    }

    /// The raw value of `option` (without `CONFIG_`), `None` when not set.
    pub fn get(&self, option: &str) -> Option<&str> {
        self.values.get(option).map(String::as_str)
    }

    /// The guest arch this config builds a kernel for, if it is one bootbench boots.
    pub fn arch(&self) -> Option<Arch> {
        let yes = |o: &str| self.get(o) == Some("y");
        if yes("X86_64") {
            Some(Arch::X86_64)
        } else if yes("X86_32") {
            Some(Arch::I386)
        } else if yes("PPC64") {
            Some(if yes("CPU_LITTLE_ENDIAN") { Arch::Ppc64le } else { Arch::Ppc64 })
        } else {
            None
        }
    }

    /// The base page size in bytes the config selects, when it says.
    pub fn page_size(&self) -> Option<u64> {
        let yes = |o: &str| self.get(o) == Some("y");
        if yes("PPC_64K_PAGES") || yes("ARM64_64K_PAGES") {
            Some(65536)
        } else if yes("PPC_16K_PAGES") || yes("ARM64_16K_PAGES") {
            Some(16384)
        } else if yes("PPC_4K_PAGES") || yes("X86") {
            Some(4096)
        } else {
            None
        }
    }
}

/// A config with where it came from.
#[derive(Debug, Clone)]
pub struct LocatedConfig {
    /// The config file, or the image it was extracted from.
    pub source: PathBuf,
    /// Whether it was extracted from the image (IKCONFIG).
    pub embedded: bool,
    /// The parsed config.
    pub config: KernelConfig,
}

/// Finds and parses the config for `path`: a config file; a kernel image,
/// whose config is `config-SUFFIX` beside `vmlinu[xz]-SUFFIX` (the Debian and
/// bootbench cache layout), the `.config` of the build tree it sits in, or
/// the one it embeds; or a directory (a cache entry with `kernel.json`, or a
/// build tree with `.config`).
pub fn locate(path: &Path) -> Result<LocatedConfig, CheckError> {
    if !path.exists() {
        return Err(CheckError::NotFound { path: path.to_path_buf() });
    }
    let read = |p: &Path| std::fs::read(p).map_err(|source| CheckError::Read { path: p.to_path_buf(), source });
    let parse_file = |p: &Path| -> Result<LocatedConfig, CheckError> {
        let bytes = read(p)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| CheckError::NotConfig { path: p.to_path_buf(), why: "it is not text".into() })?;
        Ok(LocatedConfig { source: p.to_path_buf(), embedded: false, config: KernelConfig::parse(&text, p)? })
    };
    if path.is_dir() {
        let candidates = config_candidates_in_dir(path);
        return match candidates.iter().find(|c| c.is_file()) {
            Some(found) => parse_file(found),
            None => Err(CheckError::NoConfig { path: path.to_path_buf(), looked_for: list(&candidates) }),
        };
    }
    let bytes = read(path)?;
    if looks_like_text(&bytes) {
        return parse_file(path);
    }
    let candidates = config_candidates_for_image(path);
    if let Some(found) = candidates.iter().find(|c| c.is_file()) {
        return parse_file(found);
    }
    match embedded_config(&bytes).map_err(|source| CheckError::Embedded { path: path.to_path_buf(), source })? {
        Some(text) => {
            Ok(LocatedConfig { source: path.to_path_buf(), embedded: true, config: KernelConfig::parse(&text, path)? })
        }
        None => Err(CheckError::NoConfig { path: path.to_path_buf(), looked_for: list(&candidates) }),
    }
}

fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Text files are configs; kernel images are binary (ELF or bzImage).
fn looks_like_text(bytes: &[u8]) -> bool {
    let head = bytes.get(..bytes.len().min(4096)).unwrap_or(bytes);
    !head.contains(&0) && std::str::from_utf8(head).is_ok()
}

fn config_candidates_in_dir(dir: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![dir.join(".config")];
    // A cache entry: boot/config-RELEASE.
    if let Ok(entries) = std::fs::read_dir(dir.join("boot")) {
        let mut configs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("config-")))
            .collect();
        configs.sort();
        candidates.extend(configs);
    }
    candidates
}

/// Where the config of a kernel image is usually found.
pub fn config_candidates_for_image(image: &Path) -> Vec<PathBuf> {
    let name = image.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let dir = image.parent().unwrap_or(Path::new("."));
    let mut candidates = Vec::new();
    if let Some(suffix) = name.strip_prefix("vmlinuz-").or_else(|| name.strip_prefix("vmlinux-")) {
        candidates.push(dir.join(format!("config-{suffix}")));
    }
    // arch/x86/boot/bzImage and vmlinux sit up to 3 levels below the tree.
    candidates.extend(dir.ancestors().take(4).map(|d| d.join(".config")));
    candidates
}

/// The config an image embeds with CONFIG_IKCONFIG: gzip data between the
/// `IKCFG_ST` and `IKCFG_ED` markers (scripts/extract-ikconfig does the
/// same). Only uncompressed images (vmlinux) show it; a bzImage hides it in
/// its compressed payload.
pub fn embedded_config(image: &[u8]) -> std::io::Result<Option<String>> {
    const START: &[u8] = b"IKCFG_ST";
    let Some(at) = image.windows(START.len()).position(|w| w == START) else {
        return Ok(None);
    };
    let gz = image.get(at + START.len()..).unwrap_or_default();
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz).read_to_string(&mut text)?;
    Ok(Some(text))
}

/// How one requirement fares in a config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Set as needed.
    Ok,
    /// `=m`, which works once the module is packed into the image.
    Module,
    /// A module where only built in works.
    ModuleNotAllowed,
    /// Not set: the appliance cannot run.
    Missing,
    /// A recommended option is not set.
    Weak,
}

/// One requirement and the config's value for it.
#[derive(Debug, Clone)]
pub struct Finding {
    /// The requirement.
    pub requirement: &'static Requirement,
    /// The config's value, `None` when not set.
    pub value: Option<String>,
    /// The verdict.
    pub verdict: Verdict,
}

/// The result of checking one config for one arch.
#[derive(Debug, Clone)]
pub struct CheckReport {
    /// The arch checked for.
    pub arch: Arch,
    /// The arch the config is for, when it can be told.
    pub config_arch: Option<Arch>,
    /// The config's base page size, when it says.
    pub page_size: Option<u64>,
    /// One finding per requirement of the arch, in table order.
    pub findings: Vec<Finding>,
}

impl CheckReport {
    /// Whether the kernel can run the appliance (no missing requirement).
    pub fn can_run(&self) -> bool {
        !self.findings.iter().any(|f| matches!(f.verdict, Verdict::Missing | Verdict::ModuleNotAllowed))
    }

    /// The options the appliance needs that the config lacks (or builds
    /// as a module where only built in works), as `CONFIG_NAME`.
    pub fn missing(&self) -> Vec<String> {
        self.findings
            .iter()
            .filter(|f| matches!(f.verdict, Verdict::Missing | Verdict::ModuleNotAllowed))
            .map(|f| format!("CONFIG_{}", f.requirement.option))
            .collect()
    }

    /// The modules that must be packed into the image.
    pub fn modules(&self) -> Vec<&'static str> {
        self.findings.iter().filter(|f| f.verdict == Verdict::Module).filter_map(|f| f.requirement.module).collect()
    }

    /// A readable report: every problem with its reason, the modules to
    /// pack, and the verdict; `all` lists the options that are fine too.
    pub fn render(&self, all: bool) -> String {
        let mut out = String::new();
        let config_arch = self.config_arch.map_or("an unknown arch".to_string(), |a| a.to_string());
        let _ = write!(out, "checking for {}: the config is for {config_arch}", self.arch);
        if let Some(page) = self.page_size {
            let _ = write!(out, ", {} KiB pages", page / 1024);
        }
        out.push('\n');
        for f in &self.findings {
            let r = f.requirement;
            let value = match &f.value {
                Some(v) => format!("CONFIG_{}={v}", r.option),
                None => format!("CONFIG_{} is not set", r.option),
            };
            let line = match f.verdict {
                Verdict::Ok if !all => continue,
                Verdict::Ok => format!("  ok       {value}"),
                Verdict::Module => format!(
                    "  module   {value}: {} (pack module {} into the image)",
                    r.why,
                    r.module.unwrap_or(r.option)
                ),
                Verdict::ModuleNotAllowed => format!("  MISSING  {value}: {} (must be built in, =y)", r.why),
                Verdict::Missing => format!("  MISSING  {value}: {} ({})", r.why, r.need.name()),
                Verdict::Weak => format!("  weak     {value}: {} (recommended)", r.why),
            };
            out.push_str(&line);
            out.push('\n');
        }
        let ok = self.findings.iter().filter(|f| f.verdict == Verdict::Ok).count();
        let _ = writeln!(out, "{ok} of {} options as needed", self.findings.len());
        let missing = self.missing();
        if missing.is_empty() {
            let modules = self.modules();
            if modules.is_empty() {
                let _ = writeln!(out, "verdict: can run the appliance, with no modules");
            } else {
                let _ = writeln!(out, "verdict: can run the appliance, with modules {}", modules.join(", "));
            }
        } else {
            let _ = writeln!(
                out,
                "verdict: cannot run the appliance; missing {} (see `bootbench kernel config --arch {}`)",
                missing.join(", "),
                self.arch
            );
        }
        out
    }
}

/// Checks `config` against the requirements of `arch`.
pub fn check(config: &KernelConfig, arch: Arch) -> CheckReport {
    let findings = requirements(arch)
        .map(|r| {
            let value = config.get(r.option).map(str::to_string);
            let verdict = match (value.as_deref(), r.need) {
                (Some("y"), _) => Verdict::Ok,
                (Some("m"), Need::BuiltInOrModule) => Verdict::Module,
                (Some("m"), Need::BuiltIn) => Verdict::ModuleNotAllowed,
                (_, Need::Recommended) => Verdict::Weak,
                (_, _) => Verdict::Missing,
            };
            Finding { requirement: r, value, verdict }
        })
        .collect();
    CheckReport { arch, config_arch: config.arch(), page_size: config.page_size(), findings }
}

/// The arch to check for: `given`, else the config's own.
pub fn arch_for(located: &LocatedConfig, given: Option<Arch>) -> Result<Arch, CheckError> {
    given.or_else(|| located.config.arch()).ok_or_else(|| CheckError::UnknownArch { path: located.source.clone() })
}

#[cfg(test)]
mod tests {
    use super::super::config_fragment::fragment;
    use super::*;
    use std::io::Write as _;

    fn parse(text: &str) -> KernelConfig {
        KernelConfig::parse(text, Path::new("test.config")).unwrap()
    }

    #[test]
    fn fragment_passes_its_own_check() {
        for arch in Arch::ALL {
            let config = parse(&fragment(arch));
            let report = check(&config, arch);
            assert!(report.can_run(), "{arch}:\n{}", report.render(true));
            assert!(report.modules().is_empty());
            assert!(report.findings.iter().all(|f| f.verdict == Verdict::Ok));
            assert_eq!(config.arch(), Some(arch), "{arch}");
        }
    }

    #[test]
    fn debian_style_config_needs_modules() {
        let mut text = fragment(Arch::Ppc64le);
        for m in ["VIRTIO_CONSOLE", "VIRTIO_PCI", "VIRTIO_BLK", "VIRTIO_NET"] {
            text = text.replace(&format!("CONFIG_{m}=y"), &format!("CONFIG_{m}=m"));
        }
        text.push_str("CONFIG_PPC_64K_PAGES=y\n");
        let report = check(&parse(&text), Arch::Ppc64le);
        assert!(report.can_run());
        assert_eq!(report.modules(), ["virtio_pci", "virtio_console", "virtio_blk", "virtio_net"]);
        assert_eq!(report.page_size, Some(65536));
        let shown = report.render(false);
        assert!(shown.contains("pack module virtio_console"), "{shown}");
        assert!(shown.contains("64 KiB pages"), "{shown}");
        assert!(shown.contains("verdict: can run the appliance, with modules virtio_pci"), "{shown}");
    }

    #[test]
    fn each_missing_option_is_named() {
        let text = fragment(Arch::X86_64)
            .replace("CONFIG_DEVTMPFS=y", "# CONFIG_DEVTMPFS is not set")
            .replace("CONFIG_TMPFS=y", "CONFIG_TMPFS=m")
            .replace("CONFIG_IP_PNP=y\n", "");
        let report = check(&parse(&text), Arch::X86_64);
        assert!(!report.can_run());
        let shown = report.render(false);
        assert!(shown.contains("MISSING  CONFIG_DEVTMPFS is not set: the init mounts /dev as devtmpfs"), "{shown}");
        assert!(shown.contains("MISSING  CONFIG_TMPFS=m"), "{shown}");
        assert!(shown.contains("must be built in"), "{shown}");
        assert!(shown.contains("weak     CONFIG_IP_PNP is not set"), "{shown}");
        assert!(shown.contains("missing CONFIG_DEVTMPFS, CONFIG_TMPFS (see"), "{shown}");
    }

    #[test]
    fn config_of_another_arch_fails() {
        let config = parse(&fragment(Arch::Ppc64le));
        let report = check(&config, Arch::Ppc64);
        assert!(!report.can_run());
        assert_eq!(report.config_arch, Some(Arch::Ppc64le));
        let shown = report.render(false);
        assert!(shown.contains("the config is for ppc64le"), "{shown}");
        assert!(shown.contains("CONFIG_CPU_BIG_ENDIAN is not set"), "{shown}");
    }

    #[test]
    fn arch_is_told_from_the_config() {
        assert_eq!(parse("CONFIG_X86_32=y\nCONFIG_X86=y\n").arch(), Some(Arch::I386));
        assert_eq!(parse("CONFIG_PPC64=y\nCONFIG_CPU_BIG_ENDIAN=y\n").arch(), Some(Arch::Ppc64));
        assert_eq!(parse("CONFIG_ARM64=y\n").arch(), None);
        let located = LocatedConfig { source: "c".into(), embedded: false, config: parse("CONFIG_ARM64=y\n") };
        let e = arch_for(&located, None).unwrap_err();
        assert!(e.to_string().contains("give --arch"), "{e}");
        assert_eq!(arch_for(&located, Some(Arch::I386)).unwrap(), Arch::I386);
    }

    #[test]
    fn bad_config_lines_are_errors_with_line_numbers() {
        let e = KernelConfig::parse("CONFIG_A=y\nhello world\n", Path::new("x.config")).unwrap_err();
        assert_eq!(e.to_string(), "x.config is not a kernel config: line 2: no '=': hello world");
        let e = KernelConfig::parse("FOO=y\n", Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("does not start with CONFIG_"), "{e}");
        let e = KernelConfig::parse("# only comments\n", Path::new("x")).unwrap_err();
        assert!(e.to_string().contains("no CONFIG_ option is set"), "{e}");
    }

    #[test]
    fn locates_config_beside_image_in_dir_and_embedded() {
        let dir = tempfile::tempdir().unwrap();
        let boot = dir.path().join("boot");
        std::fs::create_dir(&boot).unwrap();
        let image = boot.join("vmlinux-6.1.0-test");
        std::fs::write(&image, b"\x7fELF\0\0binary").unwrap();
        let e = locate(&image).unwrap_err();
        assert!(e.to_string().contains("config-6.1.0-test"), "{e}");
        std::fs::write(boot.join("config-6.1.0-test"), fragment(Arch::Ppc64)).unwrap();
        let found = locate(&image).unwrap();
        assert_eq!(found.source, boot.join("config-6.1.0-test"));
        assert!(!found.embedded);
        // The cache entry directory finds the same config.
        assert_eq!(locate(dir.path()).unwrap().source, boot.join("config-6.1.0-test"));

        // An image that carries its config (IKCONFIG) and has none beside it.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(fragment(Arch::I386).as_bytes()).unwrap();
        let mut bytes = b"\x7fELF\0junk IKCFG_ST".to_vec();
        bytes.extend(gz.finish().unwrap());
        bytes.extend(b"IKCFG_ED\0more");
        // Deep enough that no ancestor's .config outside the temp dir is looked at.
        let deep = dir.path().join("a/b/c/d");
        std::fs::create_dir_all(&deep).unwrap();
        let lone = deep.join("vmlinux");
        std::fs::write(&lone, &bytes).unwrap();
        let found = locate(&lone).unwrap();
        assert!(found.embedded);
        assert_eq!(found.config.arch(), Some(Arch::I386));

        let e = locate(&dir.path().join("nope")).unwrap_err();
        assert!(e.to_string().ends_with("nope does not exist"), "{e}");
    }
}
