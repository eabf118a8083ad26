//! The built-in NBENCH loadfile: generated from a fixed seed so that results
//! stay comparable for years, and written in dbench's own text format (so
//! Debian's `dbench -c` can replay it too). Owns the generator and its model
//! of the client's files; it never touches the filesystem.
//!
//! The generator models an office client the way Debian's `client.txt` (a
//! NetBench capture) behaves: documents are opened and read in 4 KiB or
//! 60 KiB chunks, saved through a temporary file that is written, flushed,
//! renamed over the original; directories are listed and probed for names
//! that do not exist. The operation mix is tuned to `client.txt`'s
//! proportions (ReadX 27%, NTCreateX 17%, QUERY_PATH_INFORMATION 16%, Close
//! 13%, WriteX 9%, FIND_FIRST 6%, ...; see the test that checks it). A
//! model of the files it created makes every expected status, returned
//! size and FIND_FIRST count exact.
//!
//! Determinism: the PCG32 generator (`rand_pcg::Pcg32`, a published
//! algorithm with fixed output) with a fixed state and stream, using only
//! `next_u32` and our own range reduction, so no crate's sampling code can
//! change the output. A unit test pins the text's sha256; any change to the
//! output must change [`BUILTIN_VERSION`] too.

use super::loadfile::{Loadfile, LoadfileError};
use rand_pcg::rand_core::Rng;
use rand_pcg::Pcg32;
use std::fmt::Write as _;

/// Name of the built-in loadfile in parameters and results.
pub const BUILTIN_NAME: &str = "builtin";

/// Version of the generator; bump when its output changes (the sha256 in
/// every result changes with it).
pub const BUILTIN_VERSION: u32 = 1;

/// sha256 of the built-in loadfile's text for [`BUILTIN_VERSION`]; every
/// result that used it records this value.
pub const BUILTIN_SHA256: &str = "bd3b311f0fc5da42125ec63a6ec78a61698906592670e2aedaedc15c1eb548c0";

/// PCG32 state and stream: fixed forever for version 1.
const SEED_STATE: u64 = 0x6462_656e_6368_0001;
const SEED_STREAM: u64 = 0x626f_6f74_6265_6e63;

/// Lines of the session part (after the setup part).
const TARGET_LINES: usize = 60_000;

/// Application directories under `~bbtmp` and the extension of their
/// documents.
const DIRS: &[(&str, &str)] = &[
    ("DOCS", "DOC"),
    ("SHEETS", "XLS"),
    ("SLIDES", "PPT"),
    ("DRAW", "CDR"),
    ("DB", "DB"),
    ("MAIL", "MSG"),
    ("NOTES", "TXT"),
    ("BUILD", "OBJ"),
];

/// Documents per directory at most (keeps the working set near 10 MB per
/// client, so many clients fit a small guest's tmpfs).
const MAX_DOCS_PER_DIR: usize = 14;
/// Documents per directory at least (deletes stop there).
const MIN_DOCS_PER_DIR: usize = 4;
const MAX_DOC_SIZE: u64 = 1 << 20;
/// SMB search: entries the client asks for, as client.txt's FIND_FIRST.
const FIND_MAX: u32 = 1366;

struct Doc {
    dir: usize,
    name: String,
    size: u64,
}

struct Generator {
    rng: Pcg32,
    out: String,
    lines: usize,
    docs: Vec<Doc>,
    next_handle: u32,
    serial: u32,
}

fn base() -> &'static str {
    r"\clients\client1"
}

fn dir_path(dir: usize) -> String {
    let name = DIRS.get(dir).map(|d| d.0).unwrap_or("DOCS");
    format!(r"{}\~bbtmp\{name}", base())
}

impl Generator {
    fn below(&mut self, n: u32) -> u32 {
        // Multiply-shift range reduction: deterministic, tiny bias.
        ((u64::from(self.rng.next_u32()) * u64::from(n)) >> 32) as u32
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        self.below(1000) < per_mille
    }

    /// Picks from `(weight, value)` pairs.
    fn weighted<T: Copy>(&mut self, table: &[(u32, T)]) -> Option<T> {
        let total: u32 = table.iter().map(|(w, _)| w).sum();
        let mut pick = self.below(total.max(1));
        for &(w, v) in table {
            if pick < w {
                return Some(v);
            }
            pick -= w;
        }
        table.last().map(|&(_, v)| v)
    }

    fn line(&mut self, text: std::fmt::Arguments<'_>) {
        let _ = self.out.write_fmt(text);
        self.out.push('\n');
        self.lines += 1;
    }

    fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }

    fn doc_path(&self, i: usize) -> String {
        match self.docs.get(i) {
            Some(d) => format!(r"{}\{}", dir_path(d.dir), d.name),
            None => dir_path(0),
        }
    }

    fn docs_in(&self, dir: usize) -> usize {
        self.docs.iter().filter(|d| d.dir == dir).count()
    }

    fn pick_doc(&mut self) -> usize {
        self.below(self.docs.len() as u32) as usize
    }

    fn new_doc_size(&mut self) -> u64 {
        let (lo, hi) = self
            .weighted(&[
                (30, (2_048u64, 16_384u64)),
                (40, (16_384, 131_072)),
                (25, (131_072, 524_288)),
                (5, (524_288, MAX_DOC_SIZE)),
            ])
            .unwrap_or((4096, 8192));
        lo + u64::from(self.below((hi - lo) as u32))
    }

    fn read_chunk(&mut self) -> u32 {
        self.weighted(&[(65, 4096), (16, 61_440), (6, 8192), (5, 2048), (5, 16_384), (3, 512)]).unwrap_or(4096)
    }

    fn write_chunk(&mut self) -> u32 {
        self.weighted(&[(70, 65_536), (20, 4096), (5, 2048), (5, 8192)]).unwrap_or(4096)
    }

    fn open(&mut self, path: &str, options: u32, disposition: u32) -> u32 {
        let h = self.handle();
        self.line(format_args!("NTCreateX \"{path}\" 0x{options:x} 0x{disposition:x} {h} NT_STATUS_OK"));
        h
    }

    fn write_all(&mut self, h: u32, from: u64, to: u64) {
        let mut off = from;
        while off < to {
            let chunk = u64::from(self.write_chunk()).min(to - off);
            self.line(format_args!("WriteX {h} {off} {chunk} {chunk} NT_STATUS_OK"));
            off += chunk;
        }
    }

    /// The setup every pass starts with, as client.txt's does: a fresh
    /// client directory, the application directories and some documents.
    fn setup(&mut self) {
        let b = base();
        self.line(format_args!("Deltree \"{b}\" NT_STATUS_OK"));
        self.line(format_args!("Mkdir \"\\clients\" NT_STATUS_OK"));
        let h = self.open(b, 0x1, 0x2);
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        self.line(format_args!("QUERY_PATH_INFORMATION \"{b}\\~bbtmp\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        let h = self.open(&format!(r"{b}\~bbtmp"), 0x1, 0x2);
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        for dir in 0..DIRS.len() {
            let h = self.open(&dir_path(dir), 0x1, 0x2);
            self.line(format_args!("Close {h} NT_STATUS_OK"));
        }
        for dir in 0..DIRS.len() {
            for _ in 0..MIN_DOCS_PER_DIR + 2 {
                self.create_doc(dir);
            }
        }
    }

    fn fresh_name(&mut self, dir: usize) -> String {
        self.serial += 1;
        let ext = DIRS.get(dir).map(|d| d.1).unwrap_or("DOC");
        format!("F{:05}.{ext}", self.serial)
    }

    fn create_doc(&mut self, dir: usize) {
        let name = self.fresh_name(dir);
        let size = self.new_doc_size();
        let path = format!(r"{}\{name}", dir_path(dir));
        self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        let h = self.open(&path, 0x40, 0x2);
        self.write_all(h, 0, size);
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        self.docs.push(Doc { dir, name, size });
    }

    /// Open a document, read some of it, close it.
    fn read_doc(&mut self) {
        let i = self.pick_doc();
        let path = self.doc_path(i);
        let size = self.docs.get(i).map(|d| d.size).unwrap_or(0);
        if self.chance(700) {
            self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OK"));
        }
        if self.chance(200) {
            self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1035 NT_STATUS_OK"));
        }
        let h = self.open(&path, 0x40, 0x1);
        if self.chance(150) {
            let level = self.weighted(&[(2, 1004), (1, 1005), (1, 258)]).unwrap_or(1004);
            self.line(format_args!("QUERY_FILE_INFORMATION {h} {level} NT_STATUS_OK"));
        }
        let chunk = u64::from(self.read_chunk());
        let locked = self.chance(15);
        if locked {
            self.line(format_args!("LockX {h} 2147483538 1 NT_STATUS_OK"));
        }
        let chunks_in_file = size.div_ceil(chunk).max(1);
        let reads = 1 + u64::from(self.below(chunks_in_file.min(10) as u32));
        let mut off = if self.chance(200) { chunk * u64::from(self.below(chunks_in_file as u32)) } else { 0 };
        for _ in 0..reads {
            if off >= size {
                break;
            }
            let ret = chunk.min(size - off);
            self.line(format_args!("ReadX {h} {off} {chunk} {ret} NT_STATUS_OK"));
            off += chunk;
        }
        if locked {
            self.line(format_args!("UnlockX {h} 2147483538 1 NT_STATUS_OK"));
        }
        self.line(format_args!("Close {h} NT_STATUS_OK"));
    }

    /// Look for names that do not exist, as applications probe for
    /// temporary and lock files.
    fn probe_missing(&mut self) {
        let dir = self.below(DIRS.len() as u32) as usize;
        self.serial += 1;
        let path = format!(r"{}\~P{:05}.TMP", dir_path(dir), self.serial);
        self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        if self.chance(900) {
            let h = self.next_handle + 1;
            self.line(format_args!("NTCreateX \"{path}\" 0x40 0x1 {h} NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        }
        if self.chance(200) {
            let d = dir_path(dir);
            self.line(format_args!("FIND_FIRST \"{d}\\<.JNK\" 260 {FIND_MAX} 0 NT_STATUS_NO_SUCH_FILE"));
        }
    }

    /// Save a document the way office applications do: write a temporary
    /// file, then rename it over the original.
    fn save_doc(&mut self) {
        let replace = !self.docs.is_empty() && self.chance(700);
        let (dir, target) = if replace {
            let i = self.pick_doc();
            (self.docs.get(i).map(|d| d.dir).unwrap_or(0), Some(i))
        } else {
            let dir = self.below(DIRS.len() as u32) as usize;
            if self.docs_in(dir) >= MAX_DOCS_PER_DIR {
                let i = self.docs.iter().position(|d| d.dir == dir);
                (dir, i)
            } else {
                (dir, None)
            }
        };
        self.serial += 1;
        let temp = format!(r"{}\~BB{:05}.TMP", dir_path(dir), self.serial);
        let size = self.new_doc_size();
        self.line(format_args!("QUERY_PATH_INFORMATION \"{temp}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        let h = self.open(&temp, 0x40, 0x2);
        if self.chance(600) && size > 1 {
            let last = size - 1;
            self.line(format_args!("WriteX {h} {last} 1 1 NT_STATUS_OK"));
            self.line(format_args!("QUERY_FILE_INFORMATION {h} 258 NT_STATUS_OK"));
        }
        self.write_all(h, 0, size);
        if self.chance(500) {
            self.line(format_args!("Flush {h} NT_STATUS_OK"));
        }
        if self.chance(600) {
            self.line(format_args!("SET_FILE_INFORMATION {h} 1004 NT_STATUS_OK"));
        }
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        match target {
            Some(i) => {
                let path = self.doc_path(i);
                self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OK"));
                self.line(format_args!("Unlink \"{path}\" 0x6 NT_STATUS_OK"));
                self.line(format_args!("Rename \"{temp}\" \"{path}\" NT_STATUS_OK"));
                if let Some(d) = self.docs.get_mut(i) {
                    d.size = size;
                }
            }
            None => {
                let name = self.fresh_name(dir);
                let path = format!(r"{}\{name}", dir_path(dir));
                self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
                self.line(format_args!("Rename \"{temp}\" \"{path}\" NT_STATUS_OK"));
                self.docs.push(Doc { dir, name, size });
            }
        }
        self.line(format_args!("QUERY_PATH_INFORMATION \"{temp}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
    }

    /// List a directory (the count includes `.` and `..`, as an SMB
    /// server's does) and look for stray `.JNK` files, which never exist.
    fn list_dir(&mut self) {
        let dir = self.below(DIRS.len() as u32) as usize;
        let d = dir_path(dir);
        let count = (self.docs_in(dir) as u32 + 2).min(FIND_MAX);
        self.line(format_args!("FIND_FIRST \"{d}\\*\" 260 {FIND_MAX} {count} NT_STATUS_OK"));
        if self.chance(600) {
            self.line(format_args!("FIND_FIRST \"{d}\\<.JNK\" 260 {FIND_MAX} 0 NT_STATUS_NO_SUCH_FILE"));
        }
        if self.chance(300) {
            let h = self.open(&d, 0x0, 0x1);
            self.line(format_args!("QUERY_FILE_INFORMATION {h} 1004 NT_STATUS_OK"));
            self.line(format_args!("Close {h} NT_STATUS_OK"));
        }
    }

    /// Append a few records to a document and flush them.
    fn append(&mut self) {
        let i = self.pick_doc();
        let size = self.docs.get(i).map(|d| d.size).unwrap_or(0);
        if size >= MAX_DOC_SIZE {
            return self.read_doc();
        }
        let path = self.doc_path(i);
        let h = self.open(&path, 0x40, 0x1);
        self.line(format_args!("QUERY_FILE_INFORMATION {h} 1004 NT_STATUS_OK"));
        let records = 1 + self.below(2);
        let mut end = size;
        for _ in 0..records {
            let n = self.weighted(&[(3, 2048u64), (4, 4096), (2, 8192), (1, 510)]).unwrap_or(4096);
            self.line(format_args!("WriteX {h} {end} {n} {n} NT_STATUS_OK"));
            end += n;
        }
        self.line(format_args!("Flush {h} NT_STATUS_OK"));
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        if let Some(d) = self.docs.get_mut(i) {
            d.size = end;
        }
    }

    /// A scratch file that lives briefly: created, written, closed and
    /// deleted (editors' lock and undo files).
    fn scratch(&mut self) {
        let dir = self.below(DIRS.len() as u32) as usize;
        self.serial += 1;
        let path = format!(r"{}\~WRL{:05}.TMP", dir_path(dir), self.serial);
        self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND"));
        let h = self.open(&path, 0x40, 0x2);
        let mut end = 0u64;
        for _ in 0..1 + self.below(2) {
            let n = self.weighted(&[(3, 4096u64), (2, 2048), (1, 8192)]).unwrap_or(4096);
            self.line(format_args!("WriteX {h} {end} {n} {n} NT_STATUS_OK"));
            end += n;
        }
        if self.chance(500) {
            self.line(format_args!("SET_FILE_INFORMATION {h} 1004 NT_STATUS_OK"));
        }
        self.line(format_args!("Close {h} NT_STATUS_OK"));
        if self.chance(300) {
            self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OK"));
        }
        self.line(format_args!("Unlink \"{path}\" 0x6 NT_STATUS_OK"));
    }

    /// Delete a document if its directory has enough of them.
    fn delete(&mut self) {
        let i = self.pick_doc();
        let dir = self.docs.get(i).map(|d| d.dir).unwrap_or(0);
        if self.docs_in(dir) <= MIN_DOCS_PER_DIR {
            return self.probe_missing();
        }
        let path = self.doc_path(i);
        self.line(format_args!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OK"));
        self.line(format_args!("Unlink \"{path}\" 0x6 NT_STATUS_OK"));
        self.docs.remove(i);
    }

    fn fs_info(&mut self) {
        let level = if self.chance(700) { 259 } else { 1 };
        self.line(format_args!("QUERY_FS_INFORMATION {level} NT_STATUS_OK"));
    }
}

#[derive(Clone, Copy)]
enum Action {
    Read,
    Probe,
    Save,
    List,
    Append,
    Delete,
    Scratch,
    FsInfo,
}

/// The built-in loadfile's text.
pub fn builtin_text() -> String {
    let mut g = Generator {
        rng: Pcg32::new(SEED_STATE, SEED_STREAM),
        out: String::with_capacity(TARGET_LINES * 64),
        lines: 0,
        docs: Vec::new(),
        next_handle: 10_000,
        serial: 0,
    };
    let _ = writeln!(
        g.out,
        "# bootbench built-in NBENCH loadfile, version {BUILTIN_VERSION}: generated from a fixed seed; do not edit"
    );
    g.setup();
    let table = [
        (300, Action::Read),
        (230, Action::Probe),
        (40, Action::Save),
        (130, Action::List),
        (35, Action::Append),
        (40, Action::Delete),
        (100, Action::Scratch),
        (110, Action::FsInfo),
    ];
    while g.lines < TARGET_LINES {
        match g.weighted(&table).unwrap_or(Action::Read) {
            Action::Read => g.read_doc(),
            Action::Probe => g.probe_missing(),
            Action::Save => g.save_doc(),
            Action::List => g.list_dir(),
            Action::Append => g.append(),
            Action::Delete => g.delete(),
            Action::Scratch => g.scratch(),
            Action::FsInfo => g.fs_info(),
        }
    }
    g.out
}

/// The built-in loadfile, parsed.
pub fn builtin() -> Result<Loadfile, LoadfileError> {
    Loadfile::parse(BUILTIN_NAME, builtin_text().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::super::loadfile::{Op, OpKind};
    use super::*;

    #[test]
    fn is_deterministic_and_pinned() {
        let a = builtin().unwrap();
        let b = builtin().unwrap();
        assert_eq!(a.sha256, b.sha256);
        // Changing the generator changes every result's loadfile hash:
        // bump BUILTIN_VERSION and update BUILTIN_SHA256 together.
        assert_eq!(a.sha256, BUILTIN_SHA256, "built-in loadfile changed");
        assert_eq!(a.lines.len(), 60_003);
    }

    #[test]
    fn op_mix_follows_client_txt() {
        let lf = builtin().unwrap();
        let counts = lf.op_counts();
        let total: u64 = counts.iter().sum();
        let share = |k: OpKind| counts[k.index()] as f64 / total as f64;
        // client.txt's shares of lines (458,344 lines, Debian dbench 4.0).
        let reference = [
            (OpKind::ReadX, 0.271),
            (OpKind::NtCreateX, 0.173),
            (OpKind::Qpathinfo, 0.157),
            (OpKind::Close, 0.127),
            (OpKind::WriteX, 0.086),
            (OpKind::Find, 0.061),
            (OpKind::Unlink, 0.035),
            (OpKind::Qfsinfo, 0.029),
            (OpKind::Qfileinfo, 0.027),
            (OpKind::Sfileinfo, 0.014),
            (OpKind::Flush, 0.012),
            (OpKind::Rename, 0.007),
        ];
        let mut report = String::new();
        for (k, want) in reference {
            let got = share(k);
            let _ = writeln!(report, "{:10} {:.4} (client.txt {want:.3})", k.name(), got);
        }
        eprintln!("{report}");
        for (k, want) in reference {
            let got = share(k);
            assert!(
                (got - want).abs() <= want * 0.25 + 0.002,
                "{} share {got:.4} vs client.txt {want}\n{report}",
                k.name()
            );
        }
        assert!(counts[OpKind::LockX.index()] > 0 && counts[OpKind::LockX.index()] == counts[OpKind::UnlockX.index()]);
        // Bytes per line close to client.txt's 5.4 KB, reads outweighing writes.
        let (mut read, mut written) = (0u64, 0u64);
        for l in &lf.lines {
            match l.op {
                Op::ReadX { size, .. } => read += u64::from(size),
                Op::WriteX { size, .. } => written += u64::from(size),
                _ => {}
            }
        }
        let per_line = (read + written) as f64 / total as f64;
        eprintln!("read {read} written {written} per line {per_line:.0} lines {total}");
        assert!((2500.0..9000.0).contains(&per_line), "{per_line}");
        assert!(read > written, "read {read} written {written}");
    }
}
