//! The packs bootbench can build: each guest arch's Debian suite and
//! architecture, the packages asked for and where the lockfile lives, and
//! the version of the recipe that turns a lockfile into an image. Data
//! only.

/// The version of the recipe that turns a lockfile into an image. Bump it
/// when the image's bytes change for the same lockfile (mmdebstrap options,
/// removed files, mke2fs settings): it is part of the cache key.
pub const BUILDER_VERSION: u32 = 1;

/// A pack's target: the guest arch and what Debian calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackTarget {
    /// The guest arch as bootbench names it.
    pub arch: &'static str,
    /// Debian's architecture.
    pub debian_arch: &'static str,
    /// The Debian suite.
    pub suite: &'static str,
    /// The packages asked for; their dependency closure is installed.
    pub packages: &'static [&'static str],
    /// The lockfile, relative to the repository.
    pub lockfile: &'static str,
}

/// What a kernel build needs: the compiler (the unversioned `gcc` and `cpp`
/// give `/usr/bin/gcc` and the `cc` alternative), binutils and the C
/// library's headers, make and the shells, the text tools of the kernel's
/// Makefiles and scripts, and the host libraries of its tools (objtool,
/// sign-file, kconfig's lexer and parser); and the Linux source the guest's
/// kernel build compiles.
pub const BUILD_PACKAGES: &[&str] = &[
    "gcc",
    "cpp",
    "gcc-12",
    "binutils",
    "libc6-dev",
    "make",
    "dash",
    "bash",
    "coreutils",
    "sed",
    "grep",
    "mawk",
    "findutils",
    "tar",
    "gzip",
    "xz-utils",
    "diffutils",
    "bc",
    "flex",
    "bison",
    "libelf-dev",
    "libssl-dev",
    "kmod",
    "cpio",
    "linux-source-6.1",
];

/// The packs bootbench knows how to build.
pub const TARGETS: &[PackTarget] = &[PackTarget {
    arch: "x86_64",
    debian_arch: "amd64",
    suite: "bookworm",
    packages: BUILD_PACKAGES,
    lockfile: "packs/x86_64.lock",
}];

/// The target of guest arch `arch`, if there is a pack for it.
pub fn target(arch: &str) -> Option<&'static PackTarget> {
    TARGETS.iter().find(|t| t.arch == arch)
}
