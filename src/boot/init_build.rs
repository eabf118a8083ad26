//! Builds the static guest init for an arch with cargo, and checks that the
//! result really is static. Cargo's own fingerprints make a second build a
//! no-op until the source changes.
//!
//! x86_64 builds with the rustup toolchain on PATH. The other arches use
//! Debian's rustc-web toolchain with `-Zbuild-std`, because rustup here has
//! only the host target and cannot download more.

use object::read::elf::ProgramHeader;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors while building the init.
#[derive(Debug, thiserror::Error)]
pub enum InitBuildError {
    /// A tool the cross build needs is not installed.
    #[error("cannot build the init for {triple}: {tool} not found; install the Debian packages: {packages} (scripts/setup installs them)")]
    MissingTool {
        /// Target triple.
        triple: String,
        /// The missing file.
        tool: String,
        /// Packages that provide it.
        packages: String,
    },
    /// cargo could not be started.
    #[error("cannot run {cargo}")]
    Spawn {
        /// The cargo binary.
        cargo: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// cargo failed.
    #[error("building {package} for {triple} failed (cargo exit {status}):\n{stderr_tail}")]
    Cargo {
        /// The package.
        package: String,
        /// Target triple(s), comma-separated.
        triple: String,
        /// Exit status.
        status: String,
        /// Last lines cargo printed.
        stderr_tail: String,
    },
    /// The binary is not where cargo puts it, or unreadable.
    #[error("cannot read the built init {path}")]
    Read {
        /// Expected binary.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The binary is dynamically linked and would not run as /init.
    #[error("the built init {path} is not static (it has an ELF interpreter)")]
    NotStatic {
        /// The binary.
        path: PathBuf,
    },
    /// The binary is not an ELF file cargo should have produced.
    #[error("the built init {path} is not a valid ELF executable")]
    NotElf {
        /// The binary.
        path: PathBuf,
        /// Parser error.
        #[source]
        source: object::Error,
    },
}

/// The source tree the init is built from: `$BOOTBENCH_SOURCE_DIR`, else the
/// workspace this binary was compiled in.
pub fn source_dir() -> PathBuf {
    std::env::var_os("BOOTBENCH_SOURCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

struct Cross {
    /// The cross gcc: the linker, and the C compiler of crates with C code
    /// (cc-rs would look for the unversioned name, which Debian does not ship).
    linker: &'static str,
    /// The cross archiver for those crates.
    ar: &'static str,
    packages: &'static str,
}

fn cross_for(triple: &str) -> Option<Cross> {
    match triple {
        "i686-unknown-linux-gnu" => Some(Cross {
            linker: "i686-linux-gnu-gcc-12",
            ar: "i686-linux-gnu-ar",
            packages: "gcc-12-i686-linux-gnu libc6-dev-i386-cross",
        }),
        "powerpc64le-unknown-linux-gnu" => Some(Cross {
            linker: "powerpc64le-linux-gnu-gcc-12",
            ar: "powerpc64le-linux-gnu-ar",
            packages: "gcc-12-powerpc64le-linux-gnu libc6-dev-ppc64el-cross",
        }),
        "powerpc64-unknown-linux-gnu" => Some(Cross {
            linker: "powerpc64-linux-gnu-gcc-12",
            ar: "powerpc64-linux-gnu-ar",
            packages: "gcc-12-powerpc64-linux-gnu libc6-dev-ppc64-cross",
        }),
        _ => None,
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

/// The release profile the inits are built with, on top of the workspace's
/// (`panic = "abort"`, `strip = "symbols"`), as cargo's profile
/// environment overrides so that only these builds (in their own target
/// directory) get them. The image's size is what the kernel unpacks before
/// /init runs; measured with `bootbench overhead` (x86_64, Debian 6.1,
/// icount, 1 vCPU, zstd image): fat LTO with one codegen unit shrinks the
/// init from 9,135,968 to 7,606,640 bytes and moves the first workload
/// 19.6 ms of guest time earlier (ratio to a trivial init 1.082 to 1.072),
/// for about 50 s more per incremental rebuild of the init. `opt-level`
/// stays 3: the init runs the workloads, whose own code must not get slower.
pub const INIT_PROFILE_ENV: &[(&str, &str)] =
    &[("CARGO_PROFILE_RELEASE_LTO", "fat"), ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1")];

/// The appliance's init: the package and its binary.
pub const INIT_PACKAGE: &str = "bootbench-init";
/// The trivial init `bootbench overhead` measures the appliance against
/// (`trivial-init/`): the package and its binary.
pub const TRIVIAL_INIT_PACKAGE: &str = "bootbench-trivial-init";

/// Builds the init for `triple` and returns the path of the static binary.
pub fn build(triple: &str) -> Result<PathBuf, InitBuildError> {
    build_package(INIT_PACKAGE, triple)
}

/// Builds the init for each of `triples` (the cross ones in one cargo run,
/// so that their crates and fat-LTO links share the cores instead of
/// queueing behind each other) and returns the static binaries, in order.
/// A later [`build`] of one of them is cargo's no-op.
pub fn build_all(triples: &[&str]) -> Result<Vec<PathBuf>, InitBuildError> {
    let (cross, native): (Vec<&str>, Vec<&str>) = triples.iter().partition(|t| cross_for(t).is_some());
    for group in [cross, native] {
        if !group.is_empty() {
            build_packages(INIT_PACKAGE, &group)?;
        }
    }
    triples.iter().map(|t| built_binary(INIT_PACKAGE, t)).collect()
}

/// Builds the trivial init for `triple` the same way as the init, and
/// returns the path of the static binary.
pub fn build_trivial(triple: &str) -> Result<PathBuf, InitBuildError> {
    build_package(TRIVIAL_INIT_PACKAGE, triple)
}

/// Builds `package` (whose binary has the same name) static for `triple`.
fn build_package(package: &str, triple: &str) -> Result<PathBuf, InitBuildError> {
    build_packages(package, &[triple])?;
    built_binary(package, triple)
}

/// The static binary a build of `package` for `triple` left, checked.
fn built_binary(package: &str, triple: &str) -> Result<PathBuf, InitBuildError> {
    let bin = target_dir().join(triple).join("release").join(package);
    check_static(&bin)?;
    Ok(bin)
}

/// Where the inits are built.
fn target_dir() -> PathBuf {
    source_dir().join("target").join("init")
}

/// Builds `package` static for `triples` in one cargo run: all of them
/// cross targets (Debian's toolchain) or none.
fn build_packages(package: &str, triples: &[&str]) -> Result<(), InitBuildError> {
    let src = source_dir();
    let named = triples.join(",");
    let mut cmd;
    let cargo;
    let crosses: Vec<(&str, Cross)> = triples.iter().filter_map(|t| cross_for(t).map(|c| (*t, c))).collect();
    if !crosses.is_empty() {
        for (tool, packages) in [
            ("/usr/bin/rustc", "rustc-web cargo-web rust-web-src"),
            ("/usr/bin/cargo", "rustc-web cargo-web rust-web-src"),
            ("/usr/lib/rustlib/src/rust/library/Cargo.lock", "rust-web-src"),
        ] {
            if !Path::new(tool).exists() {
                return Err(InitBuildError::MissingTool {
                    triple: named.clone(),
                    tool: tool.into(),
                    packages: packages.into(),
                });
            }
        }
        cargo = "/usr/bin/cargo".to_string();
        cmd = Command::new(&cargo);
        cmd.env("RUSTC", "/usr/bin/rustc").env("RUSTC_BOOTSTRAP", "1");
        for (triple, cross) in &crosses {
            for tool in [cross.linker, cross.ar] {
                if !on_path(tool) {
                    return Err(InitBuildError::MissingTool {
                        triple: triple.to_string(),
                        tool: tool.into(),
                        packages: cross.packages.into(),
                    });
                }
            }
            let env_triple = triple.to_uppercase().replace('-', "_");
            let cc_triple = triple.replace('-', "_");
            cmd.env(format!("CARGO_TARGET_{env_triple}_LINKER"), cross.linker)
                .env(format!("CC_{cc_triple}"), cross.linker)
                .env(format!("AR_{cc_triple}"), cross.ar);
        }
        cmd.args(["build", "-Zbuild-std=std,panic_abort"]);
    } else {
        cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        cmd = Command::new(&cargo);
        cmd.arg("build");
    }
    cmd.envs(INIT_PROFILE_ENV.iter().copied());
    for triple in triples {
        let env_triple = triple.to_uppercase().replace('-', "_");
        cmd.env(format!("CARGO_TARGET_{env_triple}_RUSTFLAGS"), "-C target-feature=+crt-static");
        cmd.args(["--target", triple]);
    }
    cmd.args(["-q", "-p", package, "--release", "--target-dir"]).arg(target_dir()).current_dir(&src);
    let out = cmd.output().map_err(|source| InitBuildError::Spawn { cargo: cargo.clone(), source })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        return Err(InitBuildError::Cargo {
            package: package.into(),
            triple: named,
            status: out.status.to_string(),
            stderr_tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
        });
    }
    Ok(())
}

/// Fails unless `path` is an ELF executable without an interpreter.
pub fn check_static(path: &Path) -> Result<(), InitBuildError> {
    let data = std::fs::read(path).map_err(|source| InitBuildError::Read { path: path.into(), source })?;
    let file = object::File::parse(&*data).map_err(|source| InitBuildError::NotElf { path: path.into(), source })?;
    // PT_INTERP is the only segment that names a file; its presence means dynamic.
    let has_interp = match &file {
        object::File::Elf64(elf) => {
            elf.elf_program_headers().iter().any(|ph| ph.p_type(elf.endian()) == object::elf::PT_INTERP)
        }
        object::File::Elf32(elf) => {
            elf.elf_program_headers().iter().any(|ph| ph.p_type(elf.endian()) == object::elf::PT_INTERP)
        }
        _ => false,
    };
    if has_interp {
        return Err(InitBuildError::NotStatic { path: path.into() });
    }
    Ok(())
}
