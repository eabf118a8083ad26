//! Bearer tokens of the results service: what a usable secret is, reading
//! one from a private file, its digest (all the store keeps of it), a
//! fresh random one, a token's name and scope, and finding which known
//! token a request carries without the time taken telling which one, or
//! how long it is. No SQL here (the table is `store`'s) and no HTTP (that
//! is `receiver`'s).

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The fewest characters a token may have.
pub const MIN_TOKEN_LEN: usize = 16;
/// The most characters a token's name may have.
pub const MAX_NAME_LEN: usize = 64;
/// Names that tokens given at start take (`serve --token`: `cli`;
/// `run --serve`'s own: `run`), so the store's tokens cannot.
pub const RESERVED_NAMES: &[&str] = &["cli", "run"];

/// The sha256 of a token: what the store keeps, and what a request's token
/// is compared by.
pub type TokenDigest = [u8; 32];

/// Errors about a token, its file or its name.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// A token that cannot work.
    #[error("bad token {from}: {why}")]
    Bad {
        /// Where it came from: "given on the command line" or "in FILE".
        from: String,
        /// What is wrong.
        why: String,
    },
    /// The token file cannot be read.
    #[error("cannot read the token file {path}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The token file is open to other users.
    #[error(
        "the token file {path} can be read or changed by group or others (mode {mode:03o}): make it private with `chmod 600 {path}`"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// A name the store cannot take.
    #[error("bad token name '{name}': {why}")]
    Name {
        /// The name.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scope {
    /// `PUT /runs/{id}`.
    pub upload: bool,
    /// `GET /`, `/runs`, `/runs/{id}` (when reads are not public).
    pub read: bool,
}

impl Scope {
    /// Upload only: what a lab machine needs, and the default.
    pub const UPLOAD: Scope = Scope { upload: true, read: false };

    /// As the listing shows it: `upload`, `read`, `upload,read` or `none`.
    pub fn name(self) -> &'static str {
        match (self.upload, self.read) {
            (true, true) => "upload,read",
            (true, false) => "upload",
            (false, true) => "read",
            (false, false) => "none",
        }
    }
}

/// Checks a secret from `from` ("given on the command line", "in FILE"):
/// at least [`MIN_TOKEN_LEN`] characters of printable ASCII without
/// spaces (it travels in a header and on the kernel cmdline). The message
/// never holds the secret.
pub fn check_secret(secret: &str, from: &str) -> Result<(), TokenError> {
    let bad = |why: String| Err(TokenError::Bad { from: from.to_string(), why });
    if secret.is_empty() {
        return bad("it is empty".into());
    }
    if !secret.bytes().all(|b| b.is_ascii_graphic()) {
        return bad("use printable ASCII without spaces".into());
    }
    if secret.len() < MIN_TOKEN_LEN {
        return bad(format!("it has {} characters; use at least {MIN_TOKEN_LEN}", secret.len()));
    }
    Ok(())
}

/// Reads the token in `path` (its first line, trimmed) and checks it. The
/// file must be private to its owner (no permission bits for group or
/// others): a token others can read is no secret.
pub fn read_token_file(path: &Path) -> Result<String, TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let io = |source| TokenError::File { path: path.to_path_buf(), source };
    let mode = std::fs::metadata(path).map_err(io)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Exposed { path: path.to_path_buf(), mode });
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    let secret = text.lines().next().unwrap_or_default().trim().to_string();
    check_secret(&secret, &format!("in {}", path.display()))?;
    Ok(secret)
}

/// The token's digest.
pub fn digest(secret: &str) -> TokenDigest {
    Sha256::digest(secret.as_bytes()).into()
}

/// A fresh random token: 32 hex digits (122 random bits, from the
/// system's random source).
pub fn generate() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Checks a name for a stored token: 1 to [`MAX_NAME_LEN`] ASCII letters,
/// digits, '.', '_' and '-', starting with a letter or digit, and not one
/// of [`RESERVED_NAMES`]. Names show in logs, the listing and HTML.
pub fn check_name(name: &str) -> Result<(), TokenError> {
    let bad = |why| Err(TokenError::Name { name: name.to_string(), why });
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return bad("use 1 to 64 characters");
    }
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return bad("use ASCII letters, digits, '.', '_' and '-', starting with a letter or digit");
    }
    if RESERVED_NAMES.contains(&name) {
        return bad("it is reserved for a token given at start (serve --token: cli; run --serve: run)");
    }
    Ok(())
}

/// The index of the digest in `known` that is `given`'s digest. Compares
/// digests, so the time taken does not depend on the given token's length
/// or content, and compares every one, so it does not depend on which
/// matched either.
pub fn find(given: &str, known: &[TokenDigest]) -> Option<usize> {
    let given = digest(given);
    let mut found = None;
    for (i, k) in known.iter().enumerate() {
        let same = constant_time_eq::constant_time_eq_32(&given, k);
        if same && found.is_none() {
            found = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn short_or_unprintable_secrets_are_refused_naming_where_they_came_from() {
        let e = check_secret("abc", "given on the command line").unwrap_err().to_string();
        assert!(e.contains("given on the command line") && e.contains("at least 16"), "{e}");
        assert!(!e.contains("abc"), "the message holds the secret: {e}");
        let e = check_secret("0123456789abcdef x", "in /etc/t").unwrap_err().to_string();
        assert!(e.contains("in /etc/t") && e.contains("printable ASCII"), "{e}");
        check_secret("0123456789abcdef", "x").unwrap();
    }

    #[test]
    fn a_token_file_open_to_others_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "0123456789abcdef-secret\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = read_token_file(&path).unwrap_err().to_string();
            assert!(e.contains(&path.display().to_string()), "{e}");
            assert!(e.contains(&format!("chmod 600 {}", path.display())), "{e}");
            assert!(!e.contains("secret"), "{e}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_token_file(&path).unwrap(), "0123456789abcdef-secret");
        std::fs::write(&path, "short\n").unwrap();
        let e = read_token_file(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("in {}", path.display())) && e.contains("at least 16"), "{e}");
    }

    #[test]
    fn tokens_are_found_by_digest() {
        let known = [digest("first-token-0123456"), digest("second-token-012345")];
        assert_eq!(find("second-token-012345", &known), Some(1));
        assert_eq!(find("first-token-0123456", &known), Some(0));
        assert_eq!(find("first-token-01234567", &known), None, "a longer token with the right prefix");
        assert_eq!(find("first-token-012345", &known), None, "a prefix");
        assert_eq!(find("", &known), None);
        assert_eq!(generate().len(), 32);
        assert_ne!(generate(), generate());
    }

    #[test]
    fn names_are_checked() {
        check_name("lab-1.x86_64").unwrap();
        for bad in ["", "-x", "a b", "a/b", "cli", "run", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
