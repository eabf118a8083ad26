//! A kernel tree the user built, booted as it is ("boot the kernel I just
//! built"): a source tree built in place, or an out-of-tree build directory
//! (`make O=...`). It finds the arch's boot image, the release and the
//! `.config`, tells the arch from that config, checks the config the way
//! `bootbench kernel check` does, and installs the modules a run needs
//! into a directory of the caller's. It reads the tree and never writes to
//! it; it never runs the tree's `make`, only names the command to run.

use super::build::ArchBuild;
use super::check::{self, CheckError, KernelConfig};
use qemu::Arch;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors while reading a kernel tree or installing its modules.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The directory has no sign of a kernel tree.
    #[error(
        "{dir} is a directory but not a kernel tree (no .config, Makefile or include/config/kernel.release); \
         give --kernel a kernel image file, a kernel source tree or a build directory (make O=...)"
    )]
    NotATree {
        /// The directory.
        dir: PathBuf,
    },
    /// A source tree without a `.config`: never configured, or built out
    /// of tree, in which case its build directory holds the image.
    #[error(
        "kernel tree {dir} has no .config, so it is not built here; if it was built out of tree \
         (make O=BUILD), the boot image is in the build directory, not in {dir}: give --kernel BUILD{found}. \
         Otherwise configure and build it: `{configure}` (with the options `bootbench kernel config` lists), then `{build}`"
    )]
    NotConfigured {
        /// The source tree.
        dir: PathBuf,
        /// The build directories found inside it, as `; found ...`.
        found: String,
        /// A command that configures the tree.
        configure: String,
        /// The command that builds it.
        build: String,
    },
    /// A file the tree has but cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The `.config` is not a kernel config.
    #[error("cannot use the kernel tree's config")]
    Config(#[source] CheckError),
    /// The `.config` is for an arch bootbench does not boot.
    #[error(
        "cannot tell the arch of the kernel tree {dir}: its .config sets none of CONFIG_X86_64, CONFIG_X86_32, CONFIG_PPC64"
    )]
    UnknownArch {
        /// The tree.
        dir: PathBuf,
    },
    /// `--arch` names another arch than the tree's `.config`.
    #[error(
        "--arch {given}, but the kernel tree {dir} is configured for {configured} (its .config); \
         drop --arch to boot it as {configured}, or give a tree built for {given}"
    )]
    ArchMismatch {
        /// The arch given.
        given: Arch,
        /// The tree.
        dir: PathBuf,
        /// The arch of the tree's config.
        configured: Arch,
    },
    /// The `.config` lacks options the appliance needs.
    #[error(
        "the kernel tree {dir} cannot run the appliance: its .config lacks {missing}; \
         `bootbench kernel config --arch {arch}` lists what it needs\n{report}",
        missing = missing.join(", ")
    )]
    CannotRun {
        /// The tree.
        dir: PathBuf,
        /// The arch checked for.
        arch: Arch,
        /// The options missing, as `CONFIG_NAME`.
        missing: Vec<String>,
        /// `bootbench kernel check`'s report.
        report: String,
    },
    /// The tree is configured but what a boot needs is not built yet.
    #[error("kernel tree {dir} is not built: {missing} is missing; build it with `{command}`")]
    NotBuilt {
        /// The tree.
        dir: PathBuf,
        /// The file that is missing.
        missing: PathBuf,
        /// The command that builds it.
        command: String,
    },
    /// A module the run needs is neither built nor built in.
    #[error(
        "module {name}{needed_by} is not in {dir}/modules.order nor in its modules.builtin (the .config does not build it)"
    )]
    UnknownModule {
        /// The module.
        name: String,
        /// ", needed by M" when it is a dependency.
        needed_by: String,
        /// The tree.
        dir: PathBuf,
    },
    /// A module listed in `modules.order` has no file beside its object.
    #[error("module {name} is listed in {dir}/modules.order as {listed}, but no .ko file is there; build it with `{command}`")]
    ModuleNotBuilt {
        /// The module.
        name: String,
        /// The tree.
        dir: PathBuf,
        /// The `modules.order` line.
        listed: String,
        /// The command that builds it.
        command: String,
    },
    /// A module file could not be read for its dependencies.
    #[error("cannot read the dependencies of a module of the kernel tree")]
    Module(#[source] image::modules::ModulesError),
    /// Modules depend on each other in a circle.
    #[error("module dependency cycle in the kernel tree {dir}: {}", cycle.join(" -> "))]
    Cycle {
        /// The tree.
        dir: PathBuf,
        /// The modules on the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// The install directory could not be written.
    #[error("cannot write {path}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// A configured and built kernel tree, checked for one arch.
#[derive(Debug, Clone)]
pub struct KernelTree {
    /// The tree given: the build directory, where `.config` is.
    pub dir: PathBuf,
    /// The source tree when `dir` is an out-of-tree build directory.
    pub source: Option<PathBuf>,
    /// The arch the tree's config builds.
    pub arch: Arch,
    /// The `.config`.
    pub config_path: PathBuf,
    /// The parsed `.config`.
    pub config: KernelConfig,
    /// The boot image QEMU takes for the arch (`arch/x86/boot/bzImage`, or
    /// `vmlinux` at the tree's root for pseries).
    pub image: PathBuf,
    /// `include/config/kernel.release`.
    pub release: String,
    /// Whether the config builds loadable modules (`CONFIG_MODULES=y`).
    pub modular: bool,
}

/// Modules installed from a tree, laid out as `lib/modules/RELEASE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledModules {
    /// `ROOT/lib/modules/RELEASE`, the tree an image packs modules from.
    pub modules_dir: PathBuf,
    /// The modules installed, dependencies first.
    pub modules: Vec<String>,
}

/// Whether `dir` looks like a kernel tree (a `.config`, a `Makefile` or
/// `include/config/kernel.release`) rather than any directory.
pub fn looks_like_tree(dir: &Path) -> bool {
    [".config", "Makefile", "include/config/kernel.release"].iter().any(|f| dir.join(f).is_file())
}

impl KernelTree {
    /// Opens the built tree at `dir` and checks it for booting: the arch
    /// from its `.config` (which must be `given`'s when one is given), the
    /// config against the appliance's needs, and the boot image, the
    /// release and (for a modular kernel) `modules.order` built.
    pub fn open(dir: &Path, given: Option<Arch>) -> Result<KernelTree, TreeError> {
        let config_path = dir.join(".config");
        let is_source = dir.join("Kconfig").is_file() && dir.join("Makefile").is_file();
        if !config_path.is_file() {
            if !looks_like_tree(dir) {
                return Err(TreeError::NotATree { dir: dir.to_path_buf() });
            }
            let arch = given.unwrap_or(Arch::X86_64);
            let (source, build) = if is_source { (None, dir) } else { (source_of(dir), dir) };
            let invocation = make_invocation(source.as_deref(), build, arch);
            let defconfig = ArchBuild::of(arch).defconfig;
            return Err(TreeError::NotConfigured {
                dir: dir.to_path_buf(),
                found: build_dirs_in(dir)
                    .iter()
                    .map(|d| format!("; found {}", d.display()))
                    .collect::<Vec<_>>()
                    .concat(),
                configure: format!("{invocation} {defconfig}"),
                build: build_command(source.as_deref(), build, arch, true),
            });
        }
        if !looks_like_tree(dir) || !(dir.join("Makefile").is_file() || release_file(dir).is_file()) {
            return Err(TreeError::NotATree { dir: dir.to_path_buf() });
        }
        let source = if is_source { None } else { source_of(dir) };
        let text = std::fs::read_to_string(&config_path)
            .map_err(|source| TreeError::Read { path: config_path.clone(), source })?;
        let config = KernelConfig::parse(&text, &config_path).map_err(TreeError::Config)?;
        let configured = config.arch().ok_or_else(|| TreeError::UnknownArch { dir: dir.to_path_buf() })?;
        if let Some(given) = given.filter(|g| *g != configured) {
            return Err(TreeError::ArchMismatch { given, dir: dir.to_path_buf(), configured });
        }
        let arch = configured;
        let report = check::check(&config, arch);
        if !report.can_run() {
            return Err(TreeError::CannotRun {
                dir: dir.to_path_buf(),
                arch,
                missing: report.missing(),
                report: report.render(false),
            });
        }
        let modular = config.get("MODULES") == Some("y");
        let not_built = |missing: PathBuf| TreeError::NotBuilt {
            dir: dir.to_path_buf(),
            missing,
            command: build_command(source.as_deref(), dir, arch, modular),
        };
        let image = dir.join(ArchBuild::of(arch).image_path);
        if !image.is_file() {
            return Err(not_built(image));
        }
        let release = match std::fs::read_to_string(release_file(dir)) {
            Ok(text) if !text.trim().is_empty() => text.trim().to_string(),
            Ok(_) => return Err(not_built(release_file(dir))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_built(release_file(dir))),
            Err(source) => return Err(TreeError::Read { path: release_file(dir), source }),
        };
        if modular && !dir.join("modules.order").is_file() {
            return Err(not_built(dir.join("modules.order")));
        }
        Ok(KernelTree { dir: dir.to_path_buf(), source, arch, config_path, config, image, release, modular })
    }

    /// The command that builds this tree's image (and modules).
    pub fn build_command(&self) -> String {
        build_command(self.source.as_deref(), &self.dir, self.arch, self.modular)
    }

    /// What the tree is, for the results: `tree DIR (git COMMIT)`, with
    /// the source tree of a build directory, and `no git` outside a
    /// checkout. The commit is `git rev-parse --short=12 HEAD` of the
    /// source: cheap, and a failure only leaves the commit out.
    pub fn describe(&self) -> String {
        let checkout = self.source.as_deref().unwrap_or(&self.dir);
        let git = Command::new("git")
            .arg("-C")
            .arg(checkout)
            .args(["rev-parse", "--short=12", "HEAD"])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .filter(|c| !c.is_empty());
        let mut out = format!("tree {}", self.dir.display());
        let mut said = Vec::new();
        if let Some(s) = &self.source {
            said.push(format!("source {}", s.display()));
        }
        said.push(git.map_or("no git".to_string(), |c| format!("git {c}")));
        let _ = write!(out, " ({})", said.join(", "));
        out
    }

    /// Installs `names` (dash and underscore alike) and every module they
    /// depend on into `root`, laid out as `root/lib/modules/RELEASE` with
    /// `modules.dep`, `modules.order` and `modules.builtin`, as `make
    /// modules_install INSTALL_MOD_PATH=root` would; built-in modules are
    /// skipped.
    ///
    /// It does not run `make modules_install`: that installs every module
    /// of the config (thousands for a distribution's, each stripped,
    /// compressed and signed as the config says, which takes minutes and the
    /// signing key), needs the tree's exact toolchain and `ARCH=`, and a
    /// kbuild that finds its config stale may rewrite the tree. Instead the
    /// modules come from `modules.order` and the `.ko` files beside their
    /// objects (plain or compressed: `.ko.zst`, `.ko.xz`, `.ko.gz`), and each
    /// one's dependencies from its `.modinfo` `depends=`, which modpost
    /// wrote from the same symbols depmod reads; so only the few modules a
    /// run needs are read and copied, in milliseconds, without depmod
    /// (which this host may lack) and without touching the tree.
    pub fn install_modules(&self, names: &[&str], root: &Path) -> Result<InstalledModules, TreeError> {
        let order_path = self.dir.join("modules.order");
        let order = std::fs::read_to_string(&order_path)
            .map_err(|source| TreeError::Read { path: order_path.clone(), source })?;
        let builtin = match std::fs::read_to_string(self.dir.join("modules.builtin")) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(source) => return Err(TreeError::Read { path: self.dir.join("modules.builtin"), source }),
        };
        let builtin_names: BTreeSet<String> =
            builtin.lines().filter_map(|l| image::modules::module_name(Path::new(l.trim()))).collect();
        let listed = listed_modules(&order);
        let mut walk = Closure { tree: self, listed: &listed, builtin: &builtin_names, files: BTreeMap::new() };
        let mut order_out: Vec<String> = Vec::new();
        let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut path = Vec::new();
        for name in names {
            walk.visit(&name.replace('-', "_"), None, &mut path, &mut order_out, &mut deps)?;
        }
        let modules_dir = root.join("lib/modules").join(&self.release);
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| TreeError::Write { path, source }
        };
        std::fs::create_dir_all(&modules_dir).map_err(write_err(&modules_dir))?;
        let installed_rel = |name: &str| Path::new("kernel").join(&walk.files[name]);
        for name in &order_out {
            let to = modules_dir.join(installed_rel(name));
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(write_err(parent))?;
            }
            std::fs::copy(self.dir.join(&walk.files[name]), &to).map_err(write_err(&to))?;
        }
        // modules.dep as depmod writes it: each module's whole closure, the
        // deepest dependency last (modprobe loads from the end).
        let mut dep_text = String::new();
        let mut order_text = String::new();
        for name in &order_out {
            let mut closure = Vec::new();
            closure_of(name, &deps, &mut closure);
            closure.pop(); // the module itself, last in post-order
            let listed: Vec<String> =
                closure.iter().rev().map(|d| installed_rel(d).to_string_lossy().into_owned()).collect();
            let _ = writeln!(dep_text, "{}: {}", installed_rel(name).display(), listed.join(" "));
            let _ = writeln!(order_text, "{}", installed_rel(name).display());
        }
        for (file, text) in [("modules.dep", dep_text), ("modules.order", order_text), ("modules.builtin", builtin)] {
            let p = modules_dir.join(file);
            std::fs::write(&p, text).map_err(write_err(&p))?;
        }
        Ok(InstalledModules { modules_dir, modules: order_out })
    }
}

/// The depth-first walk over module dependencies of
/// [`KernelTree::install_modules`].
struct Closure<'a> {
    tree: &'a KernelTree,
    /// Module name to its `modules.order` line, as written.
    listed: &'a BTreeMap<String, String>,
    builtin: &'a BTreeSet<String>,
    /// Module name to its file, relative to the tree (visited modules).
    files: BTreeMap<String, PathBuf>,
}

impl Closure<'_> {
    fn visit(
        &mut self,
        name: &str,
        needed_by: Option<&str>,
        path: &mut Vec<String>,
        order: &mut Vec<String>,
        deps: &mut BTreeMap<String, Vec<String>>,
    ) -> Result<(), TreeError> {
        if deps.contains_key(name) || self.builtin.contains(name) {
            return Ok(());
        }
        if let Some(at) = path.iter().position(|p| p == name) {
            let mut cycle = path[at..].to_vec();
            cycle.push(name.to_string());
            return Err(TreeError::Cycle { dir: self.tree.dir.clone(), cycle });
        }
        let dir = &self.tree.dir;
        let listed = self.listed.get(name).ok_or_else(|| TreeError::UnknownModule {
            name: name.to_string(),
            needed_by: needed_by.map(|m| format!(", needed by {m},")).unwrap_or_default(),
            dir: dir.clone(),
        })?;
        let file = module_file(dir, listed).ok_or_else(|| TreeError::ModuleNotBuilt {
            name: name.to_string(),
            dir: dir.clone(),
            listed: listed.clone(),
            command: self.tree.build_command(),
        })?;
        let module_deps = image::modules::read_depends(&dir.join(&file)).map_err(TreeError::Module)?;
        path.push(name.to_string());
        for d in &module_deps {
            self.visit(d, Some(name), path, order, deps)?;
        }
        path.pop();
        let kept: Vec<String> = module_deps.into_iter().filter(|d| !self.builtin.contains(d)).collect();
        deps.insert(name.to_string(), kept);
        self.files.insert(name.to_string(), file);
        order.push(name.to_string());
        Ok(())
    }
}

/// `name`'s dependencies and then `name`, each once, in load order.
fn closure_of(name: &str, deps: &BTreeMap<String, Vec<String>>, out: &mut Vec<String>) {
    for d in deps.get(name).into_iter().flatten() {
        closure_of(d, deps, out);
    }
    if !out.iter().any(|o| o == name) {
        out.push(name.to_string());
    }
}

/// The modules of a build tree's `modules.order`, by name. Its lines are
/// `drivers/block/virtio_blk.o` since Linux 6.2 and `.ko` before (and
/// `kernel/...ko` in an installed one).
fn listed_modules(order: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in order.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let ko = match line.strip_suffix(".o") {
            Some(stem) => format!("{stem}.ko"),
            None => line.to_string(),
        };
        if let Some(name) = image::modules::module_name(Path::new(&ko)) {
            out.entry(name).or_insert_with(|| line.to_string());
        }
    }
    out
}

/// The built file of a `modules.order` line, relative to the tree: the
/// `.ko` beside the object, plain or compressed.
fn module_file(dir: &Path, listed: &str) -> Option<PathBuf> {
    let stem = listed.strip_suffix(".o").or_else(|| listed.strip_suffix(".ko")).unwrap_or(listed);
    let stems = [Some(stem), stem.strip_prefix("kernel/")];
    stems.into_iter().flatten().find_map(|stem| {
        [".ko", ".ko.zst", ".ko.xz", ".ko.gz"]
            .iter()
            .map(|suffix| PathBuf::from(format!("{stem}{suffix}")))
            .find(|rel| dir.join(rel).is_file())
    })
}

fn release_file(dir: &Path) -> PathBuf {
    dir.join("include/config/kernel.release")
}

/// The source tree of an out-of-tree build directory: kbuild links it as
/// `source`, and its generated `Makefile` includes the source's.
fn source_of(build: &Path) -> Option<PathBuf> {
    if let Ok(target) = std::fs::read_link(build.join("source")) {
        return Some(if target.is_absolute() { target } else { build.join(target) });
    }
    let makefile = std::fs::read_to_string(build.join("Makefile")).ok()?;
    makefile
        .lines()
        .find_map(|l| l.trim().strip_prefix("include "))
        .and_then(|p| p.trim().strip_suffix("/Makefile"))
        .map(PathBuf::from)
}

/// Build directories inside a source tree (where `bootbench kernel build`
/// and many users put them): subdirectories with a `.config` and a
/// `Makefile`.
fn build_dirs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(".config").is_file() && p.join("Makefile").is_file())
        .collect();
    found.sort();
    found
}

/// A path as a shell word.
fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    if s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@".contains(&b)) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `make -C SOURCE [O=BUILD] [ARCH=... CROSS_COMPILE=...]`: the source
/// tree is `build` itself when there is no separate one. A cross build
/// (ppc64 on another host) names its arch and compiler.
fn make_invocation(source: Option<&Path>, build: &Path, arch: Arch) -> String {
    let mut cmd = format!("make -C {}", shell_word(source.unwrap_or(build)));
    if source.is_some() {
        let _ = write!(cmd, " O={}", shell_word(build));
    }
    let settings = ArchBuild::of(arch);
    if settings.make_arch == "powerpc" && std::env::consts::ARCH != "powerpc64" {
        let _ = write!(cmd, " ARCH=powerpc CROSS_COMPILE={}", settings.cross_compile);
    }
    cmd
}

/// The command that builds the arch's boot image, and the modules when
/// the config builds any.
fn build_command(source: Option<&Path>, build: &Path, arch: Arch, modular: bool) -> String {
    let target = ArchBuild::of(arch).target;
    let modules = if modular { " modules" } else { "" };
    format!("{} -j$(nproc) {target}{modules}", make_invocation(source, build, arch))
}

#[cfg(test)]
mod tests;
