//! The file-descriptor limit a workload needs: raises this process's soft
//! `RLIMIT_NOFILE` up to its hard limit when a workload will hold more
//! descriptors than the soft limit allows (hackbench's thread mode, dbench's
//! driver with hundreds of clients), and says how many are needed when even
//! the hard limit is too low.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Errors of raising the descriptor limit.
#[derive(Debug, thiserror::Error)]
pub enum FdLimitError {
    /// getrlimit or setrlimit failed.
    #[error("{what}(RLIMIT_NOFILE) failed")]
    Call {
        /// The call.
        what: &'static str,
        /// errno.
        #[source]
        source: nix::Error,
    },
    /// Even the hard limit is below what is needed.
    #[error("{need} file descriptors are needed but RLIMIT_NOFILE's hard limit is {limit}")]
    TooLow {
        /// Descriptors needed.
        need: u64,
        /// The hard limit.
        limit: u64,
    },
}

/// Makes sure this process may hold `need` descriptors, raising the soft
/// limit (never the hard one) if needed.
pub fn ensure(need: u64) -> Result<(), FdLimitError> {
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|source| FdLimitError::Call { what: "getrlimit", source })?;
    // rlim_t is 32 bits wide on i686: compare in u64, set in rlim_t.
    #[allow(clippy::useless_conversion)]
    let (soft, hard) = (u64::from(soft), u64::from(hard));
    if need <= soft {
        return Ok(());
    }
    let raise = match libc::rlim_t::try_from(need) {
        Ok(n) if need <= hard => n,
        _ => return Err(FdLimitError::TooLow { need, limit: hard }),
    };
    let hard = libc::rlim_t::try_from(hard).unwrap_or(libc::rlim_t::MAX);
    setrlimit(Resource::RLIMIT_NOFILE, raise, hard).map_err(|source| FdLimitError::Call { what: "setrlimit", source })
}
