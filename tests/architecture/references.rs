//! Every path in a crate's code that names another module of the same crate,
//! with where it was written: the edges of the module graph before
//! deduplication.

use std::path::PathBuf;

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::module_tree::{use_leaves, ModuleId, ModuleTree, EXTERN_PREFIX};
use crate::name_resolution::Resolver;

/// Code in module `from` names module `to`, or an item of it.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The module whose code has the path.
    pub from: ModuleId,
    /// The module the path resolves to.
    pub to: ModuleId,
    /// The file and line of the path.
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    /// The path, `crate::a::b::C` (generic arguments left out).
    pub text: String,
}

/// The references between distinct modules of `tree`, in source order.
pub fn collect(tree: &ModuleTree) -> Vec<Reference> {
    let resolver = Resolver::new(tree);
    let mut out = Vec::new();
    for (id, module) in tree.modules.iter().enumerate() {
        let mut collector = PathCollector { resolver: &resolver, module: id, file: &module.file, out: &mut out };
        for item in &module.items {
            collector.visit_item(item);
        }
    }
    out
}

struct PathCollector<'a> {
    resolver: &'a Resolver<'a>,
    module: ModuleId,
    file: &'a PathBuf,
    out: &'a mut Vec<Reference>,
}

impl PathCollector<'_> {
    /// Records the path if it resolves to another module of the crate. A
    /// path that names a module itself only means that in a `use`
    /// (`names_module`); elsewhere (an expression `a`, `pub(super)`) it is a
    /// local variable, a generic or a visibility, and is not an edge.
    fn note(&mut self, segments: Vec<String>, line: usize, names_module: bool) {
        let Some(target) = self.resolver.resolve(self.module, &segments) else { return };
        if target.module == self.module || (target.rest.is_empty() && !names_module) {
            return;
        }
        self.out.push(Reference {
            from: self.module,
            to: target.module,
            file: self.file.clone(),
            line,
            text: segments.join("::"),
        });
    }

    /// Notes the first `len` segments of `path` as a path of their own (all
    /// of them, or those before a qualified self type's `<T as Trait>::`),
    /// then visits the generic arguments of every segment.
    fn note_path(&mut self, path: &syn::Path, len: usize) {
        if len > 0 {
            let mut segments: Vec<String> = Vec::new();
            if path.leading_colon.is_some() {
                segments.push(EXTERN_PREFIX.to_string());
            }
            segments.extend(path.segments.iter().take(len).map(|s| s.ident.unraw().to_string()));
            self.note(segments, path.span().start().line, false);
        }
        for segment in &path.segments {
            self.visit_path_arguments(&segment.arguments);
        }
    }

    /// The tokens of a macro invocation: as comma-separated expressions
    /// (`format!`, `assert!`, `matches!` with an expression), else as
    /// statements (`thread_local!`-like bodies), else scanned for
    /// `a :: b` sequences (`vec![x; n]`, `macro_rules!` bodies, `json!`).
    fn visit_macro_tokens(&mut self, tokens: &TokenStream) {
        let exprs = Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(exprs) = exprs.parse2(tokens.clone()) {
            for e in &exprs {
                self.visit_expr(e);
            }
            return;
        }
        if let Ok(stmts) = syn::Block::parse_within.parse2(tokens.clone()) {
            for s in &stmts {
                self.visit_stmt(s);
            }
            return;
        }
        self.scan_tokens(tokens.clone());
    }

    /// Notes every `x :: y (:: z)*` in the tokens (`$crate` counts as
    /// `crate`); a single identifier is too ambiguous to count.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tts: Vec<TokenTree> = tokens.into_iter().collect();
        let path_sep_at = |j: usize| {
            matches!((tts.get(j), tts.get(j + 1)),
                (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                    if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut i = 0;
        while i < tts.len() {
            match &tts[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    let leading_colon = i >= 2 && path_sep_at(i - 2);
                    let mut segments = vec![first.unraw().to_string()];
                    let mut j = i + 1;
                    while path_sep_at(j) {
                        let Some(TokenTree::Ident(next)) = tts.get(j + 2) else { break };
                        segments.push(next.unraw().to_string());
                        j += 3;
                    }
                    if segments.len() >= 2 && !leading_colon {
                        self.note(segments, first.span().start().line, false);
                    }
                    i = j;
                }
                _ => i += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for PathCollector<'_> {
    /// A nested module is a node of its own, and `mod x;` alone is not an
    /// edge: the parent owns the child, it does not use it.
    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        for leaf in use_leaves(item) {
            self.note(leaf.path, leaf.line, true);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.note_path(path, path.segments.len());
    }

    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        match &e.qself {
            Some(q) => {
                self.visit_qself(q);
                self.note_path(&e.path, q.position);
            }
            None => self.visit_path(&e.path),
        }
    }

    fn visit_type_path(&mut self, t: &'ast syn::TypePath) {
        match &t.qself {
            Some(q) => {
                self.visit_qself(q);
                self.note_path(&t.path, q.position);
            }
            None => self.visit_path(&t.path),
        }
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.visit_macro_tokens(&mac.tokens);
    }

    // Attributes (derives, cfgs, lint levels) and visibilities (`pub(super)`)
    // name no code that runs.
    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}
