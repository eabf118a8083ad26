//! Kernel modules for the image: finds modules in an extracted
//! `lib/modules/<release>` directory and orders the closure of their
//! dependencies for loading. It only reads files on the host; it never loads
//! a module and never runs depmod or modprobe.
//!
//! Dependencies come from `modules.dep` when the tree has one. Debian's
//! linux-image packages ship without it (their postinst runs depmod), so
//! otherwise every `*.ko` file under the tree is indexed by name and the
//! `depends=` entry of each needed module is read from its ELF `.modinfo`
//! section (of a plain, zstd-, gzip- or xz-compressed file). Modules listed
//! in `modules.builtin` are part of the kernel image and are skipped: there
//! is nothing to load.

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

/// The module name of a module file path (`drivers/block/virtio_blk.ko.xz`
/// gives `virtio_blk`), or `None` if it is not a module file name.
pub fn module_name(path: &Path) -> Option<String> {
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

/// The modules `path` (a module file, plain or compressed) depends on: the
/// `depends=` entry modpost wrote into its `.modinfo`, the same symbol
/// dependencies depmod would find. A `.modinfo` `name=` other than the file
/// name's is an error.
pub fn read_depends(path: &Path) -> Result<Vec<String>, ModulesError> {
    let info = read_modinfo(path)?;
    let expected = module_name(path).unwrap_or_default();
    match info.name {
        Some(found) if found != expected => Err(ModulesError::NameMismatch { path: path.to_owned(), expected, found }),
        _ => Ok(info.depends),
    }
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
        ModuleCompression::Xz => {
            let mut out = Vec::new();
            let file = fs::File::open(path).map_err(read_error)?;
            lzma_rs::xz_decompress(&mut io::BufReader::new(file), &mut out)
                .map_err(|e| read_error(io::Error::new(io::ErrorKind::InvalidData, e.to_string())))?;
            out
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
mod tests;
