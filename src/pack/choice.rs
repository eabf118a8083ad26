//! Which userland pack a suite gets (`--pack auto|none|PATH`, the same for
//! `bootbench run` and `bootbench local`): whether the suite needs one,
//! where the image comes from (this module's cache, built on first use, or
//! the user's file), and what the results record of it. Knows nothing of
//! how the image is then used: `crate::boot::session` attaches it to the
//! guest as a read-only disk (and records its serial), `crate::local`
//! mounts it on the host.

use crate::results::pack::PackRecord;
use loads::suite::Suite;
use loads::workloads::needs_pack;
use std::path::{Path, PathBuf};

/// `--pack`: where the userland pack comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackChoice {
    /// bootbench's pack for the arch, when the suite needs one.
    Auto,
    /// No pack.
    None,
    /// This ext4 image.
    Image(PathBuf),
}

impl std::str::FromStr for PackChoice {
    type Err = ChoiceError;
    fn from_str(s: &str) -> Result<PackChoice, ChoiceError> {
        match s {
            "auto" => Ok(PackChoice::Auto),
            "none" => Ok(PackChoice::None),
            "" => Err(ChoiceError::Choice { given: s.to_string() }),
            path => Ok(PackChoice::Image(PathBuf::from(path))),
        }
    }
}

/// The pack a run uses: the image and what the results record (its
/// `serial` left empty: only a boot attaches it by one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenPack {
    /// The image.
    pub image: PathBuf,
    /// What the results record.
    pub record: PackRecord,
}

/// The pack could not be chosen or made.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    /// `--pack` was empty.
    #[error("--pack '{given}': expected auto, none or the path of a pack image")]
    Choice {
        /// What was given.
        given: String,
    },
    /// The suite needs a pack and `--pack none` refused it.
    #[error("--pack none, but the suite runs {} (it runs the userland pack's programs): use --pack auto or a pack image", .workloads.join(", "))]
    Refused {
        /// The workloads that need it.
        workloads: Vec<String>,
    },
    /// The suite needs a pack and the arch has none.
    #[error("the suite runs {} (it runs the userland pack's programs), but there is no pack for arch {arch} (packs exist for: {}); run kbuild instead of kernbench, sdet_applets instead of sdet, and contest with build \"synthetic\"", .workloads.join(", "), super::targets::arches_text())]
    NoPackForArch {
        /// The workloads that need it.
        workloads: Vec<String>,
        /// The arch.
        arch: String,
    },
    /// The pack could not be built or verified.
    #[error("cannot make the userland pack for {arch}")]
    Build {
        /// The arch.
        arch: String,
        /// Why.
        #[source]
        source: Box<crate::pack::BuildError>,
    },
    /// The user's image cannot be read.
    #[error("--pack {path}: cannot read the pack image")]
    Image {
        /// The image.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The suite's workloads that run inside the pack, in suite order.
pub fn workloads_needing_pack(suite: &Suite) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for w in suite.workloads.iter().filter(|w| needs_pack(w)) {
        if !names.contains(&w.name) {
            names.push(w.name.clone());
        }
    }
    names
}

/// The pack for `suite` on arch `arch` (the guest's, or this host's for
/// `bootbench local`), if any: `auto` builds (or verifies the cached)
/// bootbench pack when the suite needs one; a path is used whether or not
/// the suite needs it.
pub fn resolve(choice: &PackChoice, suite: &Suite, arch: &str) -> Result<Option<ChosenPack>, ChoiceError> {
    let needs = workloads_needing_pack(suite);
    match choice {
        PackChoice::None if needs.is_empty() => Ok(None),
        PackChoice::None => Err(ChoiceError::Refused { workloads: needs }),
        PackChoice::Auto if needs.is_empty() => Ok(None),
        PackChoice::Auto => {
            if crate::pack::target(arch).is_none() {
                return Err(ChoiceError::NoPackForArch { workloads: needs, arch: arch.to_string() });
            }
            let options = crate::pack::PackOptions { arch: arch.to_string(), lockfile: None, cache: None };
            let built = crate::pack::build(&options)
                .map_err(|e| ChoiceError::Build { arch: arch.to_string(), source: Box::new(e) })?;
            let image = built.entry.image();
            let m = &built.entry.manifest;
            let record = PackRecord {
                image: image.clone(),
                image_sha256: m.image_sha256.clone(),
                image_bytes: m.image_bytes,
                serial: String::new(),
                key: Some(m.key.clone()),
                lockfile_sha256: Some(m.lockfile_sha256.clone()),
                builder_version: Some(m.builder_version),
                linux_config: m.source.as_ref().map(|s| s.config.clone()),
                linux_config_sha256: m.source.as_ref().map(|s| s.config_sha256.clone()),
                packages: m.packages.clone(),
            };
            Ok(Some(ChosenPack { image, record }))
        }
        PackChoice::Image(path) => user_image(path).map(Some),
    }
}

/// A pack image the user named: its hash and size, and its manifest's
/// packages when it sits in a bootbench cache entry (`pack.json` beside it
/// naming it).
fn user_image(path: &Path) -> Result<ChosenPack, ChoiceError> {
    let io = |source| ChoiceError::Image { path: path.to_path_buf(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    if !meta.is_file() {
        return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")));
    }
    let image_sha256 = crate::pack::image::sha256_file(path)
        .map_err(|e| io(std::io::Error::other(loads::error_chain::error_chain(&e))))?;
    let manifest = path
        .parent()
        .map(|d| d.join(crate::pack::cache::MANIFEST_FILE))
        .and_then(|m| std::fs::read_to_string(m).ok())
        .and_then(|t| serde_json::from_str::<crate::pack::cache::Manifest>(&t).ok())
        .filter(|m| m.image_sha256 == image_sha256);
    Ok(ChosenPack {
        image: path.to_path_buf(),
        record: PackRecord {
            image: path.to_path_buf(),
            image_sha256,
            image_bytes: meta.len(),
            serial: String::new(),
            key: manifest.as_ref().map(|m| m.key.clone()),
            lockfile_sha256: manifest.as_ref().map(|m| m.lockfile_sha256.clone()),
            builder_version: manifest.as_ref().map(|m| m.builder_version),
            linux_config: manifest.as_ref().and_then(|m| m.source.as_ref()).map(|s| s.config.clone()),
            linux_config_sha256: manifest.as_ref().and_then(|m| m.source.as_ref()).map(|s| s.config_sha256.clone()),
            packages: manifest.map(|m| m.packages).unwrap_or_default(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(names: &[&str]) -> Suite {
        let list: Vec<String> = names.iter().map(|n| format!(r#"{{"name":"{n}"}}"#)).collect();
        Suite::from_json("test", &format!(r#"{{"name":"t","workloads":[{}]}}"#, list.join(","))).unwrap()
    }

    #[test]
    fn choices_parse() {
        assert_eq!("auto".parse::<PackChoice>().unwrap(), PackChoice::Auto);
        assert_eq!("none".parse::<PackChoice>().unwrap(), PackChoice::None);
        assert_eq!("/x/pack.ext4".parse::<PackChoice>().unwrap(), PackChoice::Image("/x/pack.ext4".into()));
        assert!("".parse::<PackChoice>().unwrap_err().to_string().contains("--pack"));
    }

    #[test]
    fn a_suite_without_a_pack_workload_gets_no_pack_from_auto_or_none() {
        let s = suite(&["fork", "kbuild"]);
        assert!(workloads_needing_pack(&s).is_empty());
        assert_eq!(resolve(&PackChoice::Auto, &s, "x86_64").unwrap(), None);
        assert_eq!(resolve(&PackChoice::None, &s, "i386").unwrap(), None);
    }

    #[test]
    fn a_suite_that_needs_a_pack_is_refused_without_one_naming_the_workload() {
        let s = suite(&["fork", "kernbench"]);
        assert_eq!(workloads_needing_pack(&s), ["kernbench"]);
        let e = resolve(&PackChoice::None, &s, "x86_64").unwrap_err().to_string();
        assert!(e.contains("--pack none") && e.contains("kernbench"), "{e}");
        let e = resolve(&PackChoice::Auto, &s, "ppc64").unwrap_err().to_string();
        assert!(e.contains("arch ppc64") && e.contains("kernbench") && e.contains("kbuild"), "{e}");
    }

    #[test]
    fn a_contest_needs_the_pack_only_when_its_foreground_is_the_pack_build() {
        let contest = |params: &str| {
            let json =
                format!(r#"{{"name":"t","workloads":[{{"name":"fork"}},{{"name":"contest","params":{params}}}]}}"#);
            Suite::from_json("test", &json).unwrap()
        };
        for synthetic in [contest("{}"), contest(r#"{"build":"synthetic"}"#)] {
            assert!(workloads_needing_pack(&synthetic).is_empty());
            assert_eq!(resolve(&PackChoice::None, &synthetic, "x86_64").unwrap(), None);
        }
        let pack = contest(r#"{"build":"pack","target":"quick","rows":"no_load,fork_load"}"#);
        assert_eq!(workloads_needing_pack(&pack), ["contest"]);
        let e = resolve(&PackChoice::None, &pack, "x86_64").unwrap_err().to_string();
        assert!(e.contains("--pack none") && e.contains("contest"), "{e}");
        let e = resolve(&PackChoice::Auto, &pack, "ppc64").unwrap_err().to_string();
        assert!(e.contains("arch ppc64 (packs exist for: x86_64, i386, ppc64le)") && e.contains("contest"), "{e}");
    }

    #[test]
    fn a_user_image_is_hashed_and_its_manifest_read_only_when_it_matches() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("pack.ext4");
        std::fs::write(&img, b"an image").unwrap();
        let s = suite(&["fork"]);
        let got = resolve(&PackChoice::Image(img.clone()), &s, "x86_64").unwrap().unwrap();
        let sha = crate::pack::image::sha256_file(&img).unwrap();
        assert_eq!((got.record.image_sha256.as_str(), got.record.image_bytes), (sha.as_str(), 8));
        assert!(got.record.packages.is_empty() && got.record.key.is_none());
        let manifest = |image_sha256: &str| crate::pack::cache::Manifest {
            key: "k".into(),
            builder_version: 7,
            lockfile_sha256: "l".into(),
            suite: "bookworm".into(),
            arch: "amd64".into(),
            image: "pack.ext4".into(),
            image_sha256: image_sha256.into(),
            image_bytes: 8,
            source: None,
            packages: vec!["gcc=12".into()],
        };
        let write = |m: &crate::pack::cache::Manifest| {
            std::fs::write(dir.path().join("pack.json"), serde_json::to_string(m).unwrap()).unwrap()
        };
        write(&manifest("another image's hash"));
        let got = resolve(&PackChoice::Image(img.clone()), &s, "x86_64").unwrap().unwrap();
        assert!(got.record.packages.is_empty(), "a manifest of another image is not this one's");
        write(&manifest(&sha));
        let got = resolve(&PackChoice::Image(img.clone()), &s, "x86_64").unwrap().unwrap();
        assert_eq!((got.record.packages, got.record.builder_version), (vec!["gcc=12".to_string()], Some(7)));
        let e = resolve(&PackChoice::Image(dir.path().join("gone.ext4")), &s, "x86_64").unwrap_err();
        assert!(e.to_string().contains("gone.ext4"), "{e}");
    }
}
