//! Naming the kernel groups to compare: a results file, optionally followed
//! by `:SELECTOR` to pick one group of a multi-kernel file. Owns parsing and
//! matching; reading files is [`crate::results::migration`]'s job.
//!
//! Selector syntax (after the last `:` of an argument that is not itself an
//! existing file):
//! - `#N`: the N-th group of the file (1-based, in order of first boot);
//! - `label=NAME` or a bare `NAME`: the group with that label;
//! - `sha=HEX`: the group whose kernel image sha256 starts with HEX (≥ 6
//!   digits);
//! - `cmdline~TEXT`: the group whose kernel cmdline contains TEXT.
//!
//! A selector that matches no group or several is an error listing every
//! group with its `#N`, which always picks exactly one.

use crate::results::BootRecord;
use std::path::{Path, PathBuf};

/// Errors naming groups.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectorError {
    /// Neither the argument nor its part before `:` is a file.
    #[error("'{0}' is not a results file, nor FILE:SELECTOR with an existing FILE")]
    NoFile(String),
    /// The selector text is malformed.
    #[error("bad group selector '{selector}': {why}")]
    Bad {
        /// The selector text.
        selector: String,
        /// What is wrong.
        why: String,
    },
    /// No group matches.
    #[error("{file}: no group matches '{selector}'; the groups are:\n{groups}")]
    NoMatch {
        /// The file.
        file: PathBuf,
        /// The selector.
        selector: String,
        /// Listing of the file's groups.
        groups: String,
    },
    /// Several groups match.
    #[error("{file}: '{selector}' matches {count} groups; pick one with FILE:#N:\n{groups}")]
    Ambiguous {
        /// The file.
        file: PathBuf,
        /// The selector, or "the whole file".
        selector: String,
        /// How many matched.
        count: usize,
        /// Listing of the file's groups.
        groups: String,
    },
}

/// How to pick a group inside a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Criterion {
    /// The N-th group (1-based).
    Index(usize),
    /// By label.
    Label(String),
    /// By image sha256 prefix (lowercase hex).
    Sha(String),
    /// By a cmdline substring.
    Cmdline(String),
}

/// A parsed argument: a file and maybe a criterion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// The argument as given.
    pub text: String,
    /// The results file.
    pub file: PathBuf,
    /// `None`: the file must hold exactly one group.
    pub criterion: Option<Criterion>,
}

/// Parses `FILE` or `FILE:SELECTOR`. An argument naming an existing file is
/// a file even if it contains `:`.
pub fn parse(arg: &str) -> Result<Selector, SelectorError> {
    if Path::new(arg).is_file() {
        return Ok(Selector { text: arg.into(), file: arg.into(), criterion: None });
    }
    let Some((file, sel)) = arg.rsplit_once(':') else { return Err(SelectorError::NoFile(arg.into())) };
    if !Path::new(file).is_file() {
        return Err(SelectorError::NoFile(arg.into()));
    }
    let bad = |why: &str| SelectorError::Bad { selector: sel.into(), why: why.into() };
    let criterion = if let Some(n) = sel.strip_prefix('#') {
        match n.parse::<usize>() {
            Ok(i) if i >= 1 => Criterion::Index(i),
            _ => return Err(bad("#N needs a group number from 1")),
        }
    } else if let Some(l) = sel.strip_prefix("label=") {
        Criterion::Label(l.into())
    } else if let Some(h) = sel.strip_prefix("sha=") {
        if h.len() < 6 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad("sha= needs at least 6 hex digits"));
        }
        Criterion::Sha(h.to_ascii_lowercase())
    } else if let Some(c) = sel.strip_prefix("cmdline~") {
        if c.is_empty() {
            return Err(bad("cmdline~ needs text to look for"));
        }
        Criterion::Cmdline(c.into())
    } else if sel.is_empty() {
        return Err(bad("empty selector after ':'"));
    } else {
        Criterion::Label(sel.into())
    };
    Ok(Selector { text: arg.into(), file: file.into(), criterion: Some(criterion) })
}

/// A group of boots in one file: same kernel image, cmdline and label.
#[derive(Debug, Clone, PartialEq)]
pub struct FileGroup {
    /// 1-based position in the file (by first boot).
    pub number: usize,
    /// The group's boots, in run order.
    pub boots: Vec<BootRecord>,
}

impl FileGroup {
    /// Label of the group.
    pub fn label(&self) -> &str {
        self.boots.first().map(|b| b.label.as_str()).unwrap_or_default()
    }
    /// Image sha256.
    pub fn sha(&self) -> &str {
        self.boots.first().map(|b| b.kernel.image_sha256.as_str()).unwrap_or_default()
    }
    /// The cmdline.
    pub fn cmdline(&self) -> &str {
        self.boots.first().map(|b| b.cmdline.as_str()).unwrap_or_default()
    }
    /// The kernel image's path as booted.
    pub fn image_path(&self) -> &std::path::Path {
        self.boots.first().map(|b| b.kernel.path.as_path()).unwrap_or(std::path::Path::new(""))
    }
    /// Kernel release, from the guest or the host.
    pub fn release(&self) -> String {
        self.boots
            .iter()
            .find_map(|b| b.result.as_ref().map(|d| d.provenance.kernel.release.clone()))
            .or_else(|| self.boots.iter().find_map(|b| b.kernel.release.clone()))
            .unwrap_or_else(|| self.boots.first().map(|b| b.kernel.path.display().to_string()).unwrap_or_default())
    }

    fn matches(&self, c: &Criterion) -> bool {
        match c {
            Criterion::Index(i) => self.number == *i,
            Criterion::Label(l) => self.label() == l,
            Criterion::Sha(h) => self.sha().starts_with(h.as_str()),
            Criterion::Cmdline(t) => self.cmdline().contains(t.as_str()),
        }
    }
}

/// Splits a file's boots into groups, in order of each group's first boot.
pub fn groups(boots: &[BootRecord]) -> Vec<FileGroup> {
    let mut out: Vec<FileGroup> = Vec::new();
    for b in boots {
        match out.iter_mut().find(|g| g.boots.first().is_some_and(|f| f.group_key() == b.group_key())) {
            Some(g) => g.boots.push(b.clone()),
            None => out.push(FileGroup { number: out.len() + 1, boots: vec![b.clone()] }),
        }
    }
    out
}

/// One line per group, for error messages and `--list`.
pub fn describe(groups: &[FileGroup]) -> String {
    groups
        .iter()
        .map(|g| {
            format!(
                "  #{} label '{}', kernel {}, sha {}, {} boot(s), cmdline '{}'",
                g.number,
                g.label(),
                g.release(),
                g.sha().get(..12).unwrap_or(g.sha()),
                g.boots.len(),
                g.cmdline()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Picks the one group `sel` names among `groups` (the file's groups).
pub fn select(sel: &Selector, groups: &[FileGroup]) -> Result<FileGroup, SelectorError> {
    let matching: Vec<&FileGroup> = match &sel.criterion {
        None => groups.iter().collect(),
        Some(c) => groups.iter().filter(|g| g.matches(c)).collect(),
    };
    let what = sel.text.rsplit_once(':').map(|(_, s)| s.to_string()).filter(|_| sel.criterion.is_some());
    match matching.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(SelectorError::NoMatch {
            file: sel.file.clone(),
            selector: what.unwrap_or_else(|| "the whole file".into()),
            groups: if groups.is_empty() { "  (no boots)".into() } else { describe(groups) },
        }),
        many => Err(SelectorError::Ambiguous {
            file: sel.file.clone(),
            selector: what.unwrap_or_else(|| "the whole file".into()),
            count: many.len(),
            groups: describe(groups),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boot(label: &str, sha: &str, cmdline: &str) -> BootRecord {
        let mut b = BootRecord { label: label.into(), cmdline: cmdline.into(), ..Default::default() };
        b.kernel.image_sha256 = sha.into();
        b
    }

    #[test]
    fn parse_forms() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("run.json");
        std::fs::write(&f, "{}").unwrap();
        let fs = f.display().to_string();
        assert_eq!(parse(&fs).unwrap().criterion, None);
        assert_eq!(parse(&format!("{fs}:#2")).unwrap().criterion, Some(Criterion::Index(2)));
        assert_eq!(parse(&format!("{fs}:fast")).unwrap().criterion, Some(Criterion::Label("fast".into())));
        assert_eq!(parse(&format!("{fs}:label=a:b")).unwrap_err(), SelectorError::NoFile(format!("{fs}:label=a:b")));
        assert_eq!(parse(&format!("{fs}:sha=ABCDEF12")).unwrap().criterion, Some(Criterion::Sha("abcdef12".into())));
        assert_eq!(
            parse(&format!("{fs}:cmdline~mitigations=off")).unwrap().criterion,
            Some(Criterion::Cmdline("mitigations=off".into()))
        );
        for bad in ["#0", "#x", "sha=abc", "sha=zzzzzz", "cmdline~", ""] {
            let e = parse(&format!("{fs}:{bad}")).unwrap_err();
            assert!(matches!(e, SelectorError::Bad { .. }), "{bad}: {e}");
        }
        assert!(matches!(parse("/nonexistent/x.json:#1"), Err(SelectorError::NoFile(_))));
        // A file whose name has a colon is still a file.
        let odd = dir.path().join("a:b.json");
        std::fs::write(&odd, "{}").unwrap();
        assert_eq!(parse(&odd.display().to_string()).unwrap().file, odd);
    }

    #[test]
    fn grouping_and_selection() {
        let boots = vec![
            boot("base", "aaaaaa11", "quiet"),
            boot("cand", "aaaaaa11", "quiet mitigations=off"),
            boot("base", "aaaaaa11", "quiet"),
            boot("cand", "aaaaaa11", "quiet mitigations=off"),
        ];
        let gs = groups(&boots);
        assert_eq!(gs.len(), 2);
        assert_eq!(gs[0].boots.len(), 2);
        let sel = |c: Option<Criterion>| Selector { text: "f.json:x".into(), file: "f.json".into(), criterion: c };
        assert_eq!(select(&sel(Some(Criterion::Index(2))), &gs).unwrap().label(), "cand");
        assert_eq!(select(&sel(Some(Criterion::Label("base".into()))), &gs).unwrap().number, 1);
        assert_eq!(select(&sel(Some(Criterion::Cmdline("mitigations".into()))), &gs).unwrap().number, 2);
        let e = select(&sel(Some(Criterion::Sha("aaaaaa".into()))), &gs).unwrap_err();
        assert!(matches!(e, SelectorError::Ambiguous { count: 2, .. }));
        let msg = e.to_string();
        assert!(msg.contains("#1 label 'base'") && msg.contains("#2 label 'cand'"), "{msg}");
        let whole = Selector { text: "f.json".into(), file: "f.json".into(), criterion: None };
        assert!(select(&whole, &gs).unwrap_err().to_string().contains("the whole file"));
        let e = select(&sel(Some(Criterion::Label("nope".into()))), &gs).unwrap_err();
        assert!(matches!(e, SelectorError::NoMatch { .. }) && e.to_string().contains("#2"), "{e}");
    }
}
