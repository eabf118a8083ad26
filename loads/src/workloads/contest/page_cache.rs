//! Dropping the page cache between contest's rows, so every row but
//! cacherun starts cold (contest did `sync` and dropped caches between its
//! runs). Owns the /proc/sys/vm/drop_caches write; must not decide when.

/// The kernel's cache-dropping knob.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Errors of dropping the caches.
#[derive(Debug, thiserror::Error)]
pub enum PageCacheError {
    /// The knob could not be written (not root, or no /proc).
    #[error("cannot write 3 to {DROP_CACHES} (root is needed)")]
    Write(#[source] std::io::Error),
}

/// Writes dirty data back, then drops the page cache, dentries and inodes.
pub fn drop_caches() -> Result<(), PageCacheError> {
    nix::unistd::sync();
    std::fs::write(DROP_CACHES, "3").map_err(PageCacheError::Write)
}
