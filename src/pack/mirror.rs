//! Which Debian mirror a pack is built from: the URI that the machine's own
//! apt sources use for the pack's suite (deb822 `.sources` files and
//! one-line `.list` files), as `scripts/setup` derives its private apt
//! configuration. The repository names no mirror; `$BOOTBENCH_PACK_MIRROR`
//! overrides the derivation (for example with a snapshot archive). It reads
//! the sources; it never changes them.

pub use crate::apt_sources::{parse_one_line, DebSource};
use std::path::{Path, PathBuf};

/// Environment variable that names the mirror URI instead.
pub const MIRROR_ENV: &str = "BOOTBENCH_PACK_MIRROR";

/// The machine's apt sources directory.
pub const APT_ETC: &str = "/etc/apt";

/// No mirror could be derived.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    /// A sources file could not be read.
    #[error("cannot read the apt sources {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No `deb` source of the suite.
    #[error(
        "no `deb` source for suite {suite} in {dir}/sources.list or {dir}/sources.list.d; \
         cannot derive the Debian mirror (set {MIRROR_ENV} to its URI)"
    )]
    NoSource {
        /// The suite looked for.
        suite: String,
        /// The apt directory read.
        dir: PathBuf,
    },
}

/// The mirror for `suite`: `$BOOTBENCH_PACK_MIRROR` when set, else the first
/// URI the machine's apt sources under `apt_etc` use for it.
pub fn mirror_for(suite: &str, apt_etc: &Path) -> Result<String, MirrorError> {
    if let Some(uri) = std::env::var_os(MIRROR_ENV).filter(|v| !v.is_empty()) {
        return Ok(uri.to_string_lossy().into_owned());
    }
    let sources = machine_sources(apt_etc)?;
    pick(&sources, suite).ok_or_else(|| MirrorError::NoSource { suite: suite.to_string(), dir: apt_etc.to_path_buf() })
}

/// The first source of `suite` among `sources`.
pub fn pick(sources: &[DebSource], suite: &str) -> Option<String> {
    sources.iter().find(|s| s.suite == suite).map(|s| s.uri.trim_end_matches('/').to_string())
}

/// Every `deb` source under `apt_etc`: the `.sources` files of
/// `sources.list.d` (sorted), then `sources.list` and the `.list` files.
pub fn machine_sources(apt_etc: &Path) -> Result<Vec<DebSource>, MirrorError> {
    let parts = apt_etc.join("sources.list.d");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&parts) {
        Ok(entries) => entries.filter_map(|e| Some(e.ok()?.path())).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => return Err(MirrorError::Read { path: parts, source }),
    };
    files.sort();
    let has_ext = |p: &Path, ext: &str| p.extension().is_some_and(|e| e == ext);
    let mut out = Vec::new();
    for path in files.iter().filter(|p| has_ext(p, "sources")) {
        out.extend(parse_deb822(&read(path)?));
    }
    let main = apt_etc.join("sources.list");
    if main.is_file() {
        out.extend(parse_one_line(&read(&main)?));
    }
    for path in files.iter().filter(|p| has_ext(p, "list")) {
        out.extend(parse_one_line(&read(path)?));
    }
    Ok(out)
}

fn read(path: &Path) -> Result<String, MirrorError> {
    std::fs::read_to_string(path).map_err(|source| MirrorError::Read { path: path.to_path_buf(), source })
}

/// The `deb` sources of deb822 text (`Types`, `URIs`, `Suites`; a stanza
/// with `Enabled: no` is skipped).
pub fn parse_deb822(text: &str) -> Vec<DebSource> {
    let mut out = Vec::new();
    let mut stanza: Vec<(String, String)> = Vec::new();
    let mut flush = |stanza: &mut Vec<(String, String)>| {
        let get = |name: &str| {
            stanza.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).unwrap_or("")
        };
        let is_deb = get("Types").split_whitespace().any(|t| t == "deb");
        let enabled = !get("Enabled").trim().eq_ignore_ascii_case("no");
        if is_deb && enabled {
            for uri in get("URIs").split_whitespace() {
                for suite in get("Suites").split_whitespace() {
                    out.push(DebSource { uri: uri.to_string(), suite: suite.to_string() });
                }
            }
        }
        stanza.clear();
    };
    for line in text.lines() {
        if line.trim().is_empty() {
            flush(&mut stanza);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, value)) = stanza.last_mut() {
                value.push(' ');
                value.push_str(line.trim());
            }
        } else if let Some((key, value)) = line.split_once(':') {
            stanza.push((key.trim().to_string(), value.trim().to_string()));
        }
    }
    flush(&mut stanza);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deb822_stanzas_give_each_uri_and_suite() {
        let text =
            "Types: deb deb-src\n# a comment\nURIs: http://one.invalid/debian\nSuites: bookworm bookworm-updates\n\
                    Components: main\nSigned-By: /usr/share/keyrings/k.gpg\n\n\
                    Types: deb-src\nURIs: http://src.invalid/debian\nSuites: trixie\n\n\
                    Types: deb\nEnabled: no\nURIs: http://off.invalid/debian\nSuites: bookworm\n\n\
                    Types: deb\nURIs: http://sec.invalid/debian-security\nSuites: bookworm-security\n";
        let sources = parse_deb822(text);
        assert_eq!(
            sources,
            [
                DebSource { uri: "http://one.invalid/debian".into(), suite: "bookworm".into() },
                DebSource { uri: "http://one.invalid/debian".into(), suite: "bookworm-updates".into() },
                DebSource { uri: "http://sec.invalid/debian-security".into(), suite: "bookworm-security".into() },
            ]
        );
        assert_eq!(pick(&sources, "bookworm").as_deref(), Some("http://one.invalid/debian"));
        assert_eq!(pick(&sources, "bullseye"), None);
    }

    #[test]
    fn one_line_sources_skip_options_and_other_types() {
        let text = "# deb http://commented.invalid/debian bookworm main\n\
                    deb-src http://src.invalid/debian bookworm main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://opt.invalid/debian/ bookworm main contrib\n\
                    deb http://plain.invalid/debian bookworm-backports main\n";
        let sources = parse_one_line(text);
        assert_eq!(
            sources,
            [
                DebSource { uri: "http://opt.invalid/debian/".into(), suite: "bookworm".into() },
                DebSource { uri: "http://plain.invalid/debian".into(), suite: "bookworm-backports".into() },
            ]
        );
        assert_eq!(pick(&sources, "bookworm").as_deref(), Some("http://opt.invalid/debian"));
    }

    #[test]
    fn machine_sources_read_deb822_before_one_line_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sources.list.d")).unwrap();
        std::fs::write(dir.path().join("sources.list"), "deb http://list.invalid/debian bookworm main\n").unwrap();
        std::fs::write(
            dir.path().join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://deb822.invalid/debian\nSuites: bookworm\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("sources.list.d/x.list.disabled"), "deb http://no.invalid/d bookworm main\n")
            .unwrap();
        let sources = machine_sources(dir.path()).unwrap();
        assert_eq!(sources.len(), 2);
        assert_eq!(pick(&sources, "bookworm").as_deref(), Some("http://deb822.invalid/debian"));
        let err = pick(&sources, "trixie");
        assert_eq!(err, None);
    }
}
