//! A dbench loadfile (`nbench::loadfile::Loadfile::parse`) and a client's
//! pass-by-pass reading of it (`LineReader`). Invariants: every path of an
//! accepted loadfile, rendered for a client, resolves inside the replay
//! directory, names no other client's directory, and, for anything that
//! creates, replaces or removes, inside the client's own; a path's display
//! form parses back to the same path; the reader yields exactly the parsed
//! lines, pass after pass.
#![no_main]

use bootbench_fuzz::bounded_alloc;
use libfuzzer_sys::fuzz_target;
use loads::workloads::nbench::loadfile::{
    LineReader, Loadfile, Op, SmbPath, FILE_DIRECTORY_FILE, FILE_OPEN, FILE_OPEN_IF,
};
use std::path::{Component, Path, PathBuf};

/// The client the paths are rendered for, and the directory they replay in.
const CLIENT: &str = "client7";
const ROOT: &str = "/replay";

/// The paths `op` names.
fn paths(op: &Op) -> Vec<&SmbPath> {
    match op {
        Op::NtCreateX { path, .. }
        | Op::Unlink { path, .. }
        | Op::Deltree { path }
        | Op::Rmdir { path }
        | Op::Mkdir { path }
        | Op::QueryPathInfo { path, .. } => vec![path],
        Op::FindFirst { pattern, .. } => vec![pattern],
        Op::Rename { from, to } => vec![from, to],
        _ => vec![],
    }
}

/// Whether `op` creates, replaces or removes what its paths name (an
/// NTCreateX that only opens a directory does not).
fn changes(op: &Op) -> bool {
    match op {
        Op::NtCreateX { create_options, disposition, .. } => {
            create_options & FILE_DIRECTORY_FILE == 0 || !matches!(*disposition, FILE_OPEN | FILE_OPEN_IF)
        }
        Op::Rename { .. } | Op::Unlink { .. } | Op::Deltree { .. } | Op::Rmdir { .. } => true,
        _ => false,
    }
}

/// `ROOT` joined with `rel` and normalised lexically, as the kernel would
/// walk it (a symbolic link aside, which the replay never follows).
fn resolve(rel: &str) -> PathBuf {
    let mut out = PathBuf::from(ROOT);
    for c in Path::new(rel).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => out = PathBuf::from("/"),
        }
    }
    out
}

fn check_path(op: &Op, path: &SmbPath) {
    let mut rendered = Vec::new();
    path.render(CLIENT, &mut rendered);
    assert_eq!(rendered.len(), path.rendered_len(CLIENT), "rendered_len disagrees for {path}");
    let rendered = String::from_utf8(rendered).expect("a rendered path is UTF-8");
    assert!(!rendered.contains('\0'), "{rendered:?} holds a NUL");
    for comp in rendered.split('/') {
        assert!(!matches!(comp, "" | "." | ".."), "{path} rendered as {rendered:?}, with a {comp:?} component");
    }
    let root = Path::new(ROOT);
    let at = resolve(&rendered);
    assert!(at.starts_with(root) && at != root, "{path} resolves to {}, outside {ROOT}", at.display());
    let mut comps = rendered.split('/');
    if comps.next().is_some_and(|c| c.eq_ignore_ascii_case("clients")) {
        if let Some(second) = comps.next() {
            let lower = second.to_ascii_lowercase();
            let names_a_client = lower.len() > 6
                && lower.starts_with("client")
                && lower.get(6..).is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()));
            assert!(!names_a_client || second == CLIENT, "{path} names another client's directory: {rendered}");
        }
    }
    assert!(op.outside_client_dir().is_none(), "an accepted line names a path outside the client's directory: {op:?}");
    if changes(op) {
        let own = root.join("clients").join(CLIENT);
        assert!(at.starts_with(&own), "{op:?} changes {} outside the client's directory", at.display());
    }
    let shown = path.to_string();
    assert_eq!(SmbPath::parse(&shown).as_ref(), Ok(path), "{path} does not parse back from its display form");
}

fuzz_target!(|data: &[u8]| {
    let Ok(lf) = bounded_alloc("loadfile parse", data.len(), || Loadfile::parse("fuzz", data)) else { return };
    for line in &lf.lines {
        for path in paths(&line.op) {
            check_path(&line.op, path);
        }
    }
    let _ = (lf.max_io_size(), lf.op_counts(), lf.payload_bytes_per_pass(), lf.files_bytes_bound());
    let mut reader = LineReader::open(&lf).expect("a text loadfile opens");
    for pass in 0..2 {
        let mut i = 0;
        while let Some(line) = reader.next_line().expect("a parsed loadfile reads again") {
            assert_eq!(lf.lines.get(i), Some(&line), "pass {pass}: line {i} reads differently");
            i += 1;
        }
        assert_eq!(i, lf.lines.len(), "pass {pass} read {i} of {} lines", lf.lines.len());
        reader.rewind().expect("rewind");
    }
});
