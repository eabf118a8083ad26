//! Loadfile paths: SMB absolute paths normalised to `/`-separated paths
//! relative to the replay directory, rendered per client, and the rule
//! that keeps each client in its own directory. Owns path containment; it
//! must not depend on the operations or the text format that carry the
//! paths.
//!
//! Containment is decided by the shape of the normalised path, before any
//! call: a replay adds no system call to stay inside (no
//! `openat2(RESOLVE_BENEATH)`, no component-by-component walk), so the
//! kernel does the same work as for dbench. The rule:
//! 1. Components are split on `\` and `/`; empty ones and `.` are dropped
//!    and `..` removes the component before it. A `..` with nothing left
//!    to remove would leave the replay directory, and a `..` that would
//!    remove a [`CLIENT_PLACEHOLDER`] component would leave the client's
//!    directory: both are refused ([`PathProblem::AboveRoot`],
//!    [`PathProblem::LeavesClient`]), even when a later component goes
//!    back in.
//! 2. Each client's directory is `clients/client<id>` in the replay
//!    directory, and `client1` (any case) in the loadfile stands for it.
//!    The component after a first component `clients` (any case) must be
//!    the placeholder or must not look like a client's name (`client`
//!    and digits, any case), so no client can name another's directory
//!    ([`PathProblem::OtherClient`]): not literally, not by case (the
//!    replay finds names case-insensitively, as SMB does).
//! 3. A path is inside the client's directory when it starts with
//!    `clients` (exactly) and the placeholder ([`SmbPath::in_client_dir`]);
//!    the directory itself counts. Outside it (in `clients`, which all
//!    clients share, or anywhere else in the replay directory) a line may
//!    only look (QUERY_PATH_INFORMATION, FIND_FIRST), make a directory
//!    (Mkdir) or open a directory without creating or replacing it
//!    (NTCreateX with FILE_DIRECTORY_FILE and disposition FILE_OPEN or
//!    FILE_OPEN_IF). Every other use of such a path (Unlink, Rmdir,
//!    Deltree, Rename from or to it, any other NTCreateX) is refused when
//!    the loadfile is read, naming the line (`Op::outside_client_dir`
//!    applies this to operations). One change outside stays possible: a
//!    SET_FILE_INFORMATION on a handle of such an opened directory sets
//!    that directory's times (handles are not followed at parse time).
//!    Debian's client.txt names nothing outside its client's directory
//!    but `Mkdir "\clients"`.
//!
//! What shapes cannot do, the replayer does: it never follows a symbolic
//! link in the last component and refuses one met in a lookup, and each
//! client's directory is removed (without following links) before the
//! client starts, so a link planted beforehand is gone. A link planted
//! into the tree *while* it runs, in an intermediate directory, would be
//! followed; the replay creates no links itself.

use std::fmt;

/// The path component that stands for "this client" in a loadfile.
pub const CLIENT_PLACEHOLDER: &str = "client1";

/// The directory, in the replay directory, that holds every client's own
/// directory.
pub const CLIENTS_DIR: &str = "clients";

/// Why a path was refused (turned into a [`super::LoadfileError`] with its
/// line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathProblem {
    /// Not an absolute SMB path (must start with `\`).
    NotAbsolute,
    /// A `..` climbs above the replay directory.
    AboveRoot,
    /// A `..` climbs out of the client's directory (removes the
    /// placeholder component).
    LeavesClient,
    /// The path names another client's directory.
    OtherClient,
    /// The path names the replay directory itself.
    Root,
    /// A NUL byte, which no file name may hold.
    Nul,
}

impl PathProblem {
    /// What is wrong, to follow the path in a message.
    pub fn why(self) -> &'static str {
        match self {
            PathProblem::NotAbsolute => "is not an absolute SMB path (must start with \\)",
            PathProblem::AboveRoot => "climbs above the replay directory",
            PathProblem::LeavesClient => "climbs out of the client's directory (a '..' after \\clients\\client1)",
            PathProblem::OtherClient => {
                "names another client's directory (only \\clients\\client1, the client's own, may be named)"
            }
            PathProblem::Root => "names the replay directory itself",
            PathProblem::Nul => "holds a NUL byte",
        }
    }
}

/// A loadfile path, normalised: relative to the replay directory,
/// components separated by `/`, no `.`, `..` or empty components, and
/// within the containment rule of this module's doc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmbPath(Box<str>);

fn is_placeholder(component: &str) -> bool {
    component.eq_ignore_ascii_case(CLIENT_PLACEHOLDER)
}

/// `client` followed by one or more digits, in any case: a name some
/// client's directory could have.
fn looks_like_a_client(component: &str) -> bool {
    let b = component.as_bytes();
    b.len() > 6
        && b.get(..6).is_some_and(|p| p.eq_ignore_ascii_case(b"client"))
        && b.get(6..).is_some_and(|d| d.iter().all(u8::is_ascii_digit))
}

impl SmbPath {
    /// Normalises an SMB absolute path such as `\clients\client1\a\..\b`,
    /// refusing what the containment rule refuses.
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
                        return Err(PathProblem::AboveRoot);
                    }
                    let parent = out.rfind('/');
                    let last = out.get(parent.map_or(0, |i| i + 1)..).unwrap_or_default();
                    if is_placeholder(last) {
                        return Err(PathProblem::LeavesClient);
                    }
                    out.truncate(parent.unwrap_or(0));
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
        let mut comps = out.split('/');
        if let (Some(first), Some(second)) = (comps.next(), comps.next()) {
            if first.eq_ignore_ascii_case(CLIENTS_DIR) && !is_placeholder(second) && looks_like_a_client(second) {
                return Err(PathProblem::OtherClient);
            }
        }
        Ok(SmbPath(out.into()))
    }

    /// The normalised relative path, `/`-separated, with the placeholder
    /// component unreplaced.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the path is the client's directory (`clients/client1`) or
    /// inside it.
    pub fn in_client_dir(&self) -> bool {
        let mut comps = self.0.split('/');
        comps.next() == Some(CLIENTS_DIR) && comps.next().is_some_and(is_placeholder)
    }

    /// Appends the path for the client named `client` (e.g. `client3`) to
    /// `out`: every component equal to [`CLIENT_PLACEHOLDER`] (ignoring
    /// ASCII case) becomes `client`.
    pub fn render(&self, client: &str, out: &mut Vec<u8>) {
        for (i, comp) in self.0.split('/').enumerate() {
            if i > 0 {
                out.push(b'/');
            }
            if is_placeholder(comp) {
                out.extend_from_slice(client.as_bytes());
            } else {
                out.extend_from_slice(comp.as_bytes());
            }
        }
    }

    /// Length in bytes of what [`SmbPath::render`] appends for `client`.
    pub fn rendered_len(&self, client: &str) -> usize {
        self.0.split('/').map(|c| if is_placeholder(c) { client.len() } else { c.len() }).sum::<usize>()
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
