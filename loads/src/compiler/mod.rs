//! The build workload's toolchain: a compiler (`cc` applet) and a linker
//! (`ld` applet) for a small C-like language, so that a kernbench-style
//! build makes the kernel do what a real compile makes it do: exec, read a
//! source and its headers, allocate many small objects and a few large
//! ones (past glibc's 128 KiB mmap threshold, so mmap/munmap happen), run
//! branchy passes (preprocessing, parsing, symbol tables, dataflow,
//! register allocation), and write an object file. Owns the pipeline and
//! the applets' command lines; must not schedule jobs (the build workload
//! does).

pub mod codegen;
pub mod ir;
pub mod lexer;
pub mod linker;
pub mod lower;
pub mod object_file;
pub mod optimize;
pub mod parser;
pub mod preprocess;
pub mod regalloc;

use object_file::{Object, OBJECT_MAGIC};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Bytes reserved up front for the object being written, like an
/// assembler's section buffer. It is past glibc's default mmap threshold
/// (128 KiB) on purpose: every compile maps and unmaps memory.
pub const OUTPUT_BUFFER: usize = 256 * 1024;
/// Rounds of the optimiser per function at most.
const OPT_ROUNDS: u32 = 6;

/// Errors of one compile.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// Preprocessing failed.
    #[error("preprocessing {src}")]
    Preprocess {
        /// The source.
        src: PathBuf,
        /// What failed.
        #[source]
        source: preprocess::PreprocessError,
    },
    /// A syntax error.
    #[error("{path}:{line}: syntax error: expected {expected}, found {found}")]
    Parse {
        /// File containing the error.
        path: PathBuf,
        /// Line.
        line: u32,
        /// What the grammar wanted.
        expected: String,
        /// What was there.
        found: String,
    },
    /// A semantic error.
    #[error("{path}:{line}: {what}")]
    Sema {
        /// File containing the error.
        path: PathBuf,
        /// Line.
        line: u32,
        /// What is wrong.
        what: String,
    },
    /// Code emission failed.
    #[error("code generation for {src}")]
    Codegen {
        /// The source.
        src: PathBuf,
        /// What failed.
        #[source]
        source: codegen::CodegenError,
    },
    /// Encoding the object failed.
    #[error("encoding the object for {src}")]
    Encode {
        /// The source.
        src: PathBuf,
        /// What failed.
        #[source]
        source: object_file::ObjectError,
    },
    /// Writing the object failed.
    #[error("cannot write {path}")]
    Write {
        /// The object path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// What one compile did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    /// Source and header bytes read.
    pub bytes_read: u64,
    /// Files opened (the source and every include).
    pub files_read: u32,
    /// Tokens after preprocessing.
    pub tokens: u64,
    /// Functions emitted.
    pub functions: u32,
    /// IR instructions before optimisation.
    pub ir_before: u64,
    /// IR instructions after optimisation.
    pub ir_after: u64,
    /// Registers spilled.
    pub spills: u64,
    /// Object size in bytes.
    pub object_bytes: u64,
}

fn path_of(files: &[PathBuf], idx: u16) -> PathBuf {
    files.get(idx as usize).cloned().unwrap_or_default()
}

/// Compiles `src` (searching `include_dirs` for headers) into the object
/// file `out`.
pub fn compile(src: &Path, include_dirs: &[PathBuf], out: &Path) -> Result<CompileStats, CompileError> {
    let pp = preprocess::Preprocessor::new(include_dirs)
        .run(src)
        .map_err(|source| CompileError::Preprocess { src: src.to_path_buf(), source })?;
    let mut st = CompileStats {
        bytes_read: pp.bytes_read,
        files_read: pp.files.len() as u32,
        tokens: pp.tokens.len() as u64,
        ..Default::default()
    };
    let unit = parser::parse(&pp.tokens).map_err(|e| CompileError::Parse {
        path: path_of(&pp.files, e.file),
        line: e.line,
        expected: e.expected,
        found: e.found,
    })?;
    drop(pp.tokens);
    let lowered = lower::lower(&unit).map_err(|e| CompileError::Sema {
        path: path_of(&pp.files, e.file),
        line: e.line,
        what: e.what,
    })?;
    drop(unit);
    let mut obj = Object { code: Vec::with_capacity(OUTPUT_BUFFER), ..Default::default() };
    for mut f in lowered.functions {
        st.ir_before += f.size() as u64;
        optimize::optimize(&mut f, OPT_ROUNDS);
        st.ir_after += f.size() as u64;
        let alloc = regalloc::allocate(&f);
        st.spills += u64::from(alloc.spills);
        codegen::emit_function(&mut obj, &f, &alloc)
            .map_err(|source| CompileError::Codegen { src: src.to_path_buf(), source })?;
        st.functions += 1;
    }
    codegen::emit_data(&mut obj, &lowered.data)
        .map_err(|source| CompileError::Codegen { src: src.to_path_buf(), source })?;
    let mut bytes = Vec::with_capacity(obj.code.len() + obj.data.len() + 64 * (obj.symbols.len() + obj.relocs.len()));
    obj.encode_into(OBJECT_MAGIC, &mut bytes)
        .map_err(|source| CompileError::Encode { src: src.to_path_buf(), source })?;
    st.object_bytes = bytes.len() as u64;
    std::fs::write(out, &bytes).map_err(|source| CompileError::Write { path: out.to_path_buf(), source })?;
    Ok(st)
}

/// Errors in an applet's command line.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// The parser rejected an argument.
    #[error(transparent)]
    Args(#[from] lexopt::Error),
    /// A required argument is missing.
    #[error("missing {0}")]
    Missing(&'static str),
}

struct CcArgs {
    include_dirs: Vec<PathBuf>,
    output: PathBuf,
    source: PathBuf,
}

fn cc_args(args: &[OsString]) -> Result<CcArgs, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args.iter().cloned());
    let (mut inc, mut out, mut src) = (Vec::new(), None, None);
    while let Some(a) = p.next()? {
        match a {
            Short('I') => inc.push(PathBuf::from(p.value()?)),
            Short('o') => out = Some(PathBuf::from(p.value()?)),
            Value(v) if src.is_none() => src = Some(PathBuf::from(v)),
            other => return Err(other.unexpected().into()),
        }
    }
    Ok(CcArgs {
        include_dirs: inc,
        output: out.ok_or(UsageError::Missing("-o OUTPUT"))?,
        source: src.ok_or(UsageError::Missing("the source file"))?,
    })
}

/// The `cc` applet: `cc [-I DIR]... -o OUT SRC`. Exit 0 on success, 1 on
/// a compile error, 2 on a usage error; messages go to stderr.
pub fn cc_main(args: &[OsString]) -> i32 {
    let a = match cc_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cc: {e} (usage: cc [-I DIR]... -o OUT SRC)");
            return 2;
        }
    };
    match compile(&a.source, &a.include_dirs, &a.output) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("cc: {}", crate::error_chain::error_chain(&e));
            1
        }
    }
}

/// The `ld` applet: `ld -o OUT [-e ENTRY] OBJ...`. Exit codes as `cc`.
pub fn ld_main(args: &[OsString]) -> i32 {
    use lexopt::prelude::*;
    let parsed = (|| -> Result<(PathBuf, Option<String>, Vec<PathBuf>), UsageError> {
        let mut p = lexopt::Parser::from_args(args.iter().cloned());
        let (mut out, mut entry, mut objs) = (None, None, Vec::new());
        while let Some(a) = p.next()? {
            match a {
                Short('o') => out = Some(PathBuf::from(p.value()?)),
                Short('e') => entry = Some(p.value()?.string()?),
                Value(v) => objs.push(PathBuf::from(v)),
                other => return Err(other.unexpected().into()),
            }
        }
        Ok((out.ok_or(UsageError::Missing("-o OUTPUT"))?, entry, objs))
    })();
    let (out, entry, objs) = match parsed {
        Ok(x) => x,
        Err(e) => {
            eprintln!("ld: {e} (usage: ld -o OUT [-e ENTRY] OBJ...)");
            return 2;
        }
    };
    match linker::link(&objs, &out, entry.as_deref()) {
        Ok(_) => 0,
        Err(e) => {
            eprintln!("ld: {}", crate::error_chain::error_chain(&e));
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn compiles_and_links_two_units() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("include")).unwrap();
        std::fs::write(
            p.join("include/api.h"),
            "#ifndef API_H\n#define API_H\n#define SCALE(x) ((x) * 4)\nextern int counter;\nint helper(int a, int b);\nstatic inline int clamp(int v) { if (v > 9) { return 9; } return v; }\n#endif\n",
        )
        .unwrap();
        std::fs::write(
            p.join("a.c"),
            "#include \"api.h\"\nint counter = 5;\nstatic int local(int x) { return x + 1; }\nint start_kernel(void) { int i = 0; int s = 0; while (i < 10) { s = s + helper(i, SCALE(i)); i = i + 1; } counter = s; return local(clamp(s)); }\n",
        )
        .unwrap();
        std::fs::write(
            p.join("b.c"),
            "#include \"api.h\"\nstatic int local(int x) { return x * 2; }\nint helper(int a, int b) { return local(a) + b + counter; }\n",
        )
        .unwrap();
        let inc = vec![p.join("include")];
        let sa = compile(&p.join("a.c"), &inc, &p.join("a.o")).unwrap();
        assert_eq!(sa.files_read, 2);
        assert_eq!(sa.functions, 3, "start_kernel, local and the used inline clamp");
        assert!(sa.ir_after < sa.ir_before);
        assert_eq!(
            cc_main(&os(&[
                "-I",
                p.join("include").to_str().unwrap(),
                "-o",
                p.join("b.o").to_str().unwrap(),
                p.join("b.c").to_str().unwrap()
            ])),
            0
        );
        let out = p.join("vmlinux");
        let st = linker::link(&[p.join("a.o"), p.join("b.o")], &out, Some("start_kernel")).unwrap();
        assert_eq!(st.objects, 2);
        assert_eq!(st.globals, 3, "start_kernel, counter, helper");
        let img = Object::decode(&std::fs::read(&out).unwrap(), object_file::IMAGE_MAGIC).unwrap();
        // Both files' static `local` are in the map, at different addresses.
        let locals: Vec<_> = img.symbols.iter().filter(|s| s.name == "local").collect();
        assert_eq!(locals.len(), 2);
        assert_ne!(locals[0].offset, locals[1].offset);
        assert!(img.symbols.windows(2).all(|w| w[0].offset <= w[1].offset));
    }

    #[test]
    fn link_errors_name_symbols_and_objects() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("a.c"), "int f(void) { return 1; }\nint g(void);\nint h(void) { return g(); }\n")
            .unwrap();
        std::fs::write(p.join("b.c"), "int f(void) { return 2; }\n").unwrap();
        compile(&p.join("a.c"), &[], &p.join("a.o")).unwrap();
        compile(&p.join("b.c"), &[], &p.join("b.o")).unwrap();
        let e = linker::link(&[p.join("a.o"), p.join("b.o")], &p.join("out"), None).unwrap_err().to_string();
        assert!(e.contains("multiple definition of 'f'") && e.contains("a.o") && e.contains("b.o"), "{e}");
        let e = linker::link(&[p.join("a.o")], &p.join("out"), None).unwrap_err().to_string();
        assert!(e.contains("undefined references, first: 'g'"), "{e}");
        let e = linker::link(&[p.join("b.o")], &p.join("out"), Some("start_kernel")).unwrap_err().to_string();
        assert!(e.contains("entry symbol 'start_kernel'"), "{e}");
        std::fs::write(p.join("junk.o"), b"not an object at all").unwrap();
        let e = linker::link(&[p.join("junk.o")], &p.join("out"), None).unwrap_err();
        assert!(matches!(e, linker::LinkError::Decode { .. }), "{e}");
        assert_eq!(ld_main(&os(&["-o", p.join("out").to_str().unwrap(), p.join("junk.o").to_str().unwrap()])), 1);
        assert_eq!(ld_main(&os(&["x.o"])), 2);
    }

    #[test]
    fn compile_errors_name_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::write(p.join("h.h"), "int broken(int a) { return a + ; }\n").unwrap();
        std::fs::write(p.join("x.c"), "\n#include \"h.h\"\n").unwrap();
        let e = compile(&p.join("x.c"), &[], &p.join("x.o")).unwrap_err().to_string();
        assert!(e.contains("h.h:1: syntax error"), "{e}");
        std::fs::write(p.join("y.c"), "int f(void) {\n return nope;\n}\n").unwrap();
        let e = compile(&p.join("y.c"), &[], &p.join("y.o")).unwrap_err().to_string();
        assert!(e.contains("y.c:2: 'nope' undeclared"), "{e}");
        assert_eq!(cc_main(&os(&["-o", "x.o"])), 2);
        assert_eq!(cc_main(&os(&["-o", p.join("y.o").to_str().unwrap(), p.join("y.c").to_str().unwrap()])), 1);
        assert!(!p.join("y.o").exists(), "no object after a failed compile");
    }
}
