//! Loadfile paths: SMB absolute paths normalised to `/`-separated paths
//! relative to the replay directory, refusing any that climb out of it, and
//! rendered per client. Owns path containment; it must not depend on the
//! operations or the text format that carry the paths.

use std::fmt;

/// The path component that stands for "this client" in a loadfile.
pub const CLIENT_PLACEHOLDER: &str = "client1";

/// Why a path was refused (turned into a [`super::LoadfileError`] with its
/// line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathProblem {
    /// Not an absolute SMB path (must start with `\`).
    NotAbsolute,
    /// A `..` climbs above the client's directory.
    Escape,
    /// The path names the replay directory itself.
    Root,
    /// A NUL byte, which no file name may hold.
    Nul,
}

/// A loadfile path, normalised: relative to the replay directory,
/// components separated by `/`, no `.`, `..` or empty components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbPath(Box<str>);

impl SmbPath {
    /// Normalises an SMB absolute path such as `\clients\client1\a\..\b`.
    pub fn parse(raw: &str) -> Result<SmbPath, PathProblem> {
        if raw.contains('\0') {
            return Err(PathProblem::Nul);
        }
        if !raw.starts_with(['\\', '/']) {
            return Err(PathProblem::NotAbsolute);
        }
        // Built in one string: a loadfile has hundreds of thousands of paths.
        let mut out = String::with_capacity(raw.len());
        for comp in raw.split(['\\', '/']) {
            match comp {
                "" | "." => {}
                ".." => {
                    if out.is_empty() {
                        return Err(PathProblem::Escape);
                    }
                    out.truncate(out.rfind('/').unwrap_or(0));
                }
                c => {
                    if !out.is_empty() {
                        out.push('/');
                    }
                    out.push_str(c);
                }
            }
        }
        if out.is_empty() {
            return Err(PathProblem::Root);
        }
        Ok(SmbPath(out.into()))
    }

    /// The normalised relative path, `/`-separated, with the placeholder
    /// component unreplaced.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Appends the path for the client named `client` (e.g. `client3`) to
    /// `out`: every component equal to [`CLIENT_PLACEHOLDER`] (ignoring
    /// ASCII case) becomes `client`.
    pub fn render(&self, client: &str, out: &mut Vec<u8>) {
        for (i, comp) in self.0.split('/').enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            if comp.eq_ignore_ascii_case(CLIENT_PLACEHOLDER) {
                out.extend_from_slice(client.as_bytes());
            } else {
                out.extend_from_slice(comp.as_bytes());
            }
        }
    }

    /// Length in bytes of what [`SmbPath::render`] appends for `client`.
    pub fn rendered_len(&self, client: &str) -> usize {
        self.0
            .split('/')
            .map(|c| if c.eq_ignore_ascii_case(CLIENT_PLACEHOLDER) { client.len() } else { c.len() })
            .sum::<usize>()
            + self.0.matches('/').count()
    }

    /// The last component.
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }
}

impl fmt::Display for SmbPath {
    /// Shows the path as the loadfile spells it, `\a\b`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for comp in self.0.split('/') {
            write!(f, "\\{comp}")?;
        }
        Ok(())
    }
}
