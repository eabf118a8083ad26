//! SDET's scripts as shell text: each script a fixed, seeded sequence of
//! ordinary commands (ls, cp, cat, grep, sort, wc, a pipeline, mkdir and
//! rm, cc, find, sed and diff) for dash to run in one user's home, every
//! command found on the PATH and exec'd by the shell; and the driver
//! script that starts N of them at once and waits for every one. Every
//! script is the same units of work in its own seeded order, as SDET's
//! scripts were permutations of one set. Owns the text; must not run it.

use crate::kernel_build::source_tree::INCLUDE_DIR;
use crate::sdet_home::{doc, script_order, NUMBERS, WORDS};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

/// Kinds of unit; a script of `units` units cycles through them.
pub const UNIT_KINDS: u32 = 14;

/// Exit codes a command may end with and count as done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// 0 only.
    Zero,
    /// 0 or 1 (grep's "no match", diff's "different").
    ZeroOrOne,
}

/// One command line of a script, in shell syntax (without its check).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The command line, e.g. `cat docs/doc1.txt | sort -u | wc -l > out/pipe6`.
    pub text: String,
    /// What its status may be.
    pub accept: Accept,
}

impl Line {
    fn ok(text: String) -> Line {
        Line { text, accept: Accept::Zero }
    }
}

/// A unit of work: lines that stay together and in order (mkdir, use,
/// remove); scripts permute units, never the lines inside one.
pub type Unit = Vec<Line>;

/// The units every script runs, each in its own order: `units` of them,
/// cycling through the [`UNIT_KINDS`] kinds, their files and words picked
/// from `docs` documents and the C `sources` (relative to `src/`) with
/// `seed`. Outputs are numbered by unit so no two collide.
pub fn base_units(units: u32, docs: u32, sources: &[String], seed: u64) -> Vec<Unit> {
    let mut g = Pcg64::seed_from_u64(seed ^ 0x5de7_5c1e);
    let mut pick = |n: u32| if n <= 1 { 0 } else { g.random_range(0..n) };
    let mut out = Vec::with_capacity(units as usize);
    for k in 0..units {
        let d = doc(pick(docs));
        let d2 = doc(pick(docs));
        let mut word = || WORDS.get(pick(WORDS.len() as u32) as usize).copied().unwrap_or("kernel");
        let (w1, w2, w3) = (word(), word(), word());
        let src = sources.get(pick(sources.len() as u32) as usize).cloned().unwrap_or_default();
        let unit = match k % UNIT_KINDS {
            0 => vec![Line::ok(format!("ls -l docs > out/ls{k}"))],
            1 => vec![Line::ok(format!("cp {d} tmp/copy{k}.txt"))],
            2 => vec![Line::ok(format!("cat {d} {d2} > out/cat{k}"))],
            3 => vec![Line { text: format!("grep -c {w1} docs/*.txt > out/grep{k}"), accept: Accept::ZeroOrOne }],
            4 => vec![Line::ok(format!("sort {d} > out/sort{k}"))],
            5 => vec![Line::ok(format!("wc docs/*.txt > out/wc{k}"))],
            6 => vec![Line::ok(format!("cat {d} {d2} | sort -u | wc -l > out/pipe{k}"))],
            7 => vec![
                Line::ok(format!("mkdir -p tmp/d{k}/a/b")),
                Line::ok(format!("cp {d} {d2} tmp/d{k}/a/b")),
                Line::ok(format!("ls -R tmp/d{k} > out/tree{k}")),
                Line::ok(format!("rm -r tmp/d{k}")),
            ],
            8 => vec![Line::ok(format!("cc -O -c -I src/{INCLUDE_DIR} -o tmp/obj{k}.o src/{src}"))],
            9 => vec![Line { text: format!("grep -i -n {w1} {d} > out/grepi{k}"), accept: Accept::ZeroOrOne }],
            10 => vec![Line::ok(format!("sort -n -r {NUMBERS} > out/num{k}"))],
            11 => vec![Line::ok(format!("ls -l -R . > out/lsr{k}"))],
            12 => vec![Line::ok(format!("find . -name '*.c' -print > out/find{k}"))],
            _ => vec![
                Line::ok(format!("sed -e 's/{w1}/{w2}/g' -e '/{w3}/d' {d} > tmp/ed{k}.txt")),
                Line { text: format!("diff {d} tmp/ed{k}.txt > out/diff{k}"), accept: Accept::ZeroOrOne },
            ],
        };
        out.push(unit);
    }
    out
}

/// Script `index`'s lines: the base units in that script's own seeded
/// order.
pub fn script_lines(base: &[Unit], seed: u64, index: usize) -> Vec<Line> {
    script_order(base.len(), seed, index).into_iter().flat_map(|u| base.get(u).cloned().unwrap_or_default()).collect()
}

/// The message a script prints on stderr when its command `n` fails; the
/// workload finds it in the script's log.
pub const FAILED_MARK: &str = "sdet: command ";

/// The script as dash runs it: into `home`, then every line with its
/// check; the first that fails prints [`FAILED_MARK`], its number and its
/// status on stderr, and ends the script with status 1.
pub fn render_script(home: &str, lines: &[Line]) -> String {
    let mut s = format!(
        "# SDET user script: {} command lines\nfail() {{ echo \"{FAILED_MARK}$1 failed (exit $2)\" >&2; exit 1; }}\ncd {home} || fail cd $?\n",
        lines.len()
    );
    for (n, l) in lines.iter().enumerate() {
        match l.accept {
            Accept::Zero => s.push_str(&format!("{} || fail {n} $?\n", l.text)),
            Accept::ZeroOrOne => s.push_str(&format!("{}; s=$?; [ $s -le 1 ] || fail {n} $s\n", l.text)),
        }
    }
    s
}

/// The message the driver prints when a script fails.
pub const SCRIPT_FAILED_MARK: &str = "sdet: script ";

/// The driver: starts `scripts` (each `sh SCRIPT > LOG 2>&1`, in the
/// background, as given) at once, then waits for each; prints
/// [`SCRIPT_FAILED_MARK`] and the number and status of each that failed,
/// and exits 1 if any did.
pub fn render_driver(scripts: &[(String, String)]) -> String {
    let mut s = format!("# SDET driver: {} scripts at once\n", scripts.len());
    for (i, (script, log)) in scripts.iter().enumerate() {
        s.push_str(&format!("sh {script} > {log} 2>&1 &\np{i}=$!\n"));
    }
    s.push_str("status=0\n");
    for i in 0..scripts.len() {
        s.push_str(&format!("wait $p{i} || {{ echo \"{SCRIPT_FAILED_MARK}{i} failed (exit $?)\"; status=1; }}\n"));
    }
    s.push_str("exit $status\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(units: u32) -> Vec<Unit> {
        base_units(units, 6, &["kernel/a.c".into(), "mm/b.c".into()], 11)
    }

    #[test]
    fn scripts_are_permutations_of_the_same_units_with_units_kept_whole() {
        let b = base(28);
        let s0 = script_lines(&b, 5, 0);
        let s1 = script_lines(&b, 5, 1);
        assert_ne!(s0, s1, "each script has its own order");
        assert_eq!(s0, script_lines(&b, 5, 0), "deterministic");
        let sorted = |s: &[Line]| {
            let mut v: Vec<String> = s.iter().map(|l| l.text.clone()).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&s0), sorted(&s1));
        let i = s1.iter().position(|l| l.text.starts_with("mkdir -p")).unwrap();
        assert!(s1[i + 1].text.starts_with("cp ") && s1[i + 3].text.starts_with("rm -r "), "{:?}", &s1[i..i + 4]);
        let j = s1.iter().position(|l| l.text.starts_with("sed ")).unwrap();
        assert!(s1[j + 1].text.starts_with("diff "));
        // Two of every kind of command, each program named as a shell
        // finds it on the PATH.
        let count = |program: &str| s0.iter().filter(|l| l.text.starts_with(&format!("{program} "))).count();
        // 28 units are every kind twice; some kinds run a program twice
        // (cp, ls, grep, sort and cat in two kinds each).
        for (program, n) in [("ls", 6), ("cp", 4), ("cat", 4), ("grep", 4), ("sort", 4), ("wc", 2), ("mkdir", 2)] {
            assert_eq!(count(program), n, "{program}");
        }
        for program in ["rm", "cc", "find", "sed", "diff"] {
            assert_eq!(count(program), 2, "{program}");
        }
        assert_eq!(s0.iter().filter(|l| l.text.starts_with("cc ")).count(), 2);
        assert!(s0.iter().any(|l| l.text.contains(" | sort -u | wc -l > out/pipe")));
    }

    #[test]
    fn a_script_checks_every_line_and_names_the_one_that_failed() {
        let lines = vec![
            Line::ok("ls -l docs > out/ls0".into()),
            Line { text: "grep -c page docs/*.txt > out/grep3".into(), accept: Accept::ZeroOrOne },
        ];
        let s = render_script("/bootbench/work/homes/user2", &lines);
        assert!(s.contains("cd /bootbench/work/homes/user2 || fail cd $?\n"), "{s}");
        assert!(s.contains("ls -l docs > out/ls0 || fail 0 $?\n"), "{s}");
        assert!(s.contains("grep -c page docs/*.txt > out/grep3; s=$?; [ $s -le 1 ] || fail 1 $s\n"), "{s}");
        let d = render_driver(&[("scripts/s0.sh".into(), "l0".into()), ("scripts/s1.sh".into(), "l1".into())]);
        assert!(d.contains("sh scripts/s1.sh > l1 2>&1 &\np1=$!\n"), "{d}");
        assert!(d.contains("wait $p1 || {"), "{d}");
        assert!(d.ends_with("exit $status\n"), "{d}");
    }
}
