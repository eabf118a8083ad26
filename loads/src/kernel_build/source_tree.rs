//! The build workload's source tree, generated from a seed: kernel-like
//! directories of `.c` files and `include/linux/*.h` headers with include
//! guards, object- and function-like macros, `static inline` helpers,
//! prototypes of functions other files define, and extern globals. Every
//! file compiles with the `cc` applet and the objects link into one image
//! with the entry `start_kernel`. The same seed and spec give the same
//! bytes on every arch (only 32-bit random draws, no hash-order
//! iteration), and the tree's sha256 is recorded. Owns generation,
//! writing and cleaning the tree; must not compile it.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use sha2::{Digest, Sha256};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The file listing the sources, one relative path per line; the `make`
/// applet reads it.
pub const MANIFEST: &str = "sources.list";
/// The linked output.
pub const OUTPUT: &str = "vmlinux";
/// The image's entry symbol (defined in `init/main.c`).
pub const ENTRY: &str = "start_kernel";
/// Header directory, relative to the root.
pub const INCLUDE_DIR: &str = "include";

const DIRS: &[&str] = &[
    "kernel",
    "mm",
    "fs",
    "fs/ext2",
    "fs/proc",
    "net/core",
    "net/ipv4",
    "drivers/block",
    "drivers/char",
    "drivers/net",
    "lib",
    "block",
    "ipc",
    "security",
    "crypto",
    "sound/core",
];
const FILE_WORDS: &[&str] = &[
    "sched", "fork", "exit", "signal", "timer", "slab", "vmscan", "inode", "dcache", "namei", "super", "sock", "route",
    "sort", "bitmap", "elevator", "msg", "sem", "hooks", "cipher", "pcm", "tty", "serial", "loop", "dev", "filter",
    "skbuff", "mmap", "swap", "rmap", "readdir", "xattr",
];
const HEADER_WORDS: &[&str] = &[
    "list",
    "spinlock",
    "wait",
    "kref",
    "atomic",
    "bitops",
    "gfp",
    "mmzone",
    "pagemap",
    "fs",
    "sched",
    "skbuff",
    "netdevice",
    "blkdev",
    "cdev",
    "rcupdate",
    "mutex",
    "percpu",
    "jiffies",
    "ktime",
];
const VERBS: &[&str] = &[
    "init", "exit", "alloc", "free", "lookup", "insert", "remove", "update", "poll", "flush", "sync", "map", "unmap",
    "read", "write", "open", "release", "probe", "attach", "reset", "get", "put", "scan", "hash",
];
const NOUNS: &[&str] =
    &["MAX", "MIN", "SHIFT", "MASK", "BITS", "ORDER", "LIMIT", "BATCH", "FLAGS", "SIZE", "COUNT", "RETRY", "HASH"];
const BIN_OPS: &[&str] = &["+", "-", "*", "&", "|", "^", "+", "-", "<<", ">>", "/", "%"];
const CMP_OPS: &[&str] = &["<", "<=", ">", ">=", "==", "!="];

/// Errors of the source tree.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The spec is outside what the generator supports.
    #[error("bad source tree spec: {0}")]
    BadSpec(String),
    /// Writing or removing a file failed.
    #[error("cannot {what} {path}")]
    Io {
        /// `write`, `create directory`, `remove`, ...
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeSpec {
    /// Number of `.c` files (each one compile job), at least 2.
    pub files: u32,
    /// Number of headers; 0 picks one per three files.
    pub headers: u32,
}

impl TreeSpec {
    fn headers(&self) -> u32 {
        if self.headers == 0 {
            (self.files / 3).max(2)
        } else {
            self.headers
        }
    }
}

/// A generated tree on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTree {
    /// Its root directory.
    pub root: PathBuf,
    /// Sources relative to the root, in build order.
    pub sources: Vec<String>,
    /// Headers relative to the root.
    pub headers: Vec<String>,
    /// sha256 over every file's relative path and content, in path order.
    pub sha256: String,
    /// Bytes of all files.
    pub bytes: u64,
    /// Lines of all files.
    pub lines: u64,
}

/// An exported function or global of a source file.
#[derive(Debug, Clone)]
struct Export {
    name: String,
    arity: u32,
}

#[derive(Debug, Clone, Default)]
struct HeaderPlan {
    path: String,
    stem: String,
    includes: Vec<usize>,
    obj_macros: Vec<String>,
    fn_macros: Vec<String>,
    inlines: Vec<Export>,
    protos: Vec<Export>,
    globals: Vec<String>,
}

/// Names a function body may use.
#[derive(Debug, Clone, Default)]
struct Visible {
    constants: Vec<String>,
    fn_macros: Vec<String>,
    functions: Vec<Export>,
    globals: Vec<String>,
}

struct Gen {
    rng: Pcg64,
    next_local: u32,
}

impl Gen {
    /// Uniform in `lo..=hi`; draws 32 bits so every arch agrees.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        if hi <= lo {
            lo
        } else {
            self.rng.random_range(lo..=hi)
        }
    }
    fn chance(&mut self, percent: u32) -> bool {
        self.range(0, 99) < percent
    }
    fn index(&mut self, len: usize) -> usize {
        self.range(0, u32::try_from(len).unwrap_or(u32::MAX).saturating_sub(1)) as usize
    }
    fn pick<'a>(&mut self, v: &'a [&'a str]) -> &'a str {
        v.get(self.index(v.len())).copied().unwrap_or("x")
    }
    fn pick_string(&mut self, v: &[String]) -> Option<String> {
        if v.is_empty() {
            None
        } else {
            v.get(self.index(v.len())).cloned()
        }
    }
    fn local(&mut self, prefix: &str) -> String {
        self.next_local += 1;
        format!("{prefix}{}", self.next_local)
    }

    fn leaf(&mut self, vars: &[String], vis: &Visible) -> String {
        match self.range(0, 9) {
            0..=4 if !vars.is_empty() => self.pick_string(vars).unwrap_or_else(|| "1".into()),
            5 | 6 if !vis.constants.is_empty() => self.pick_string(&vis.constants).unwrap_or_else(|| "2".into()),
            7 if !vis.globals.is_empty() => self.pick_string(&vis.globals).unwrap_or_else(|| "3".into()),
            _ => self.range(0, 4096).to_string(),
        }
    }

    fn expr(&mut self, depth: u32, vars: &[String], vis: &Visible) -> String {
        if depth == 0 {
            return self.leaf(vars, vis);
        }
        match self.range(0, 11) {
            0..=4 => {
                let op = self.pick(BIN_OPS);
                let (a, b) = (self.expr(depth - 1, vars, vis), self.expr(depth - 1, vars, vis));
                format!("({a} {op} {b})")
            }
            5 => {
                let op = self.pick(CMP_OPS);
                let (a, b) = (self.expr(depth - 1, vars, vis), self.expr(depth - 1, vars, vis));
                format!("({a} {op} {b})")
            }
            6 if !vis.fn_macros.is_empty() => {
                let m = self.pick_string(&vis.fn_macros).unwrap_or_default();
                let a = self.expr(depth - 1, vars, vis);
                format!("{m}({a})")
            }
            7 if !vis.functions.is_empty() => {
                let f = vis.functions.get(self.index(vis.functions.len())).cloned();
                let f = f.unwrap_or(Export { name: String::new(), arity: 0 });
                let args: Vec<String> = (0..f.arity).map(|_| self.expr(depth.min(2) - 1, vars, vis)).collect();
                format!("{}({})", f.name, args.join(", "))
            }
            8 => {
                let u = self.pick(&["-", "~", "!"]);
                let a = self.expr(depth - 1, vars, vis);
                format!("{u}{a}")
            }
            _ => self.leaf(vars, vis),
        }
    }

    fn cond(&mut self, vars: &[String], vis: &Visible) -> String {
        let op = self.pick(CMP_OPS);
        let (a, b) = (self.expr(1, vars, vis), self.expr(1, vars, vis));
        let c = format!("{a} {op} {b}");
        if self.chance(30) {
            let op2 = self.pick(CMP_OPS);
            let join = self.pick(&["&&", "||"]);
            let (x, y) = (self.leaf(vars, vis), self.leaf(vars, vis));
            format!("{c} {join} {x} {op2} {y}")
        } else {
            c
        }
    }

    /// Writes `count` statements at `indent`, with `vars` in scope.
    fn block(
        &mut self,
        out: &mut String,
        indent: usize,
        count: u32,
        depth: u32,
        vars: &mut Vec<String>,
        vis: &Visible,
    ) {
        let pad = "\t".repeat(indent);
        let scope_start = vars.len();
        for _ in 0..count {
            match self.range(0, 15) {
                0..=3 => {
                    let v = self.local("v");
                    let e = self.expr(2, vars, vis);
                    let _ = writeln!(out, "{pad}int {v} = {e};");
                    vars.push(v);
                }
                4..=6 if !vars.is_empty() => {
                    let v = self.pick_string(vars).unwrap_or_default();
                    let e = self.expr(3, vars, vis);
                    let _ = writeln!(out, "{pad}{v} = {e};");
                }
                7 | 8 if depth > 0 => {
                    let c = self.cond(vars, vis);
                    let _ = writeln!(out, "{pad}if ({c}) {{");
                    let n = self.range(1, 4);
                    self.block(out, indent + 1, n, depth - 1, vars, vis);
                    if self.chance(50) {
                        let _ = writeln!(out, "{pad}}} else {{");
                        let n = self.range(1, 3);
                        self.block(out, indent + 1, n, depth - 1, vars, vis);
                    }
                    let _ = writeln!(out, "{pad}}}");
                }
                9 if depth > 0 => {
                    let i = self.local("i");
                    let limit = self.leaf(&[], vis);
                    let _ = writeln!(out, "{pad}int {i} = 0;");
                    let _ = writeln!(out, "{pad}while ({i} < {limit}) {{");
                    vars.push(i.clone());
                    let n = self.range(1, 4);
                    self.block(out, indent + 1, n, depth - 1, vars, vis);
                    let _ = writeln!(out, "{pad}\t{i} = {i} + 1;");
                    let _ = writeln!(out, "{pad}}}");
                }
                10 if depth > 0 => {
                    let i = self.local("i");
                    let limit = self.leaf(vars, vis);
                    let _ = writeln!(out, "{pad}int {i} = 0;");
                    let _ = writeln!(out, "{pad}for ({i} = 0; {i} < {limit}; {i} = {i} + 1) {{");
                    vars.push(i.clone());
                    let n = self.range(1, 3);
                    self.block(out, indent + 1, n, depth - 1, vars, vis);
                    let _ = writeln!(out, "{pad}}}");
                }
                11 | 12 if !vis.functions.is_empty() => {
                    let e = self.expr(1, vars, vis);
                    let f = vis.functions.get(self.index(vis.functions.len())).cloned();
                    if let Some(f) = f {
                        let mut args: Vec<String> = Vec::new();
                        for k in 0..f.arity {
                            args.push(if k == 0 { e.clone() } else { self.leaf(vars, vis) });
                        }
                        let v = self.local("r");
                        let _ = writeln!(out, "{pad}int {v} = {}({});", f.name, args.join(", "));
                        vars.push(v);
                    }
                }
                13 if !vis.globals.is_empty() => {
                    let g = self.pick_string(&vis.globals).unwrap_or_default();
                    let e = self.expr(2, vars, vis);
                    let _ = writeln!(out, "{pad}{g} = {e};");
                }
                _ => {
                    let v = self.local("t");
                    let e = self.expr(3, vars, vis);
                    let _ = writeln!(out, "{pad}int {v} = {e};");
                    vars.push(v);
                }
            }
        }
        // Names declared in this block go out of scope with it.
        vars.truncate(scope_start);
    }

    fn function(&mut self, out: &mut String, signature: &str, params: &[String], body: u32, vis: &Visible) {
        self.next_local = 0;
        let _ = writeln!(out, "{signature}\n{{");
        let mut vars = params.to_vec();
        self.block(out, 1, body, 3, &mut vars, vis);
        let e = self.expr(2, &vars, vis);
        let _ = writeln!(out, "\treturn {e};\n}}\n");
    }
}

fn params(arity: u32) -> Vec<String> {
    (0..arity).map(|k| format!("a{k}")).collect()
}

fn signature(prefix: &str, name: &str, ps: &[String]) -> String {
    let list = if ps.is_empty() {
        "void".to_string()
    } else {
        ps.iter().map(|p| format!("int {p}")).collect::<Vec<_>>().join(", ")
    };
    format!("{prefix}int {name}({list})")
}

fn license(out: &mut String, path: &str, seed: u64) {
    let _ = writeln!(
        out,
        "// SPDX-License-Identifier: GPL-2.0\n/*\n * {path}\n *\n * Generated by bootbench's kbuild workload from seed {seed}.\n * Do not edit: the tree's sha256 is part of every result.\n */\n"
    );
}

/// A planned tree: (relative path, content) of every file, then two name
/// lists as `plan` documents them.
type TreePlan = (Vec<(String, String)>, Vec<String>, Vec<String>);

/// Generates the tree's files in memory: (relative path, content), sources
/// in build order first.
fn plan(spec: &TreeSpec, seed: u64) -> Result<TreePlan, TreeError> {
    if spec.files < 2 || spec.files > 100_000 {
        return Err(TreeError::BadSpec(format!("files must be 2..=100000, got {}", spec.files)));
    }
    let nheaders = spec.headers();
    if nheaders > 100_000 {
        return Err(TreeError::BadSpec(format!("headers must be at most 100000, got {nheaders}")));
    }
    let mut g = Gen { rng: Pcg64::seed_from_u64(seed), next_local: 0 };

    // Sources: init/main.c first (the entry), then the rest.
    struct SrcPlan {
        path: String,
        exports: Vec<Export>,
        global: String,
    }
    let mut srcs = Vec::with_capacity(spec.files as usize);
    for i in 0..spec.files {
        let (dir, word) = if i == 0 { ("init", "main") } else { (g.pick(DIRS), g.pick(FILE_WORDS)) };
        let stem = format!("{word}{i}");
        let mut verbs: Vec<&str> = VERBS.to_vec();
        rand::seq::SliceRandom::shuffle(verbs.as_mut_slice(), &mut g.rng);
        let n = g.range(2, 4) as usize;
        let exports =
            verbs.iter().take(n).map(|v| Export { name: format!("{stem}_{v}"), arity: g.range(0, 3) }).collect();
        let path = if i == 0 { "init/main.c".to_string() } else { format!("{dir}/{stem}.c") };
        srcs.push(SrcPlan { path, global: format!("{stem}_count"), exports });
    }

    let mut headers: Vec<HeaderPlan> = Vec::with_capacity(nheaders as usize);
    for j in 0..nheaders {
        let word = g.pick(HEADER_WORDS);
        let stem = format!("{word}{j}");
        let upper = stem.to_uppercase();
        let mut h = HeaderPlan { path: format!("linux/{stem}.h"), stem: stem.clone(), ..Default::default() };
        for _ in 0..g.range(0, 2.min(j)) {
            let k = g.range(0, j - 1) as usize;
            if !h.includes.contains(&k) {
                h.includes.push(k);
            }
        }
        h.includes.sort_unstable();
        let mut nouns: Vec<&str> = NOUNS.to_vec();
        rand::seq::SliceRandom::shuffle(nouns.as_mut_slice(), &mut g.rng);
        h.obj_macros = nouns.iter().take(g.range(5, 10) as usize).map(|n| format!("{upper}_{n}")).collect();
        h.fn_macros = (0..g.range(1, 3)).map(|k| format!("{upper}_OP{k}")).collect();
        h.inlines = (0..g.range(1, 3))
            .map(|k| Export { name: format!("__{stem}_{}{k}", g.pick(VERBS)), arity: g.range(1, 2) })
            .collect();
        headers.push(h);
    }
    // Each source's exports are declared in one header.
    for (i, s) in srcs.iter().enumerate() {
        if let Some(h) = headers.get_mut(i % nheaders as usize) {
            h.protos.extend(s.exports.iter().cloned());
            h.globals.push(s.global.clone());
        }
    }
    let mut files: Vec<(String, String)> = Vec::with_capacity((spec.files + nheaders) as usize + 1);
    let mut header_paths = Vec::with_capacity(headers.len());

    // Headers, with what each one makes visible (itself plus includes).
    let mut visible: Vec<Visible> = Vec::with_capacity(headers.len());
    for h in &headers {
        let mut vis = Visible::default();
        for &k in &h.includes {
            if let Some(v) = visible.get(k) {
                vis.constants.extend(v.constants.iter().cloned());
                vis.fn_macros.extend(v.fn_macros.iter().cloned());
                vis.functions.extend(v.functions.iter().cloned());
                vis.globals.extend(v.globals.iter().cloned());
            }
        }
        let path = format!("{INCLUDE_DIR}/{}", h.path);
        let guard = format!("_LINUX_{}_H", h.stem.to_uppercase());
        let mut out = String::with_capacity(4096);
        license(&mut out, &path, seed);
        let _ = writeln!(out, "#ifndef {guard}\n#define {guard}\n");
        for &k in &h.includes {
            if let Some(inc) = headers.get(k) {
                let _ = writeln!(out, "#include \"{}\"", inc.path);
            }
        }
        out.push('\n');
        for m in &h.obj_macros {
            let v = g.range(1, 1 << 12);
            let _ = writeln!(out, "#define {m} {v}");
        }
        // Own constants are visible to this header's function-like macros.
        vis.constants.extend(h.obj_macros.iter().cloned());
        for m in &h.fn_macros {
            let c = g.pick_string(&vis.constants).unwrap_or_else(|| "1".into());
            let op = g.pick(&["+", "&", "^", "|"]);
            let _ = writeln!(out, "#define {m}(x) (((x) {op} {c}) >> 1)");
        }
        vis.fn_macros.extend(h.fn_macros.iter().cloned());
        out.push('\n');
        for p in &h.protos {
            let ps = params(p.arity);
            let _ = writeln!(out, "{};", signature("extern ", &p.name, &ps));
        }
        for gl in &h.globals {
            let _ = writeln!(out, "extern int {gl};");
        }
        out.push('\n');
        vis.functions.extend(h.protos.iter().cloned());
        vis.globals.extend(h.globals.iter().cloned());
        // Inline helpers see only macros and earlier inlines, as real
        // headers avoid calling out of line from inline code.
        let mut inline_vis =
            Visible { constants: vis.constants.clone(), fn_macros: vis.fn_macros.clone(), ..Default::default() };
        for f in &h.inlines {
            let ps = params(f.arity);
            let body = g.range(2, 5);
            g.function(&mut out, &signature("static inline ", &f.name, &ps), &ps, body, &inline_vis);
            inline_vis.functions.push(f.clone());
        }
        vis.functions.extend(h.inlines.iter().cloned());
        let _ = writeln!(out, "#endif /* {guard} */");
        header_paths.push(path.clone());
        files.push((path, out));
        visible.push(vis);
    }

    let mut source_paths = Vec::with_capacity(srcs.len());
    let mut source_files = Vec::with_capacity(srcs.len());
    for (i, s) in srcs.iter().enumerate() {
        let mut out = String::with_capacity(16384);
        license(&mut out, &s.path, seed);
        // Its own header first (so its definitions match the prototypes),
        // then a few others.
        let own = i % nheaders as usize;
        let mut incs = vec![own];
        for _ in 0..g.range(2, 6) {
            let k = g.index(headers.len());
            if !incs.contains(&k) {
                incs.push(k);
            }
        }
        let mut vis = Visible::default();
        for &k in &incs {
            if let (Some(h), Some(v)) = (headers.get(k), visible.get(k)) {
                let _ = writeln!(out, "#include \"{}\"", h.path);
                vis.constants.extend(v.constants.iter().cloned());
                vis.fn_macros.extend(v.fn_macros.iter().cloned());
                vis.functions.extend(v.functions.iter().cloned());
                vis.globals.extend(v.globals.iter().cloned());
            }
        }
        // The same header reached twice adds the same names twice; drop
        // the repeats so picks stay uniform.
        for list in [&mut vis.constants, &mut vis.fn_macros, &mut vis.globals] {
            let mut seen = std::collections::BTreeSet::new();
            list.retain(|x| seen.insert(x.clone()));
        }
        let mut seen = std::collections::BTreeSet::new();
        vis.functions.retain(|f| seen.insert(f.name.clone()));
        if i == 0 {
            // start_kernel calls the first export of a few other files.
            out.push('\n');
            for t in srcs.iter().skip(1).take(8) {
                if let Some(e) = t.exports.first() {
                    let _ = writeln!(out, "{};", signature("extern ", &e.name, &params(e.arity)));
                }
            }
        }
        let _ = writeln!(out, "\nint {} = {};\n", s.global, g.range(0, 100));
        // Static helpers, callable by what follows them.
        for k in 0..g.range(2, 5) {
            let f = Export { name: format!("do_{}_{k}", g.pick(VERBS)), arity: g.range(1, 3) };
            let ps = params(f.arity);
            let _ = writeln!(out, "/* {} - internal helper */", f.name);
            let body = g.range(6, 14);
            g.function(&mut out, &signature("static ", &f.name, &ps), &ps, body, &vis);
            vis.functions.push(f);
        }
        for f in &s.exports {
            let ps = params(f.arity);
            let _ = writeln!(out, "/**\n * {} - exported to the rest of the tree\n */", f.name);
            let body = g.range(8, 18);
            g.function(&mut out, &signature("", &f.name, &ps), &ps, body, &vis);
        }
        if i == 0 {
            out.push_str("int start_kernel(void)\n{\n\tint ret = 0;\n");
            for t in srcs.iter().skip(1).take(8) {
                if let Some(e) = t.exports.first() {
                    let args: Vec<String> = (0..e.arity).map(|k| k.to_string()).collect();
                    let _ = writeln!(out, "\tret = ret + {}({});", e.name, args.join(", "));
                }
            }
            out.push_str("\treturn ret;\n}\n");
        }
        source_paths.push(s.path.clone());
        source_files.push((s.path.clone(), out));
    }
    let mut manifest = String::new();
    for p in &source_paths {
        manifest.push_str(p);
        manifest.push('\n');
    }
    files.extend(source_files);
    files.push((MANIFEST.to_string(), manifest));
    Ok((files, source_paths, header_paths))
}

/// sha256 over (path, NUL, content, NUL) of every file in path order.
fn tree_hash(files: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut h = Sha256::new();
    for (p, c) in sorted {
        h.update(p.as_bytes());
        h.update([0]);
        h.update(c.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> TreeError + 'a {
    move |source| TreeError::Io { what, path: path.to_path_buf(), source }
}

impl SourceTree {
    /// Generates the tree for `spec` and `seed` into `root`, replacing
    /// whatever was there.
    pub fn generate(root: &Path, spec: &TreeSpec, seed: u64) -> Result<SourceTree, TreeError> {
        let (files, sources, headers) = plan(spec, seed)?;
        let sha256 = tree_hash(&files);
        if root.exists() {
            std::fs::remove_dir_all(root).map_err(io("remove", root))?;
        }
        let mut bytes = 0u64;
        let mut lines = 0u64;
        for (rel, content) in &files {
            let path = root.join(rel);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(io("create directory", dir))?;
            }
            std::fs::write(&path, content).map_err(io("write", &path))?;
            bytes += content.len() as u64;
            lines += content.lines().count() as u64;
        }
        Ok(SourceTree { root: root.to_path_buf(), sources, headers, sha256, bytes, lines })
    }

    /// The object file of source `rel` (relative to the root).
    pub fn object_of(rel: &str) -> String {
        match rel.strip_suffix(".c") {
            Some(stem) => format!("{stem}.o"),
            None => format!("{rel}.o"),
        }
    }

    /// `make clean`: removes every object and the output; returns how many
    /// files were removed.
    pub fn clean(&self) -> Result<u32, TreeError> {
        let mut removed = 0;
        let objects = self.sources.iter().map(|s| Self::object_of(s));
        for rel in objects.chain(std::iter::once(OUTPUT.to_string())) {
            let p = self.root.join(rel);
            match std::fs::remove_file(&p) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(TreeError::Io { what: "remove", path: p, source: e }),
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler;

    #[test]
    fn same_seed_same_hash_other_seed_other_hash() {
        let spec = TreeSpec { files: 12, headers: 0 };
        let (a, _, _) = plan(&spec, 42).unwrap();
        let (b, _, _) = plan(&spec, 42).unwrap();
        let (c, _, _) = plan(&spec, 43).unwrap();
        assert_eq!(tree_hash(&a), tree_hash(&b));
        assert_ne!(tree_hash(&a), tree_hash(&c));
        let d = tempfile::tempdir().unwrap();
        let t1 = SourceTree::generate(&d.path().join("t"), &spec, 42).unwrap();
        let t2 = SourceTree::generate(&d.path().join("t"), &spec, 42).unwrap();
        assert_eq!(t1, t2);
        assert_eq!(t1.sha256, tree_hash(&a));
        assert_eq!(t1.sources.len(), 12);
        assert_eq!(t1.headers.len(), 4);
        assert_eq!(t1.sources[0], "init/main.c");
    }

    /// Pins the generator's output: if this changes, every recorded tree
    /// hash changes, and results stop being comparable with older ones.
    #[test]
    fn hash_is_pinned() {
        let (f, _, _) = plan(&TreeSpec { files: 8, headers: 3 }, 0x5eed_b007).unwrap();
        // Results from different versions compare only if this stays the same.
        assert_eq!(tree_hash(&f), "7aecebb8bd3b0ca7b34e0a1a43d0cf4cab459278cf1ae2043d8d862f4b001c4b");
    }

    #[test]
    fn every_file_compiles_and_the_tree_links() {
        let d = tempfile::tempdir().unwrap();
        let t = SourceTree::generate(&d.path().join("t"), &TreeSpec { files: 30, headers: 0 }, 7).unwrap();
        let inc = vec![t.root.join(INCLUDE_DIR)];
        let mut objs = Vec::new();
        for s in &t.sources {
            let o = t.root.join(SourceTree::object_of(s));
            let st = compiler::compile(&t.root.join(s), &inc, &o).unwrap_or_else(|e| {
                panic!("{s}: {}", crate::error_chain::error_chain(&e));
            });
            assert!(st.files_read >= 3 && st.functions >= 4, "{s}: {st:?}");
            objs.push(o);
        }
        let out = t.root.join(OUTPUT);
        compiler::linker::link(&objs, &out, Some(ENTRY)).unwrap();
        assert_eq!(t.clean().unwrap(), 31);
        assert_eq!(t.clean().unwrap(), 0);
    }

    #[test]
    fn bad_specs_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = SourceTree::generate(d.path(), &TreeSpec { files: 1, headers: 0 }, 1).unwrap_err();
        assert!(e.to_string().contains("files must be 2..=100000, got 1"), "{e}");
    }
}
