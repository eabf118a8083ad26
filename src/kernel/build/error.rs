//! The error of a kernel build and of looking up a built kernel. Both the
//! build (`build`) and the installed entries (`build::installed`) report
//! through it, so it names nothing else in `build`.

use qemu::Arch;
use std::path::PathBuf;

/// Errors while building or looking up a built kernel.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The tree is not a kernel source tree.
    #[error("{tree} is not a kernel source tree (no {missing})")]
    NotKernelTree {
        /// The tree given.
        tree: PathBuf,
        /// The file that is missing.
        missing: &'static str,
    },
    /// A build tool is not installed.
    #[error("building a {arch} kernel needs {tool}, which is not on PATH; install the Debian package {package} (scripts/setup does)")]
    MissingTool {
        /// The arch being built.
        arch: Arch,
        /// The missing program.
        tool: String,
        /// The package that provides it.
        package: &'static str,
    },
    /// A file system operation failed.
    #[error("cannot {action} {path}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A build step could not be started.
    #[error("cannot run `{command}`")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A build step failed.
    #[error("`{command}` failed ({status}) in {dir}{detail}")]
    Step {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// Where it ran.
        dir: PathBuf,
        /// Its output's tail, or where the output went.
        detail: String,
    },
    /// Options the appliance needs did not survive `make olddefconfig`
    /// (a dependency of theirs is off in this tree or arch).
    #[error("after `make olddefconfig` in {build_dir}, these options are not as the appliance needs: {options}")]
    ConfigDidNotStick {
        /// The build directory with the final `.config`.
        build_dir: PathBuf,
        /// `CONFIG_X=VALUE (wanted y)`, comma-separated.
        options: String,
    },
    /// The final config could not be parsed.
    #[error("the config written by the build is unusable")]
    Config(#[source] crate::kernel::check::CheckError),
    /// The built image is not a kernel for the arch.
    #[error("the built image {path} is not a {arch} kernel")]
    Image {
        /// The image.
        path: PathBuf,
        /// The arch built for.
        arch: Arch,
        /// Why.
        #[source]
        source: qemu::kernel_image::KernelImageError,
    },
    /// An installed build that cannot be used as it is.
    #[error("built kernel {path} is unusable ({why}); build it again or delete it")]
    Corrupt {
        /// The entry or its metadata file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}
