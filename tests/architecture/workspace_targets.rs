//! The crates of this workspace, as `cargo metadata` lists them: every
//! target (lib, bins, tests, examples, build scripts) of every member.

use std::path::PathBuf;
use std::process::Command;

/// One crate: a target of a workspace package.
pub struct CrateTarget {
    /// `bootbench-loads bin bootbench-applet`.
    pub label: String,
    /// Its root source file.
    pub src_path: PathBuf,
}

/// The workspace root and its targets, in `cargo metadata` order.
pub fn workspace_targets() -> (PathBuf, Vec<CrateTarget>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = Command::new(&cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--manifest-path", manifest])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} metadata: {e}"));
    assert!(
        output.status.success(),
        "{cargo} metadata failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let root = PathBuf::from(metadata["workspace_root"].as_str().expect("workspace_root"));
    let mut targets = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        let package_name = package["name"].as_str().expect("package name");
        for target in package["targets"].as_array().expect("targets") {
            let kinds: Vec<&str> =
                target["kind"].as_array().expect("target kind").iter().filter_map(|k| k.as_str()).collect();
            let name = target["name"].as_str().expect("target name");
            let kinds = kinds.join(",");
            let label = if kinds == "lib" || kinds == "custom-build" {
                format!("{package_name} {kinds}")
            } else {
                format!("{package_name} {kinds} {name}")
            };
            let src_path = PathBuf::from(target["src_path"].as_str().expect("src_path"));
            targets.push(CrateTarget { label, src_path });
        }
    }
    (root, targets)
}
