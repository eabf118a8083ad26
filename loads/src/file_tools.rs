//! The small Unix commands SDET-style scripts run, as applets: `ls`, `cp`,
//! `cat`, `grep`, `sort`, `wc`, `mkdir` and `rm`. Each is a real (if
//! minimal) implementation working on real files, with the options the
//! scripts use and the exit codes of their coreutils namesakes (`grep`: 0
//! match, 1 none, 2 error; others: 0 or 1). Owns these commands; must not
//! know about scripts or workloads.

use std::ffi::OsString;
use std::io::{self, BufRead, BufWriter, Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Names of the applets this module provides.
pub const NAMES: &[&str] = &["ls", "cp", "cat", "grep", "sort", "wc", "mkdir", "rm"];

/// Runs tool `name` with `args`; `None` if this module has no such tool.
pub fn run(name: &str, args: &[OsString]) -> Option<i32> {
    Some(match name {
        "ls" => ls(args),
        "cp" => cp(args),
        "cat" => cat(args),
        "grep" => grep(args),
        "sort" => sort(args),
        "wc" => wc(args),
        "mkdir" => mkdir(args),
        "rm" => rm(args),
        _ => return None,
    })
}

/// Parsed command line: single-letter flags and operands.
struct Args {
    flags: Vec<char>,
    operands: Vec<OsString>,
}

impl Args {
    fn has(&self, c: char) -> bool {
        self.flags.contains(&c)
    }
}

fn parse(tool: &str, args: &[OsString], allowed: &str) -> Result<Args, i32> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(args.iter().cloned());
    let mut a = Args { flags: Vec::new(), operands: Vec::new() };
    loop {
        match p.next() {
            Ok(None) => return Ok(a),
            Ok(Some(Short(c))) if allowed.contains(c) => a.flags.push(c),
            Ok(Some(Value(v))) => a.operands.push(v),
            Ok(Some(other)) => {
                eprintln!("{tool}: {} (options: -{allowed})", other.unexpected());
                return Err(2);
            }
            Err(e) => {
                eprintln!("{tool}: {e}");
                return Err(2);
            }
        }
    }
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

fn mode_string(md: &std::fs::Metadata) -> String {
    let t = if md.is_dir() {
        'd'
    } else if md.file_type().is_symlink() {
        'l'
    } else {
        '-'
    };
    let m = md.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(t);
    for shift in [6u32, 3, 0] {
        let bits = (m >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

fn ls_entry(out: &mut impl Write, path: &Path, name: &str, long: bool) -> io::Result<()> {
    if long {
        let md = std::fs::symlink_metadata(path)?;
        writeln!(
            out,
            "{} {:>3} {:>5} {:>5} {:>8} {:>10} {name}",
            mode_string(&md),
            md.nlink(),
            md.uid(),
            md.gid(),
            md.size(),
            md.mtime()
        )
    } else {
        writeln!(out, "{name}")
    }
}

fn sorted_children(dir: &Path, all: bool) -> io::Result<Vec<(String, PathBuf)>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if all || !name.starts_with('.') {
            v.push((name, e.path()));
        }
    }
    v.sort();
    Ok(v)
}

fn ls_dir(out: &mut impl Write, dir: &Path, long: bool, all: bool, recursive: bool, header: bool) -> io::Result<()> {
    if header {
        writeln!(out, "{}:", show(dir))?;
    }
    let kids = sorted_children(dir, all)?;
    for (name, path) in &kids {
        ls_entry(out, path, name, long)?;
    }
    if recursive {
        for (_, path) in kids {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                writeln!(out)?;
                ls_dir(out, &path, long, all, true, true)?;
            }
        }
    }
    Ok(())
}

/// `ls [-l] [-a] [-R] [PATH...]`: names in byte order; `-l` long format.
fn ls(args: &[OsString]) -> i32 {
    let a = match parse("ls", args, "laR1") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let paths: Vec<PathBuf> =
        if a.operands.is_empty() { vec![PathBuf::from(".")] } else { a.operands.iter().map(PathBuf::from).collect() };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut code = 0;
    let many = paths.len() > 1 || a.has('R');
    for p in &paths {
        let r = match std::fs::metadata(p) {
            Ok(md) if md.is_dir() => ls_dir(&mut out, p, a.has('l'), a.has('a'), a.has('R'), many),
            Ok(_) => ls_entry(&mut out, p, &show(p), a.has('l')),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            eprintln!("ls: cannot access '{}': {e}", show(p));
            code = 1;
        }
    }
    if out.flush().is_err() {
        code = 1;
    }
    code
}

/// Copies the directory tree `src` to `dst` (created as needed), files in
/// name order.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    for entry in walkdir::WalkDir::new(src).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        let rel = entry.path().strip_prefix(src).map_err(io::Error::other)?;
        let target = dst.join(rel);
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// `cp [-r] SRC... DEST`: into DEST when it is a directory.
fn cp(args: &[OsString]) -> i32 {
    let a = match parse("cp", args, "rR") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let recursive = a.has('r') || a.has('R');
    let Some((dest, srcs)) = a.operands.split_last() else {
        eprintln!("cp: missing file operand");
        return 2;
    };
    if srcs.is_empty() {
        eprintln!("cp: missing destination file operand after '{}'", dest.to_string_lossy());
        return 2;
    }
    let dest = Path::new(dest);
    let into_dir = dest.is_dir();
    if srcs.len() > 1 && !into_dir {
        eprintln!("cp: target '{}' is not a directory", show(dest));
        return 1;
    }
    let mut code = 0;
    for s in srcs {
        let s = Path::new(s);
        let target = match (into_dir, s.file_name()) {
            (true, Some(n)) => dest.join(n),
            _ => dest.to_path_buf(),
        };
        let r = if s.is_dir() {
            if recursive {
                copy_tree(s, &target)
            } else {
                eprintln!("cp: -r not specified; omitting directory '{}'", show(s));
                code = 1;
                continue;
            }
        } else {
            std::fs::copy(s, &target).map(|_| ())
        };
        if let Err(e) = r {
            eprintln!("cp: cannot copy '{}' to '{}': {e}", show(s), show(&target));
            code = 1;
        }
    }
    code
}

/// Opens each operand (or stdin when there are none) and hands it to `f`
/// with its display name; reports unreadable files and returns 1 then.
fn each_input(tool: &str, operands: &[OsString], mut f: impl FnMut(&str, &mut dyn Read) -> io::Result<()>) -> i32 {
    let mut code = 0;
    if operands.is_empty() {
        if let Err(e) = f("-", &mut io::stdin().lock()) {
            eprintln!("{tool}: -: {e}");
            code = 1;
        }
        return code;
    }
    for o in operands {
        let name = o.to_string_lossy();
        let r = std::fs::File::open(o).and_then(|mut file| f(&name, &mut file));
        if let Err(e) = r {
            eprintln!("{tool}: {name}: {e}");
            code = 1;
        }
    }
    code
}

/// `cat [FILE...]`.
fn cat(args: &[OsString]) -> i32 {
    let a = match parse("cat", args, "") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut out = BufWriter::new(io::stdout().lock());
    let mut code = each_input("cat", &a.operands, |_, r| io::copy(r, &mut out).map(|_| ()));
    if out.flush().is_err() {
        code = 1;
    }
    code
}

/// `grep [-c] [-v] [-i] [-n] PATTERN [FILE...]` with Rust regex syntax.
fn grep(args: &[OsString]) -> i32 {
    let a = match parse("grep", args, "cvin") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let Some((pattern, files)) = a.operands.split_first() else {
        eprintln!("grep: missing PATTERN");
        return 2;
    };
    let re = match regex::RegexBuilder::new(&pattern.to_string_lossy()).case_insensitive(a.has('i')).build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("grep: bad pattern: {e}");
            return 2;
        }
    };
    let prefix = files.len() > 1;
    let mut out = BufWriter::new(io::stdout().lock());
    let mut matched = false;
    let code = each_input("grep", files, |name, r| {
        let mut count = 0u64;
        for (n, line) in io::BufReader::new(r).lines().enumerate() {
            let line = line?;
            if re.is_match(&line) != a.has('v') {
                count += 1;
                if !a.has('c') {
                    if prefix {
                        write!(out, "{name}:")?;
                    }
                    if a.has('n') {
                        write!(out, "{}:", n + 1)?;
                    }
                    writeln!(out, "{line}")?;
                }
            }
        }
        if a.has('c') {
            if prefix {
                write!(out, "{name}:")?;
            }
            writeln!(out, "{count}")?;
        }
        matched |= count > 0;
        Ok(())
    });
    if code != 0 || out.flush().is_err() {
        2
    } else if matched {
        0
    } else {
        1
    }
}

fn leading_number(s: &str) -> f64 {
    let t = s.trim_start();
    let end =
        t.char_indices().find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-') || c == '.')).map(|(i, _)| i);
    t.get(..end.unwrap_or(t.len())).and_then(|n| n.parse().ok()).unwrap_or(0.0)
}

/// `sort [-r] [-n] [-u] [FILE...]`: byte order, or numeric with `-n`.
fn sort(args: &[OsString]) -> i32 {
    let a = match parse("sort", args, "rnu") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let mut lines: Vec<String> = Vec::new();
    let code = each_input("sort", &a.operands, |_, r| {
        for l in io::BufReader::new(r).lines() {
            lines.push(l?);
        }
        Ok(())
    });
    if code != 0 {
        return 2;
    }
    if a.has('n') {
        lines.sort_by(|x, y| leading_number(x).total_cmp(&leading_number(y)).then_with(|| x.cmp(y)));
    } else {
        lines.sort();
    }
    if a.has('u') {
        lines.dedup();
    }
    if a.has('r') {
        lines.reverse();
    }
    let mut out = BufWriter::new(io::stdout().lock());
    for l in &lines {
        if writeln!(out, "{l}").is_err() {
            return 2;
        }
    }
    if out.flush().is_err() {
        2
    } else {
        0
    }
}

/// `wc [-l] [-w] [-c] [FILE...]`: lines, words, bytes (all by default),
/// and a total line for several files.
fn wc(args: &[OsString]) -> i32 {
    let a = match parse("wc", args, "lwc") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let all = !(a.has('l') || a.has('w') || a.has('c'));
    let mut out = BufWriter::new(io::stdout().lock());
    let mut total = [0u64; 3];
    let mut files = 0;
    let fmt = |counts: &[u64; 3], name: &str| {
        let mut s = String::new();
        for (i, flag) in ['l', 'w', 'c'].iter().enumerate() {
            if all || a.has(*flag) {
                s.push_str(&format!("{:>8}", counts.get(i).copied().unwrap_or(0)));
            }
        }
        if name != "-" {
            s.push(' ');
            s.push_str(name);
        }
        s
    };
    let mut code = each_input("wc", &a.operands, |name, r| {
        let mut buf = Vec::new();
        r.read_to_end(&mut buf)?;
        let counts = [
            buf.iter().filter(|&&b| b == b'\n').count() as u64,
            buf.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).count() as u64,
            buf.len() as u64,
        ];
        for (t, c) in total.iter_mut().zip(counts) {
            *t += c;
        }
        files += 1;
        writeln!(out, "{}", fmt(&counts, name))
    });
    if files > 1 && writeln!(out, "{}", fmt(&total, "total")).is_err() {
        code = 1;
    }
    if out.flush().is_err() {
        code = 1;
    }
    code
}

/// `mkdir [-p] DIR...`.
fn mkdir(args: &[OsString]) -> i32 {
    let a = match parse("mkdir", args, "p") {
        Ok(a) => a,
        Err(c) => return c,
    };
    if a.operands.is_empty() {
        eprintln!("mkdir: missing operand");
        return 2;
    }
    let mut code = 0;
    for d in &a.operands {
        let r = if a.has('p') { std::fs::create_dir_all(d) } else { std::fs::create_dir(d) };
        if let Err(e) = r {
            eprintln!("mkdir: cannot create directory '{}': {e}", d.to_string_lossy());
            code = 1;
        }
    }
    code
}

/// `rm [-r] [-f] PATH...`.
fn rm(args: &[OsString]) -> i32 {
    let a = match parse("rm", args, "rRf") {
        Ok(a) => a,
        Err(c) => return c,
    };
    let (recursive, force) = (a.has('r') || a.has('R'), a.has('f'));
    if a.operands.is_empty() && !force {
        eprintln!("rm: missing operand");
        return 2;
    }
    let mut code = 0;
    for p in &a.operands {
        let p = Path::new(p);
        let r = match std::fs::symlink_metadata(p) {
            Ok(md) if md.is_dir() && recursive => std::fs::remove_dir_all(p),
            Ok(md) if md.is_dir() => Err(io::Error::other("is a directory")),
            Ok(_) => std::fs::remove_file(p),
            Err(e) if force && e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            eprintln!("rm: cannot remove '{}': {e}", show(p));
            code = 1;
        }
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_tool_is_none() {
        assert_eq!(run("/tmp", &[]), None);
    }

    #[test]
    fn numeric_sort_key() {
        assert_eq!(leading_number("  42 apples"), 42.0);
        assert_eq!(leading_number("-3.5x"), -3.5);
        assert_eq!(leading_number("none"), 0.0);
    }
}
