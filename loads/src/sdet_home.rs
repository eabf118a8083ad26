//! What both SDET workloads share: the user's home every script starts
//! from (text documents, a file of numbers and a few C sources), the
//! vocabulary its commands search for, and the checks of the parameters
//! that size them. The sources are of one of two kinds: real C for gcc
//! (`sdet`), or the synthetic tree of `kernel_build` that the init's `cc`
//! applet compiles (`sdet_applets`; not all of it is valid C). `workloads::sdet` runs real shell scripts of the
//! userland pack's programs in such homes; `workloads::sdet_applets` runs
//! the init's applets there, for arches without a pack. Owns the home's
//! contents; must not name either workload.

use crate::kernel_build::source_tree::{SourceTree, TreeError, TreeSpec, INCLUDE_DIR};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::path::{Path, PathBuf};

/// Words the documents are made of and the scripts search for.
pub const WORDS: &[&str] = &[
    "kernel", "page", "inode", "buffer", "socket", "thread", "mutex", "spin", "queue", "block", "device", "driver",
    "memory", "cache", "write", "read", "sync", "flush", "timer", "signal", "process", "task", "file", "mount", "swap",
    "slab", "zone", "node", "cpu", "irq", "vector", "table", "entry", "lock", "panic", "oops", "trace",
];

/// The directories of a home: documents, command output, scratch files.
pub const HOME_DIRS: [&str; 3] = ["docs", "out", "tmp"];

/// The file of numbers the numeric sorts read.
pub const NUMBERS: &str = "docs/numbers.txt";

/// Errors of making a home.
#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// Writing a file or directory failed.
    #[error("cannot {what} {path}")]
    Io {
        /// The operation.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Generating the C sources failed.
    #[error("generating the scripts' C sources")]
    Tree(#[from] TreeError),
}

/// How big a home is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HomeSpec {
    /// Text documents.
    pub docs: u32,
    /// Lines per document (and numbers in [`NUMBERS`]).
    pub doc_lines: u32,
    /// C sources, for the compile commands.
    pub sources: u32,
}

impl HomeSpec {
    /// Why the spec cannot be made, if it cannot: each bound named.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=1000).contains(&self.docs) || !(1..=1_000_000).contains(&self.doc_lines) {
            return Err(format!(
                "docs must be 1..=1000 and doc_lines 1..=1000000, got {} and {}",
                self.docs, self.doc_lines
            ));
        }
        if !(2..=100).contains(&self.sources) {
            return Err(format!("sources must be 2..=100, got {}", self.sources));
        }
        Ok(())
    }
}

/// Why a list of concurrency levels cannot be run, if it cannot.
pub fn check_levels(levels: &[u32]) -> Result<(), String> {
    if levels.is_empty() || levels.iter().any(|&l| l == 0 || l > 1024) {
        return Err(format!("levels must be 1..=1024 scripts each, and not empty: {levels:?}"));
    }
    Ok(())
}

/// Script `index`'s order of `units` units: a seeded permutation, its
/// own for each script, the same for the same `seed` and `index`. Every
/// SDET script runs the same units in its own order, as SDET's scripts
/// were permutations of one set.
pub fn script_order(units: usize, seed: u64, index: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..units).collect();
    let mut g = Pcg64::seed_from_u64(seed.wrapping_add(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(index as u64 + 1)));
    rand::seq::SliceRandom::shuffle(order.as_mut_slice(), &mut g);
    order
}

/// Document `i`'s path in a home.
pub fn doc(i: u32) -> String {
    format!("docs/doc{i}.txt")
}

/// The kind of C sources a home holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sources {
    /// Real C that gcc compiles: standard headers, a header of the
    /// home's own, functions of loops, arrays, structs and strings.
    C,
    /// `kernel_build`'s synthetic tree, for the init's `cc` applet.
    Synthetic,
}

/// The home's own header, in `src/include`.
pub const HEADER: &str = "sdet.h";

/// Source `index` of a home of real C: a few standard headers and the
/// home's own, a table and a struct, and 8 to 15 seeded functions of
/// loops, branches, sorting and string handling, all called from one
/// exported entry point; about 200 to 400 lines.
pub fn c_source(seed: u64, index: u32) -> String {
    let mut g = Pcg64::seed_from_u64(seed ^ 0xc0de ^ (u64::from(index) << 32));
    let n = index;
    let mut s = format!(
        "/* SDET user source {n}: compiled by the scripts' cc commands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include \"{HEADER}\"

struct rec{n} {{
\tint key;
\tlong sum;
\tchar name[SDET_NAME];
}};

"
    );
    let table: Vec<String> = (0..64).map(|_| g.random_range(0..10_000u32).to_string()).collect();
    s.push_str(&format!("static const int table{n}[64] = {{\n\t{}\n}};\n\n", table.join(", ")));
    let funcs = g.random_range(8..16u32);
    for f in 0..funcs {
        let (c1, c2, c3) = (g.random_range(1..1000u32), g.random_range(2..64u32), g.random_range(1..7u32));
        let body = match g.random_range(0..4u32) {
            0 => format!(
                "static long f{n}_{f}(const int *v, int len)
{{
\tlong acc = {c1};
\tfor (int i = 0; i < len; i++) {{
\t\tif ((v[i] % {c2}) == {c3})
\t\t\tacc += (long)v[i] * {c3};
\t\telse
\t\t\tacc ^= (long)v[i] << (i % {c3});
\t}}
\treturn acc;
}}

"
            ),
            1 => format!(
                "static long f{n}_{f}(const int *v, int len)
{{
\tstruct rec{n} r[16];
\tint k = len < 16 ? len : 16;
\tfor (int i = 0; i < k; i++) {{
\t\tr[i].key = v[i] * {c2} % {c1};
\t\tr[i].sum = i;
\t\tsnprintf(r[i].name, sizeof r[i].name, \"rec%d\", r[i].key);
\t}}
\tfor (int i = 1; i < k; i++) {{
\t\tstruct rec{n} t = r[i];
\t\tint j = i - 1;
\t\twhile (j >= 0 && r[j].key > t.key) {{
\t\t\tr[j + 1] = r[j];
\t\t\tj--;
\t\t}}
\t\tr[j + 1] = t;
\t}}
\treturn k > 0 ? r[0].key + r[k - 1].sum + (long)strlen(r[k - 1].name) : 0;
}}

"
            ),
            2 => format!(
                "static long f{n}_{f}(const int *v, int len)
{{
\tchar buf[SDET_LINE];
\tlong words = 0;
\tfor (int i = 0; i < len; i += {c3}) {{
\t\tsnprintf(buf, sizeof buf, \"%d %d %u\", v[i], i, {c1}u);
\t\tfor (char *p = strtok(buf, \" \"); p; p = strtok(NULL, \" \"))
\t\t\twords += strtol(p, NULL, 10) % {c2};
\t}}
\treturn words;
}}

"
            ),
            _ => format!(
                "static long f{n}_{f}(const int *v, int len)
{{
\tlong acc = 0;
\tfor (int i = 0; i < len; i++) {{
\t\tswitch (v[i] & 3) {{
\t\tcase 0:
\t\t\tacc += {c1};
\t\t\tbreak;
\t\tcase 1:
\t\t\tacc -= v[i] / {c2};
\t\t\tbreak;
\t\tcase 2:
\t\t\tacc *= {c3};
\t\t\tacc %= 1000003;
\t\t\tbreak;
\t\tdefault:
\t\t\tacc = SDET_MIX(acc, v[i]);
\t\t}}
\t}}
\treturn acc;
}}

"
            ),
        };
        s.push_str(&body);
    }
    s.push_str(&format!("long sdet_entry{n}(int len)\n{{\n\tlong total = 0;\n\tif (len > 64)\n\t\tlen = 64;\n"));
    for f in 0..funcs {
        s.push_str(&format!("\ttotal += f{n}_{f}(table{n}, len);\n"));
    }
    s.push_str("\treturn total;\n}\n");
    s
}

/// The header of a home of `sources` real C files.
pub fn c_header(sources: u32) -> String {
    let mut s = String::from(
        "#ifndef SDET_H
#define SDET_H

#define SDET_NAME 16
#define SDET_LINE 64
#define SDET_MIX(a, b) (((a) << 5) ^ ((a) >> 3) ^ (long)(b))

",
    );
    for n in 0..sources {
        s.push_str(&format!("long sdet_entry{n}(int len);\n"));
    }
    s.push_str("\n#endif\n");
    s
}

/// A home made by [`make_skeleton`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skeleton {
    /// Its directory.
    pub dir: PathBuf,
    /// The C sources, relative to `src/` in it.
    pub sources: Vec<String>,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> HomeError + 'a {
    move |source| HomeError::Io { what, path: path.to_path_buf(), source }
}

/// Writes the skeleton home at `dir` (which must not exist yet): the
/// documents, the numbers and seeded C sources of `kind` under `src/`
/// (headers in `src/include`). The same `spec`, `kind` and `seed` make
/// the same bytes.
pub fn make_skeleton(dir: &Path, spec: &HomeSpec, kind: Sources, seed: u64) -> Result<Skeleton, HomeError> {
    for d in HOME_DIRS {
        let p = dir.join(d);
        std::fs::create_dir_all(&p).map_err(io("create", &p))?;
    }
    let mut g = Pcg64::seed_from_u64(seed ^ 0xd0c5);
    for i in 0..spec.docs {
        let mut text = String::new();
        for _ in 0..spec.doc_lines {
            let n = g.random_range(3..12u32);
            let line: Vec<&str> = (0..n)
                .map(|_| WORDS.get(g.random_range(0..WORDS.len() as u32) as usize).copied().unwrap_or("x"))
                .collect();
            text.push_str(&line.join(" "));
            text.push('\n');
        }
        let p = dir.join(doc(i));
        std::fs::write(&p, text).map_err(io("write", &p))?;
    }
    let numbers: String = (0..spec.doc_lines).map(|_| format!("{}\n", g.random_range(0..1_000_000u32))).collect();
    let p = dir.join(NUMBERS);
    std::fs::write(&p, numbers).map_err(io("write", &p))?;
    let sources = match kind {
        Sources::Synthetic => {
            SourceTree::generate(&dir.join("src"), &TreeSpec { files: spec.sources, headers: 2 }, seed)?.sources
        }
        Sources::C => {
            let include = dir.join("src").join(INCLUDE_DIR);
            std::fs::create_dir_all(&include).map_err(io("create", &include))?;
            let p = include.join(HEADER);
            std::fs::write(&p, c_header(spec.sources)).map_err(io("write", &p))?;
            let mut names = Vec::new();
            for n in 0..spec.sources {
                let name = format!("user{n}.c");
                let p = dir.join("src").join(&name);
                std::fs::write(&p, c_source(seed, n)).map_err(io("write", &p))?;
                names.push(name);
            }
            names
        }
    };
    Ok(Skeleton { dir: dir.to_path_buf(), sources })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skeleton_is_the_same_bytes_for_the_same_seed_and_differs_for_another() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = HomeSpec { docs: 3, doc_lines: 20, sources: 2 };
        let read = |d: &Path| {
            let mut files: Vec<(String, Vec<u8>)> = walkdir::WalkDir::new(d)
                .into_iter()
                .flatten()
                .filter(|e| e.file_type().is_file())
                .map(|e| (e.path().strip_prefix(d).unwrap().display().to_string(), std::fs::read(e.path()).unwrap()))
                .collect();
            files.sort();
            files
        };
        let a = make_skeleton(&tmp.path().join("a"), &spec, Sources::C, 7).unwrap();
        let b = make_skeleton(&tmp.path().join("b"), &spec, Sources::C, 7).unwrap();
        let c = make_skeleton(&tmp.path().join("c"), &spec, Sources::C, 8).unwrap();
        assert_eq!(a.sources, b.sources);
        assert_eq!(read(&a.dir), read(&b.dir));
        assert_ne!(read(&a.dir), read(&c.dir));
        let names: Vec<String> = read(&a.dir).into_iter().map(|(n, _)| n).collect();
        for want in ["docs/doc0.txt", "docs/doc2.txt", NUMBERS, "src/user1.c", "src/include/sdet.h"] {
            assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
        }
        assert_eq!(std::fs::read_to_string(a.dir.join(NUMBERS)).unwrap().lines().count(), 20);
    }

    #[test]
    fn bounds_are_named() {
        assert!(check_levels(&[]).unwrap_err().contains("levels"));
        assert!(check_levels(&[1, 0]).is_err() && check_levels(&[1025]).is_err());
        check_levels(&[1, 1024]).unwrap();
        let ok = HomeSpec { docs: 1, doc_lines: 1, sources: 2 };
        ok.check().unwrap();
        assert!(HomeSpec { sources: 1, ..ok }.check().unwrap_err().contains("sources"));
        assert!(HomeSpec { docs: 0, ..ok }.check().unwrap_err().contains("docs"));
    }

    #[test]
    fn every_real_c_source_compiles_with_gcc_without_a_warning() {
        let tmp = tempfile::tempdir().unwrap();
        let mut failures = Vec::new();
        for seed in 0..8u64 {
            let dir = tmp.path().join(seed.to_string());
            let skel = make_skeleton(&dir, &HomeSpec { docs: 1, doc_lines: 1, sources: 4 }, Sources::C, seed).unwrap();
            for s in &skel.sources {
                let lines = std::fs::read_to_string(dir.join("src").join(s)).unwrap().lines().count();
                assert!((150..=600).contains(&lines), "{s}: {lines} lines");
                let out = std::process::Command::new("cc")
                    .current_dir(&dir)
                    .args(["-O", "-Wall", "-Wextra", "-c", "-I", "src/include", "-o", "/dev/null"])
                    .arg(format!("src/{s}"))
                    .output()
                    .expect("run cc");
                if !out.status.success() || !out.stderr.is_empty() {
                    failures.push(format!("seed {seed} {s}: {}", String::from_utf8_lossy(&out.stderr)));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn the_synthetic_kind_is_kernel_build_s_tree_as_sdet_applets_compiled_it() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = HomeSpec { docs: 1, doc_lines: 1, sources: 3 };
        let skel = make_skeleton(&tmp.path().join("h"), &spec, Sources::Synthetic, 5).unwrap();
        let tree = SourceTree::generate(&tmp.path().join("t"), &TreeSpec { files: 3, headers: 2 }, 5).unwrap();
        assert_eq!(skel.sources, tree.sources);
        assert!(skel.dir.join("src").join(&skel.sources[0]).exists());
    }
}
