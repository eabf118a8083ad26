//! Kernel modules for the image: finds modules in an extracted
//! `lib/modules/<release>` directory and orders the closure of their
//! dependencies for loading. It only reads files on the host; it never loads
//! a module and never runs depmod or modprobe.
//!
//! Dependencies come from `modules.dep` when the tree has one. Debian's
//! linux-image packages ship without it (their postinst runs depmod), so
//! otherwise every `*.ko` file under the tree is indexed by name and the
//! `depends=` entry of each needed module is read from its ELF `.modinfo`
//! section. Modules listed in `modules.builtin` are part of the kernel image
//! and are skipped: there is nothing to load.

use object::{Object, ObjectSection};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// File-name suffixes of kernel modules, with the compression of each.
const MODULE_SUFFIXES: [(&str, ModuleCompression); 4] = [
    (".ko", ModuleCompression::None),
    (".ko.zst", ModuleCompression::Zstd),
    (".ko.gz", ModuleCompression::Gzip),
    (".ko.xz", ModuleCompression::Xz),
];

/// Errors while indexing a module tree or resolving modules in it.
#[derive(Debug, thiserror::Error)]
pub enum ModulesError {
    /// The tree directory cannot be opened.
    #[error("cannot open module tree {dir}")]
    OpenTree {
        /// The directory as given.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The tree path is not a directory.
    #[error("module tree {dir} is not a directory")]
    NotADirectory {
        /// The path as given.
        dir: PathBuf,
    },
    /// A directory inside the tree cannot be listed.
    #[error("cannot list {dir} while indexing modules")]
    ListDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// `modules.dep` or `modules.builtin` exists but cannot be read.
    #[error("cannot read {path}")]
    ReadIndex {
        /// The index file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A `modules.dep` line is not `module.ko: dep.ko ...`.
    #[error("{path}:{line}: malformed modules.dep line {text:?}")]
    BadDepLine {
        /// The modules.dep file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A requested module is neither in the tree nor built in.
    #[error("module {name} not found in {dir} (no module file, not in modules.builtin)")]
    UnknownModule {
        /// The module name, normalized to underscores.
        name: String,
        /// The tree directory.
        dir: PathBuf,
    },
    /// A module depends on one that is neither in the tree nor built in.
    #[error("module {name}, needed by {needed_by}, not found in {dir} (no module file, not in modules.builtin)")]
    UnknownDependency {
        /// The missing dependency.
        name: String,
        /// The module that depends on it.
        needed_by: String,
        /// The tree directory.
        dir: PathBuf,
    },
    /// A module file cannot be read.
    #[error("cannot read module {path}")]
    ReadModule {
        /// The module file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A module file is not an ELF object.
    #[error("module {path} is not a valid ELF object")]
    BadElf {
        /// The module file.
        path: PathBuf,
        /// The parser error.
        #[source]
        source: object::Error,
    },
    /// A module file has no `.modinfo` section, so it is not a kernel module.
    #[error("module {path} has no .modinfo section")]
    NoModinfo {
        /// The module file.
        path: PathBuf,
    },
    /// A module's `.modinfo` `name=` differs from its file name.
    #[error("module {path} is named {found:?} in its .modinfo, but its file name says {expected:?}")]
    NameMismatch {
        /// The module file.
        path: PathBuf,
        /// The name from the file name.
        expected: String,
        /// The name from `.modinfo`.
        found: String,
    },
    /// A compressed module in a format this crate cannot decompress.
    #[error("compressed module not supported: {path} is {format}-compressed; decompress the tree first (e.g. `find DIR -name '*.ko.xz' -exec xz -d {{}} +`) or run depmod so modules.dep is used")]
    UnsupportedCompression {
        /// The module file.
        path: PathBuf,
        /// The compression format.
        format: &'static str,
    },
    /// Modules depend on each other in a circle.
    #[error("module dependency cycle: {}", cycle.join(" -> "))]
    Cycle {
        /// The modules on the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
}

/// One module to load, in the order [`ModuleTree::resolve`] returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleFile {
    /// The module name, with underscores (e.g. `virtio_net`).
    pub name: String,
    /// The file on the host (absolute).
    pub path: PathBuf,
    /// The file relative to the tree, e.g. `kernel/drivers/virtio/virtio.ko`;
    /// it goes to `lib/modules/<release>/<rel>` in the image.
    pub rel: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModuleCompression {
    None,
    Zstd,
    Gzip,
    Xz,
}

/// The modules of one kernel release, indexed by name.
pub struct ModuleTree {
    /// The tree directory, canonical.
    dir: PathBuf,
    release: String,
    /// Module name to its file, relative to `dir`.
    files: BTreeMap<String, PathBuf>,
    /// Dependencies by module name, from `modules.dep`; `None` when the tree
    /// has none and dependencies are read from each module's `.modinfo`.
    dep_file: Option<BTreeMap<String, Vec<String>>>,
    /// Names listed in `modules.builtin`.
    builtin: BTreeSet<String>,
}

impl fmt::Debug for ModuleTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModuleTree")
            .field("dir", &self.dir)
            .field("release", &self.release)
            .field("modules", &self.files.len())
            .field("builtin", &self.builtin.len())
            .field("modules_dep", &self.dep_file.is_some())
            .finish()
    }
}

enum Visit {
    InProgress,
    Done,
}

impl ModuleTree {
    /// `dir` is an extracted `lib/modules/<release>` directory (e.g. from a
    /// Debian linux-image .deb via `dpkg-deb -x`).
    ///
    /// With `modules.dep` present, the modules it lists are the tree. Without
    /// it, every `*.ko`, `*.ko.zst`, `*.ko.gz` and `*.ko.xz` file under `dir`
    /// is indexed; symlinks (such as `build` and `source`) are not followed.
    /// If a name appears twice, the file under `updates/` wins, as with
    /// depmod's default search order, and otherwise the first path in sort
    /// order.
    pub fn open(dir: &Path) -> Result<ModuleTree, ModulesError> {
        let open_error = |source| ModulesError::OpenTree { dir: dir.to_owned(), source };
        if !fs::metadata(dir).map_err(open_error)?.is_dir() {
            return Err(ModulesError::NotADirectory { dir: dir.to_owned() });
        }
        let dir = fs::canonicalize(dir).map_err(open_error)?;
        let release = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();

        let builtin = match read_index(&dir.join("modules.builtin"))? {
            Some(text) => text.lines().filter_map(|l| module_name(Path::new(l.trim()))).collect(),
            None => BTreeSet::new(),
        };
        let dep_path = dir.join("modules.dep");
        let (files, dep_file) = match read_index(&dep_path)? {
            Some(text) => {
                let (files, deps) = parse_modules_dep(&text, &dep_path, &dir, &release)?;
                (files, Some(deps))
            }
            None => {
                let mut files = BTreeMap::new();
                index_dir(&dir, Path::new(""), &mut files)?;
                (files, None)
            }
        };
        Ok(ModuleTree { dir, release, files, dep_file, builtin })
    }

    /// The release, i.e. the tree directory's name (e.g. `6.1.0-28-amd64`).
    pub fn release(&self) -> &str {
        &self.release
    }

    /// The tree directory, canonical.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `name` (dash and underscore equivalent) is built into the kernel.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&normalize(name))
    }

    /// The modules named (dash and underscore equivalent, e.g. "virtio_net"
    /// or "virtio-net") plus every dependency, in load order: dependencies
    /// first, each module once. Built-in modules are left out. The order is
    /// deterministic: names as given, each module's dependencies in the
    /// order its `depends=` lists them, or, from `modules.dep`, in the order
    /// modprobe would load them.
    pub fn resolve(&self, names: &[&str]) -> Result<Vec<ModuleFile>, ModulesError> {
        let mut state = HashMap::new();
        let mut path = Vec::new();
        let mut order = Vec::new();
        for name in names {
            self.visit(&normalize(name), None, &mut state, &mut path, &mut order)?;
        }
        Ok(order)
    }

    /// Depth-first post-order walk; `path` is the chain being visited, for
    /// reporting a cycle.
    fn visit(
        &self,
        name: &str,
        needed_by: Option<&str>,
        state: &mut HashMap<String, Visit>,
        path: &mut Vec<String>,
        order: &mut Vec<ModuleFile>,
    ) -> Result<(), ModulesError> {
        match state.get(name) {
            Some(Visit::Done) => return Ok(()),
            Some(Visit::InProgress) => {
                let start = path.iter().position(|p| p == name).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(name.to_owned());
                return Err(ModulesError::Cycle { cycle });
            }
            None => {}
        }
        if self.builtin.contains(name) {
            state.insert(name.to_owned(), Visit::Done);
            return Ok(());
        }
        let Some(rel) = self.files.get(name) else {
            return Err(match needed_by {
                None => ModulesError::UnknownModule { name: name.to_owned(), dir: self.dir.clone() },
                Some(parent) => ModulesError::UnknownDependency {
                    name: name.to_owned(),
                    needed_by: parent.to_owned(),
                    dir: self.dir.clone(),
                },
            });
        };
        let file = self.dir.join(rel);
        let deps = match &self.dep_file {
            Some(deps) => {
                // modules.dep is trusted for dependencies, but the file must exist.
                fs::metadata(&file).map_err(|source| ModulesError::ReadModule { path: file.clone(), source })?;
                deps.get(name).cloned().unwrap_or_default()
            }
            None => {
                let info = read_modinfo(&file)?;
                if let Some(found) = info.name.filter(|found| found != name) {
                    return Err(ModulesError::NameMismatch { path: file, expected: name.to_owned(), found });
                }
                info.depends
            }
        };
        state.insert(name.to_owned(), Visit::InProgress);
        path.push(name.to_owned());
        for dep in &deps {
            self.visit(dep, Some(name), state, path, order)?;
        }
        path.pop();
        state.insert(name.to_owned(), Visit::Done);
        order.push(ModuleFile { name: name.to_owned(), path: file, rel: rel.clone() });
        Ok(())
    }
}

/// Module names treat `-` and `_` alike; the kernel uses `_`.
fn normalize(name: &str) -> String {
    name.replace('-', "_")
}

/// The module name of a module file path, or `None` if it is not a module.
fn module_name(path: &Path) -> Option<String> {
    let file_name = path.file_name()?.to_str()?;
    MODULE_SUFFIXES
        .iter()
        .find_map(|(suffix, _)| file_name.strip_suffix(suffix))
        .filter(|stem| !stem.is_empty())
        .map(normalize)
}

fn module_compression(path: &Path) -> ModuleCompression {
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    MODULE_SUFFIXES.iter().find(|(suffix, _)| file_name.ends_with(suffix)).map_or(ModuleCompression::None, |(_, c)| *c)
}

/// Reads an optional index file: `None` if it does not exist.
fn read_index(path: &Path) -> Result<Option<String>, ModulesError> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ModulesError::ReadIndex { path: path.to_owned(), source }),
    }
}

type DepIndex = (BTreeMap<String, PathBuf>, BTreeMap<String, Vec<String>>);

/// Parses `modules.dep`: `kernel/a.ko: kernel/b.ko kernel/c.ko` per line.
/// Paths are relative to the tree, or absolute in old depmod output.
fn parse_modules_dep(text: &str, dep_path: &Path, dir: &Path, release: &str) -> Result<DepIndex, ModulesError> {
    let mut files = BTreeMap::new();
    let mut deps = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || ModulesError::BadDepLine { path: dep_path.to_owned(), line: index + 1, text: line.to_owned() };
        let (module, rest) = line.split_once(':').ok_or_else(bad)?;
        let entry = |p: &str| -> Option<(String, PathBuf)> {
            let rel = relative_module_path(Path::new(p), dir, release)?;
            Some((module_name(&rel)?, rel))
        };
        let (name, rel) = entry(module.trim()).ok_or_else(bad)?;
        let mut module_deps = Vec::new();
        for dep in rest.split_whitespace() {
            let (dep_name, _) = entry(dep).ok_or_else(bad)?;
            module_deps.push(dep_name);
        }
        // modules.dep lists the whole closure with the deepest dependency
        // last, and modprobe loads it from the end; visiting it reversed
        // gives the same order.
        module_deps.reverse();
        files.entry(name.clone()).or_insert(rel);
        deps.entry(name).or_insert(module_deps);
    }
    Ok((files, deps))
}

fn relative_module_path(path: &Path, dir: &Path, release: &str) -> Option<PathBuf> {
    if path.is_relative() {
        return Some(path.to_owned());
    }
    let prefixes =
        [dir.to_owned(), Path::new("/lib/modules").join(release), Path::new("/usr/lib/modules").join(release)];
    prefixes.iter().find_map(|prefix| path.strip_prefix(prefix).ok()).map(Path::to_owned)
}

/// Adds every module file under `dir.join(sub)` to `files`, without
/// following symlinks.
fn index_dir(dir: &Path, sub: &Path, files: &mut BTreeMap<String, PathBuf>) -> Result<(), ModulesError> {
    let here = dir.join(sub);
    let list_error = |source| ModulesError::ListDir { dir: here.clone(), source };
    for entry in fs::read_dir(&here).map_err(list_error)? {
        let entry = entry.map_err(list_error)?;
        let file_type = entry.file_type().map_err(list_error)?;
        let rel = sub.join(entry.file_name());
        if file_type.is_dir() {
            index_dir(dir, &rel, files)?;
        } else if file_type.is_file() {
            if let Some(name) = module_name(&rel) {
                match files.get(&name) {
                    Some(existing) if search_rank(existing) <= search_rank(&rel) => {}
                    _ => {
                        files.insert(name, rel);
                    }
                }
            }
        }
    }
    Ok(())
}

/// Orders duplicate module files: `updates/` first, then by path.
fn search_rank(rel: &Path) -> (bool, &Path) {
    (!rel.starts_with("updates"), rel)
}

/// What resolution needs from a module's `.modinfo`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Modinfo {
    name: Option<String>,
    depends: Vec<String>,
}

fn read_modinfo(path: &Path) -> Result<Modinfo, ModulesError> {
    let read_error = |source| ModulesError::ReadModule { path: path.to_owned(), source };
    let elf = match module_compression(path) {
        ModuleCompression::None => fs::read(path).map_err(read_error)?,
        ModuleCompression::Zstd => {
            zstd::decode_all(io::BufReader::new(fs::File::open(path).map_err(read_error)?)).map_err(read_error)?
        }
        ModuleCompression::Gzip => {
            let mut out = Vec::new();
            let file = fs::File::open(path).map_err(read_error)?;
            flate2::read::MultiGzDecoder::new(io::BufReader::new(file)).read_to_end(&mut out).map_err(read_error)?;
            out
        }
        // No xz decoder among this crate's dependencies; Debian's 6.1 kernels
        // ship uncompressed modules.
        ModuleCompression::Xz => {
            return Err(ModulesError::UnsupportedCompression { path: path.to_owned(), format: "xz" })
        }
    };
    let bad_elf = |source| ModulesError::BadElf { path: path.to_owned(), source };
    let object = object::File::parse(&elf[..]).map_err(bad_elf)?;
    let section =
        object.section_by_name(".modinfo").ok_or_else(|| ModulesError::NoModinfo { path: path.to_owned() })?;
    Ok(parse_modinfo(section.data().map_err(bad_elf)?))
}

/// Parses `.modinfo`: NUL-separated `key=value` strings (with NUL padding).
fn parse_modinfo(data: &[u8]) -> Modinfo {
    let mut info = Modinfo::default();
    for entry in data.split(|&b| b == 0) {
        let Ok(entry) = std::str::from_utf8(entry) else { continue };
        if let Some(name) = entry.strip_prefix("name=") {
            info.name = Some(normalize(name));
        } else if let Some(depends) = entry.strip_prefix("depends=") {
            for dep in depends.split(',').map(str::trim).filter(|d| !d.is_empty()) {
                let dep = normalize(dep);
                if !info.depends.contains(&dep) {
                    info.depends.push(dep);
                }
            }
        }
    }
    info
}

#[cfg(test)]
mod tests {
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
        let modinfo =
            [format!("name={name}"), "intree=Y".into(), format!("depends={depends}"), "vermagic=6.1.0".into()];
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
        put(tmp.path(), "kernel/xzed.ko.xz", b"\xfd7zXZ\0");
        let tree = ModuleTree::open(tmp.path()).unwrap();
        assert_eq!(names(&tree.resolve(&["ibmvnic"]).unwrap()), ["zdep", "gzdep", "ibmvnic"]);
        let err = tree.resolve(&["xzed"]).unwrap_err();
        assert!(err.to_string().starts_with("compressed module not supported: "), "{err}");
        assert!(err.to_string().contains("xzed.ko.xz"), "{err}");
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
}
