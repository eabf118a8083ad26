//! The packs bootbench can build: each guest arch's Debian suite and
//! architecture, the packages asked for, the Linux source it carries
//! prepared and where the lockfile lives, and the version of the recipe
//! that turns a lockfile into an image. Data only.

/// The version of the recipe that turns a lockfile into an image. Bump it
/// when the image's bytes change for the same lockfile (mmdebstrap options,
/// removed files, mke2fs settings): it is part of the cache key.
///
/// - 1: the build userland.
/// - 2: the Linux source unpacked at /usr/src/linux (its tarball removed),
///   an output tree configured and prepared (as /bootbench/work/obj, where
///   the guest's copy of it goes) at /usr/src/linux-obj, the guest's mount
///   points made (/bootbench/work among them), directories sized from
///   their entries rather than the host's, and modification times before
///   `SOURCE_DATE_EPOCH` kept (builder 1 made every one the epoch: a later
///   access time made it clamp the file).
/// - 3: the make environment of the preparation (timestamp, user, host)
///   written to /bootbench/make.env, which the guest's builds add to theirs.
/// - 4: the pack's identity (its cache key) written to /bootbench/pack.id,
///   which the workloads that run the pack's programs put in their
///   parameters.
pub const BUILDER_VERSION: u32 = 4;

/// The Linux source a pack carries, unpacked and prepared (see
/// `pack::linux_tree`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinuxSource {
    /// The Debian package that ships the source tarball (also in the
    /// target's packages, so the lockfile pins it).
    pub package: &'static str,
    /// The tarball it installs, an absolute path in the root.
    pub tarball: &'static str,
    /// The kernel's configuration target.
    pub config: &'static str,
}

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
    /// The lockfile's text as this binary was built with it: what `pack
    /// build` and `run --pack auto` use without `--lockfile`, wherever
    /// they run.
    pub lockfile_text: &'static str,
    /// The Linux source carried prepared.
    pub linux: LinuxSource,
    /// Whether the preparation runs with the 32-bit personality, so that
    /// `uname -m` in the chroot says what the guest's says (i686, not the
    /// host's x86_64), for kbuild and every script that asks.
    pub linux32: bool,
}

/// What a kernel build needs: the compiler (the unversioned `gcc` and `cpp`
/// give `/usr/bin/gcc` and the `cc` alternative), binutils and the C
/// library's headers, make and the shells, the text tools of the kernel's
/// Makefiles and scripts, and the host libraries of its tools (objtool,
/// sign-file, kconfig's lexer and parser); and the Linux source the guest's
/// kernel build compiles, which the recipe unpacks and prepares.
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

/// The Linux source every pack carries: Debian's, configured with the
/// arch's own defconfig.
const fn linux_source(config: &'static str) -> LinuxSource {
    LinuxSource { package: "linux-source-6.1", tarball: "/usr/src/linux-source-6.1.tar.xz", config }
}

/// The packs bootbench knows how to build: one per guest arch that Debian
/// ships (big-endian ppc64 has no Debian port, so it keeps the synthetic
/// build). Each is installed from its own architecture's archive and its
/// tree prepared by its own compiler: i386's natively (x86_64 runs i386
/// programs), ppc64el's under qemu-user, which `scripts/setup` registers
/// with binfmt_misc (`bootstrap` checks the host runs them first).
pub const TARGETS: &[PackTarget] = &[
    PackTarget {
        arch: "x86_64",
        debian_arch: "amd64",
        suite: "bookworm",
        packages: BUILD_PACKAGES,
        lockfile: "packs/x86_64.lock",
        lockfile_text: include_str!("../../packs/x86_64.lock"),
        linux: linux_source("x86_64_defconfig"),
        linux32: false,
    },
    PackTarget {
        arch: "i386",
        debian_arch: "i386",
        suite: "bookworm",
        packages: BUILD_PACKAGES,
        lockfile: "packs/i386.lock",
        lockfile_text: include_str!("../../packs/i386.lock"),
        linux: linux_source("i386_defconfig"),
        linux32: true,
    },
    PackTarget {
        arch: "ppc64le",
        debian_arch: "ppc64el",
        suite: "bookworm",
        packages: BUILD_PACKAGES,
        lockfile: "packs/ppc64le.lock",
        lockfile_text: include_str!("../../packs/ppc64le.lock"),
        linux: linux_source("ppc64le_defconfig"),
        linux32: false,
    },
];

/// The guest arches that have a pack, comma-separated (for errors).
pub fn arches_text() -> String {
    TARGETS.iter().map(|t| t.arch).collect::<Vec<_>>().join(", ")
}

/// The target of guest arch `arch`, if there is a pack for it.
pub fn target(arch: &str) -> Option<&'static PackTarget> {
    TARGETS.iter().find(|t| t.arch == arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_installs_the_package_of_its_linux_source() {
        for t in TARGETS {
            assert!(t.packages.contains(&t.linux.package), "{} does not ask for {}", t.arch, t.linux.package);
            assert!(t.linux.tarball.starts_with(&format!("/usr/src/{}", t.linux.package)), "{}", t.linux.tarball);
        }
    }

    #[test]
    fn the_guest_builds_for_real_exactly_on_the_arches_with_a_pack() {
        let with_pack: Vec<&str> = TARGETS.iter().map(|t| t.arch).collect();
        assert_eq!(with_pack, loads::suite::REAL_BUILD_ARCHES, "the guest's suites and the host's packs must agree");
        // Only the 32-bit pack runs its preparation as i686.
        let linux32: Vec<&str> = TARGETS.iter().filter(|t| t.linux32).map(|t| t.arch).collect();
        assert_eq!(linux32, ["i386"]);
        assert_eq!(arches_text(), "x86_64, i386, ppc64le");
    }
}
