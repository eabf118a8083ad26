//! What a path written in a module names, within its crate: the deepest
//! module on the way, and what is left of the path after it. Paths into
//! other crates (std, dependencies, sibling workspace crates) resolve to
//! nothing. An approximation of rustc's resolver, good enough to draw the
//! module graph: it does not know scopes inside functions, generics, local
//! variables or macro-expanded items.

use crate::module_tree::{ModuleId, ModuleTree, CRATE_ROOT, EXTERN_PREFIX};

/// Where a path lands in the crate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The deepest module the path goes through (or names).
    pub module: ModuleId,
    /// The segments after that module: an item of it and what follows
    /// (`["Kind", "A"]`), or nothing when the path names the module itself.
    pub rest: Vec<String>,
}

/// Resolves paths against one crate's module tree.
pub struct Resolver<'t> {
    tree: &'t ModuleTree,
}

impl<'t> Resolver<'t> {
    /// A resolver for `tree`.
    pub fn new(tree: &'t ModuleTree) -> Self {
        Resolver { tree }
    }

    /// What `segments`, written in module `from`, names in this crate.
    pub fn resolve(&self, from: ModuleId, segments: &[String]) -> Option<Target> {
        self.resolve_guarded(from, segments, &mut Vec::new())
    }

    /// `active` holds the lookups under way, so that imports and globs that
    /// refer to each other end instead of recursing forever.
    fn resolve_guarded(
        &self,
        from: ModuleId,
        segments: &[String],
        active: &mut Vec<(ModuleId, String)>,
    ) -> Option<Target> {
        let (first, tail) = segments.split_first()?;
        let (start, rest) = match first.as_str() {
            // Another crate, or relative to a type.
            EXTERN_PREFIX | "Self" => return None,
            "crate" => (CRATE_ROOT, tail.to_vec()),
            "self" => (from, tail.to_vec()),
            "super" => {
                let mut module = from;
                let supers = segments.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    module = self.tree.parent(module)?;
                }
                (module, segments[supers..].to_vec())
            }
            name => {
                let found = self.lookup(from, name, active)?;
                let mut rest = found.rest;
                rest.extend_from_slice(tail);
                (found.module, rest)
            }
        };
        Some(self.descend(start, rest))
    }

    /// Walks down child modules while the path names them.
    fn descend(&self, mut module: ModuleId, rest: Vec<String>) -> Target {
        let mut used = 0;
        for segment in &rest {
            match self.tree.modules[module].children.get(segment) {
                Some(&child) => {
                    module = child;
                    used += 1;
                }
                None => break,
            }
        }
        Target { module, rest: rest[used..].to_vec() }
    }

    /// What the single name `name` means in module `module`'s namespace: a
    /// child module, an item defined there, an import there (followed), or
    /// a name one of its globs brings in (looked up in the glob's module the
    /// same way). None for anything else: prelude, other crates, locals.
    fn lookup(&self, module: ModuleId, name: &str, active: &mut Vec<(ModuleId, String)>) -> Option<Target> {
        let m = &self.tree.modules[module];
        if let Some(&child) = m.children.get(name) {
            return Some(Target { module: child, rest: Vec::new() });
        }
        if m.defined.contains(name) {
            return Some(Target { module, rest: vec![name.to_string()] });
        }
        if let Some(paths) = m.imports.get(name) {
            let key = (module, name.to_string());
            if active.contains(&key) {
                return None;
            }
            active.push(key);
            let found = paths.iter().find_map(|p| self.resolve_guarded(module, p, active));
            active.pop();
            // An explicit import shadows every glob, even when it names
            // another crate.
            return found;
        }
        let key = (module, format!("*{name}"));
        if active.contains(&key) {
            return None;
        }
        active.push(key);
        let found = m.globs.iter().find_map(|glob| {
            let target = self.resolve_guarded(module, glob, active)?;
            match target.rest.as_slice() {
                [] => self.lookup(target.module, name, active),
                [enum_name] => {
                    let variants = self.tree.modules[target.module].enum_variants.get(enum_name)?;
                    variants
                        .contains(name)
                        .then(|| Target { module: target.module, rest: vec![enum_name.clone(), name.to_string()] })
                }
                _ => None,
            }
        });
        active.pop();
        found
    }
}
