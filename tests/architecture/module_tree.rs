//! The module tree of one crate, read from its sources: a node per file and
//! per inline `mod`, with the names each module defines and imports. It only
//! reads and records; what a path means is `name_resolution`'s business.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::visit::{self, Visit};

/// Index of a module in [`ModuleTree::modules`]; the crate root is 0.
pub type ModuleId = usize;

/// The crate root's id.
pub const CRATE_ROOT: ModuleId = 0;

/// Marks a path written with a leading `::` (always another crate).
pub const EXTERN_PREFIX: &str = "::";

/// One module: a file, or an inline `mod x { ... }`.
pub struct Module {
    /// `["crate", "a", "b"]` for `crate::a::b`.
    pub name_path: Vec<String>,
    /// The file its code is in.
    pub file: PathBuf,
    /// None for the crate root.
    pub parent: Option<ModuleId>,
    /// Child modules by name.
    pub children: BTreeMap<String, ModuleId>,
    /// Declared under `#[cfg(test)]` (or inside such a module).
    pub cfg_test: bool,
    /// Its own items; the `mod` items among them are other nodes.
    pub items: Vec<syn::Item>,
    /// Names of the items defined here, in function bodies too (child
    /// modules are in `children`).
    pub defined: BTreeSet<String>,
    /// The variants of each enum defined here, for `use Enum::*`.
    pub enum_variants: BTreeMap<String, BTreeSet<String>>,
    /// Every name a `use` here binds, with the path(s) it was bound to as
    /// written. A `use` in a function body counts for the whole module.
    pub imports: BTreeMap<String, Vec<Vec<String>>>,
    /// The paths of the `use ...::*` here, as written.
    pub globs: Vec<Vec<String>>,
}

impl Module {
    /// `crate::a::b`, with ` [cfg(test)]` after a test module.
    pub fn display_name(&self) -> String {
        let name = self.name_path.join("::");
        if self.cfg_test {
            format!("{name} [cfg(test)]")
        } else {
            name
        }
    }
}

/// All modules of one crate.
pub struct ModuleTree {
    /// Indexed by [`ModuleId`].
    pub modules: Vec<Module>,
    /// `mod x;` declarations whose file does not exist (cfg'd-out platform
    /// modules, say); they are empty nodes.
    pub missing_files: Vec<String>,
}

/// Why a crate could not be read.
#[derive(Debug)]
pub enum LoadError {
    /// A source file could not be read.
    Read(PathBuf, std::io::Error),
    /// A source file is not Rust that syn parses.
    Parse(PathBuf, syn::Error),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            LoadError::Parse(path, e) => {
                let at = e.span().start();
                write!(f, "cannot parse {}:{}:{}: {e}", path.display(), at.line, at.column + 1)
            }
        }
    }
}

/// Where the `mod` declarations of some code look for their files.
struct ModDirs {
    /// Directory of the source file the code is in (base of `#[path]` at a
    /// file's top level).
    file_dir: PathBuf,
    /// Where `mod x;` finds `x.rs` or `x/mod.rs` (and the base of `#[path]`
    /// inside inline modules).
    child_dir: PathBuf,
    /// The code is inside an inline `mod x { ... }`.
    inline: bool,
}

impl ModuleTree {
    /// Reads the crate whose root file is `root` (a lib.rs, main.rs, or any
    /// target's src_path), following `mod` declarations.
    pub fn load(root: &Path) -> Result<ModuleTree, LoadError> {
        let mut tree = ModuleTree { modules: Vec::new(), missing_files: Vec::new() };
        tree.load_file(root, vec!["crate".to_string()], None, false, true)?;
        Ok(tree)
    }

    /// The module's parent, if any.
    pub fn parent(&self, id: ModuleId) -> Option<ModuleId> {
        self.modules[id].parent
    }

    fn load_file(
        &mut self,
        path: &Path,
        name_path: Vec<String>,
        parent: Option<ModuleId>,
        cfg_test: bool,
        mod_rs: bool,
    ) -> Result<ModuleId, LoadError> {
        let text = std::fs::read_to_string(path).map_err(|e| LoadError::Read(path.to_path_buf(), e))?;
        let file = syn::parse_file(&text).map_err(|e| LoadError::Parse(path.to_path_buf(), e))?;
        let file_dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        // A crate root, a mod.rs and a file named by #[path] own their
        // directory; any other `a.rs` keeps its children in `a/`.
        let child_dir = match path.file_stem() {
            Some(stem) if !mod_rs && path.file_name() != Some(std::ffi::OsStr::new("mod.rs")) => file_dir.join(stem),
            _ => file_dir.clone(),
        };
        let dirs = ModDirs { file_dir, child_dir, inline: false };
        self.add_module(name_path, path, parent, cfg_test, file.items, &dirs)
    }

    fn add_module(
        &mut self,
        name_path: Vec<String>,
        file: &Path,
        parent: Option<ModuleId>,
        cfg_test: bool,
        items: Vec<syn::Item>,
        dirs: &ModDirs,
    ) -> Result<ModuleId, LoadError> {
        let id = self.modules.len();
        let mut scope = ScopeCollector::default();
        for item in &items {
            scope.visit_item(item);
        }
        self.modules.push(Module {
            name_path: name_path.clone(),
            file: file.to_path_buf(),
            parent,
            children: BTreeMap::new(),
            cfg_test,
            items: Vec::new(),
            defined: scope.defined,
            enum_variants: scope.enum_variants,
            imports: scope.imports,
            globs: scope.globs,
        });
        for item in &items {
            let syn::Item::Mod(decl) = item else { continue };
            let name = decl.ident.unraw().to_string();
            let child_cfg_test = cfg_test || is_cfg_test(&decl.attrs);
            let mut child_name = name_path.clone();
            child_name.push(name.clone());
            let path_attr = path_attribute(&decl.attrs);
            let child = match &decl.content {
                Some((_, content)) => {
                    let inner = ModDirs {
                        file_dir: dirs.file_dir.clone(),
                        child_dir: dirs.child_dir.join(path_attr.as_deref().unwrap_or(&name)),
                        inline: true,
                    };
                    self.add_module(child_name, file, Some(id), child_cfg_test, content.clone(), &inner)?
                }
                None => {
                    let (candidates, mod_rs) = match &path_attr {
                        Some(p) if dirs.inline => (vec![dirs.child_dir.join(p)], true),
                        Some(p) => (vec![dirs.file_dir.join(p)], true),
                        None => (
                            vec![dirs.child_dir.join(format!("{name}.rs")), dirs.child_dir.join(&name).join("mod.rs")],
                            false,
                        ),
                    };
                    match candidates.iter().find(|c| c.is_file()) {
                        Some(found) => self.load_file(found, child_name, Some(id), child_cfg_test, mod_rs)?,
                        None => {
                            self.missing_files.push(format!(
                                "{}: mod {name}: none of {}",
                                file.display(),
                                candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ")
                            ));
                            let empty =
                                ModDirs { file_dir: dirs.file_dir.clone(), child_dir: PathBuf::new(), inline: false };
                            self.add_module(child_name, file, Some(id), child_cfg_test, Vec::new(), &empty)?
                        }
                    }
                }
            };
            self.modules[id].children.insert(name, child);
        }
        self.modules[id].items = items;
        Ok(id)
    }
}

/// `#[cfg(test)]`, or `#[cfg(all(test, ...))]`: code that only a test build
/// has.
pub fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    fn implies_test(meta: &syn::Meta) -> bool {
        match meta {
            syn::Meta::Path(p) => p.is_ident("test"),
            syn::Meta::List(list) if list.path.is_ident("all") => list
                .parse_args_with(Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated)
                .is_ok_and(|all| all.iter().any(implies_test)),
            _ => false,
        }
    }
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.parse_args::<syn::Meta>().is_ok_and(|m| implies_test(&m)))
}

fn path_attribute(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// One name (or glob) that a `use` tree brings in.
pub struct UseLeaf {
    /// The full path as written, `self` in a group resolved away; starts
    /// with [`EXTERN_PREFIX`] after a leading `::`.
    pub path: Vec<String>,
    /// The name it binds (None for a glob or `as _`).
    pub binding: Option<String>,
    /// `use path::*`.
    pub glob: bool,
    /// Line of the leaf's last segment.
    pub line: usize,
}

/// Flattens a `use` item into its leaves: `use crate::{a::X, b::{self as c, *}}`
/// gives `crate::a::X` (X), `crate::b` (c) and `crate::b::*`.
pub fn use_leaves(item: &syn::ItemUse) -> Vec<UseLeaf> {
    fn walk(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseLeaf>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.unraw().to_string());
                walk(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => leaf(&n.ident, None, prefix, out),
            syn::UseTree::Rename(r) => leaf(&r.ident, Some(&r.rename), prefix, out),
            syn::UseTree::Glob(g) => out.push(UseLeaf {
                path: prefix.clone(),
                binding: None,
                glob: true,
                line: g.star_token.span.start().line,
            }),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, prefix, out);
                }
            }
        }
    }
    fn leaf(ident: &syn::Ident, rename: Option<&syn::Ident>, prefix: &[String], out: &mut Vec<UseLeaf>) {
        let name = ident.unraw().to_string();
        let mut path = prefix.to_vec();
        if name != "self" {
            path.push(name);
        }
        let binding = match rename {
            Some(r) if r == "_" => None,
            Some(r) => Some(r.unraw().to_string()),
            None => path.last().cloned(),
        };
        out.push(UseLeaf { path, binding, glob: false, line: ident.span().start().line });
    }
    let mut prefix = Vec::new();
    if item.leading_colon.is_some() {
        prefix.push(EXTERN_PREFIX.to_string());
    }
    let mut out = Vec::new();
    walk(&item.tree, &mut prefix, &mut out);
    out
}

/// Collects the names a module defines and imports, in function bodies too,
/// without entering nested `mod` items (other nodes).
#[derive(Default)]
struct ScopeCollector {
    defined: BTreeSet<String>,
    enum_variants: BTreeMap<String, BTreeSet<String>>,
    imports: BTreeMap<String, Vec<Vec<String>>>,
    globs: Vec<Vec<String>>,
}

impl ScopeCollector {
    fn define(&mut self, ident: &syn::Ident) {
        let name = ident.unraw().to_string();
        if name != "_" {
            self.defined.insert(name);
        }
    }
}

impl<'ast> Visit<'ast> for ScopeCollector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        match item {
            syn::Item::Mod(_) => return,
            syn::Item::Use(u) => {
                for leaf in use_leaves(u) {
                    if leaf.glob {
                        self.globs.push(leaf.path);
                    } else if let Some(name) = leaf.binding {
                        self.imports.entry(name).or_default().push(leaf.path);
                    }
                }
                return;
            }
            syn::Item::Const(i) => self.define(&i.ident),
            syn::Item::Enum(i) => {
                self.define(&i.ident);
                let variants = i.variants.iter().map(|v| v.ident.unraw().to_string()).collect();
                self.enum_variants.insert(i.ident.unraw().to_string(), variants);
            }
            syn::Item::Fn(i) => self.define(&i.sig.ident),
            syn::Item::Macro(i) => {
                if let Some(ident) = &i.ident {
                    self.define(ident);
                }
            }
            syn::Item::Static(i) => self.define(&i.ident),
            syn::Item::Struct(i) => self.define(&i.ident),
            syn::Item::Trait(i) => self.define(&i.ident),
            syn::Item::TraitAlias(i) => self.define(&i.ident),
            syn::Item::Type(i) => self.define(&i.ident),
            syn::Item::Union(i) => self.define(&i.ident),
            _ => {}
        }
        visit::visit_item(self, item);
    }

    fn visit_foreign_item(&mut self, item: &'ast syn::ForeignItem) {
        match item {
            syn::ForeignItem::Fn(i) => self.define(&i.sig.ident),
            syn::ForeignItem::Static(i) => self.define(&i.ident),
            syn::ForeignItem::Type(i) => self.define(&i.ident),
            _ => {}
        }
    }
}
