//! Property tests of loadfile paths and lines: the invariants the
//! `loadfile` fuzz target (`fuzz/`) asserts, checked on every `cargo
//! test`. An accepted path, rendered for a client, resolves inside the
//! replay directory and names no other client's directory; what a line
//! creates, replaces or removes is inside the client's own; a path reads
//! back from its display form; a client's reader yields the parsed lines.

use super::*;
use proptest::prelude::*;
use std::path::{Component, Path, PathBuf};

const CLIENT: &str = "client7";

/// `/replay` joined with `rel`, `..` and `.` resolved lexically.
fn resolve(rel: &str) -> PathBuf {
    let mut out = PathBuf::from("/replay");
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

/// Paths built from the components that matter to containment.
fn raw_path() -> impl Strategy<Value = String> {
    let comp = prop::sample::select(vec![
        "clients", "Clients", "client1", "CLIENT1", "client2", "client12", "clientx", "..", ".", "", "~dmtmp", "a",
    ]);
    (prop::collection::vec((comp, prop::sample::select(vec!["\\", "/"])), 0..7), prop::bool::ANY).prop_map(
        |(comps, absolute)| {
            let body: String = comps.into_iter().map(|(c, sep)| format!("{sep}{c}")).collect();
            if absolute {
                body
            } else {
                body.trim_start_matches(['\\', '/']).to_string()
            }
        },
    )
}

fn rendered(p: &SmbPath) -> String {
    let mut out = Vec::new();
    p.render(CLIENT, &mut out);
    String::from_utf8(out).unwrap()
}

/// One loadfile line naming `a` and `b`.
fn line() -> impl Strategy<Value = String> {
    (0usize..9, raw_path(), raw_path(), prop::sample::select(vec!["0x0", "0x1", "0x40", "0x41"]), 0u32..6).prop_map(
        |(op, a, b, options, disposition)| match op {
            0 => format!("NTCreateX \"{a}\" {options} {disposition} 9937 NT_STATUS_OK"),
            1 => format!("Rename \"{a}\" \"{b}\" NT_STATUS_OK"),
            2 => format!("Unlink \"{a}\" 0x6 NT_STATUS_OK"),
            3 => format!("Deltree \"{a}\" NT_STATUS_OK"),
            4 => format!("Rmdir \"{a}\" NT_STATUS_OK"),
            5 => format!("Mkdir \"{a}\" NT_STATUS_OK"),
            6 => format!("QUERY_PATH_INFORMATION \"{a}\" 1004 NT_STATUS_OK"),
            7 => format!("FIND_FIRST \"{a}\\<.JNK\" 260 1366 0 NT_STATUS_OK"),
            _ => "ReadX 9937 0 4096 4096 NT_STATUS_OK".to_string(),
        },
    )
}

/// Whether `op` creates, replaces or removes what it names.
fn changes(op: &Op) -> bool {
    match op {
        Op::NtCreateX { create_options, disposition, .. } => {
            create_options & FILE_DIRECTORY_FILE == 0 || !matches!(*disposition, FILE_OPEN | FILE_OPEN_IF)
        }
        Op::Rename { .. } | Op::Unlink { .. } | Op::Deltree { .. } | Op::Rmdir { .. } => true,
        _ => false,
    }
}

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

proptest! {
    #[test]
    fn an_accepted_path_resolves_inside_the_replay_directory(raw in raw_path()) {
        let Ok(p) = SmbPath::parse(&raw) else { return Ok(()) };
        let r = rendered(&p);
        prop_assert_eq!(r.len(), p.rendered_len(CLIENT));
        prop_assert!(r.split('/').all(|c| !matches!(c, "" | "." | "..")), "{} rendered as {}", raw, r);
        let at = resolve(&r);
        prop_assert!(at.starts_with("/replay") && at != Path::new("/replay"), "{} resolves to {:?}", raw, at);
        let mut comps = r.split('/');
        if comps.next().is_some_and(|c| c.eq_ignore_ascii_case("clients")) {
            let second = comps.next().unwrap_or_default().to_ascii_lowercase();
            let other = second.len() > 6 && second.starts_with("client")
                && second[6..].bytes().all(|b| b.is_ascii_digit()) && second != CLIENT;
            prop_assert!(!other, "{} names another client's directory: {}", raw, r);
        }
        prop_assert_eq!(SmbPath::parse(&p.to_string()), Ok(p));
    }

    #[test]
    fn what_an_accepted_line_changes_is_inside_the_clients_directory(lines in prop::collection::vec(line(), 1..6)) {
        let text = lines.join("\n");
        let Ok(lf) = Loadfile::parse("t", text.as_bytes()) else { return Ok(()) };
        for l in &lf.lines {
            for p in paths(&l.op) {
                let at = resolve(&rendered(p));
                if changes(&l.op) {
                    prop_assert!(at.starts_with("/replay/clients/client7"), "{:?} changes {:?}", l.op, at);
                }
            }
        }
        let mut reader = LineReader::open(&lf).unwrap();
        for _pass in 0..2 {
            let mut read = Vec::new();
            while let Some(l) = reader.next_line().unwrap() {
                read.push(l);
            }
            prop_assert_eq!(&read, &lf.lines);
            reader.rewind().unwrap();
        }
    }
}
