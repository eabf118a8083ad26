//! The configuration file: what a lab sets once (the receiver to upload
//! to, the kernel cache, the machine every boot gets), read from
//! `$BOOTBENCH_CONFIG`, else `$XDG_CONFIG_HOME/bootbench/config.toml`, else
//! `~/.config/bootbench/config.toml`. A missing file means the built-in
//! defaults; a bad one is an error naming the file and the key.
//!
//! Precedence, for every value: a flag given on the command line, then the
//! environment where a variable applies (`BOOTBENCH_CACHE`), then the file,
//! then the built-in default. Whether a flag was given is what clap's
//! [`ArgMatches::value_source`] says (or, for an optional flag, whether it
//! has a value), never a comparison with the default. This module owns the
//! file's format and that precedence; it runs nothing and prints nothing.

use crate::bisect::lab_settings::BootOptions;
use crate::boot::options::{MemChoice, RunOptions, DEFAULT_MEM, DEFAULT_SMP, ICOUNT_SMP};
use crate::kernel;
use clap::parser::ValueSource;
use clap::ArgMatches;
use serde::Deserialize;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The variable naming the config file (overrides the XDG location).
pub const CONFIG_ENV: &str = "BOOTBENCH_CONFIG";

/// A config file could not be found, read or understood.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// No location: none of the variables that place the file is set.
    #[error("the config file has no location: none of {CONFIG_ENV}, XDG_CONFIG_HOME and HOME is set")]
    NoLocation,
    /// The file exists but cannot be read.
    #[error("cannot read the config file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Not TOML at all.
    #[error("the config file {path} is not valid TOML")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// toml's error, with line and column.
        #[source]
        source: toml::de::Error,
    },
    /// A key that is unknown or of the wrong type.
    #[error("the config file {path}: key `{key}`")]
    Key {
        /// The file.
        path: PathBuf,
        /// The key, dotted (`machine.smp`).
        key: String,
        /// toml's error, with line and column.
        #[source]
        source: toml::de::Error,
    },
    /// A key of the right type whose value bootbench refuses.
    #[error("the config file {path}: key `{key}`: {problem}")]
    Value {
        /// The file.
        path: PathBuf,
        /// The key, dotted.
        key: String,
        /// What is wrong with its value.
        problem: String,
    },
}

/// The file as written. Every key is optional; an unknown one is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    upload: UploadSection,
    #[serde(default)]
    kernel: KernelSection,
    #[serde(default)]
    machine: MachineSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadSection {
    url: Option<String>,
    token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelSection {
    cache: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MachineSection {
    smp: Option<u32>,
    mem: Option<String>,
    cpu: Option<String>,
    accel: Option<String>,
}

/// A value for each key of the config file, `None` when not set: what
/// the file sets (checked, its relative paths made absolute against the
/// file's directory), or what a command line gave ([`Given`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileValues {
    /// `upload.url`: the receiver's base URL.
    pub upload_url: Option<String>,
    /// `upload.token_file`: the receiver's token, in a private file.
    pub upload_token_file: Option<PathBuf>,
    /// `upload.ca_file`: a lab's own CA (PEM).
    pub upload_ca_file: Option<PathBuf>,
    /// `kernel.cache`: the kernel cache root.
    pub kernel_cache: Option<PathBuf>,
    /// `machine.smp`: vCPUs.
    pub smp: Option<u32>,
    /// `machine.mem`: guest memory (`auto` or a size).
    pub mem: Option<String>,
    /// `machine.cpu`: QEMU CPU model.
    pub cpu: Option<String>,
    /// `machine.accel`: auto, kvm, tcg or icount[:SHIFT].
    pub accel: Option<String>,
}

/// The config file: where it is, whether it was there, and what it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The file's path (it need not exist).
    pub path: PathBuf,
    /// Whether the file was there.
    pub found: bool,
    /// What it sets.
    pub values: FileValues,
}

/// The config file's path: `$BOOTBENCH_CONFIG`, else
/// `$XDG_CONFIG_HOME/bootbench/config.toml` (an absolute one: the XDG spec
/// says to ignore a relative one), else `$HOME/.config/bootbench/config.toml`.
pub fn config_path() -> Result<PathBuf, SettingsError> {
    config_path_from(|name| std::env::var_os(name))
}

/// [`config_path`] with the environment read through `env`.
pub fn config_path_from(env: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, SettingsError> {
    let set = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = set(CONFIG_ENV) {
        return Ok(path);
    }
    if let Some(xdg) = set("XDG_CONFIG_HOME").filter(|p| p.is_absolute()) {
        return Ok(xdg.join("bootbench/config.toml"));
    }
    set("HOME").map(|home| home.join(".config/bootbench/config.toml")).ok_or(SettingsError::NoLocation)
}

impl Settings {
    /// Loads the config file at its usual place ([`config_path`]). Without
    /// any location (no `HOME`), nothing is configured.
    pub fn load_default() -> Result<Settings, SettingsError> {
        match config_path() {
            Ok(path) => Settings::load(&path),
            Err(SettingsError::NoLocation) => {
                Ok(Settings { path: PathBuf::new(), found: false, values: FileValues::default() })
            }
            Err(e) => Err(e),
        }
    }

    /// Loads the config file at `path`: a missing file sets nothing; one
    /// that cannot be read, or has an unknown key or a bad value, is an
    /// error naming the file and the key.
    pub fn load(path: &Path) -> Result<Settings, SettingsError> {
        // Absolute, so that the paths it gives are too.
        let path = &std::path::absolute(path).map_err(|source| SettingsError::Read { path: path.into(), source })?;
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Settings { path: path.to_path_buf(), found: true, values: parse(&text, path)? }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok(Settings { path: path.to_path_buf(), found: false, values: FileValues::default() })
            }
            Err(source) => Err(SettingsError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// The effective values: each from `given` (the command line) when
    /// there, else the environment (read through `env`) where a variable
    /// applies, else the file, else the built-in default.
    pub fn effective(&self, given: &Given, env: impl Fn(&str) -> Option<OsString>) -> Effective {
        let file = || Source::File(self.path.clone());
        let f = &self.values;
        let env_cache = env(kernel::fetch::CACHE_ENV).filter(|v| !v.is_empty()).map(PathBuf::from);
        let kernel_cache = match (&given.kernel_cache, env_cache, &f.kernel_cache) {
            (Some(p), _, _) => Sourced { value: p.clone(), source: Source::Flag },
            (None, Some(p), _) => Sourced { value: p, source: Source::Environment(kernel::fetch::CACHE_ENV) },
            (None, None, Some(p)) => Sourced { value: p.clone(), source: file() },
            (None, None, None) => Sourced { value: kernel::fetch::cache_root_from(&env), source: Source::Default },
        };
        Effective {
            upload_url: layered(&given.upload_url, &f.upload_url, file(), None),
            upload_token_file: layered(&given.upload_token_file, &f.upload_token_file, file(), None),
            upload_ca_file: layered(&given.upload_ca_file, &f.upload_ca_file, file(), None),
            kernel_cache,
            smp: layered(&given.smp, &f.smp, file(), None),
            mem: required(layered(&given.mem, &f.mem, file(), Some(DEFAULT_MEM.to_string()))),
            cpu: layered(&given.cpu, &f.cpu, file(), None),
            accel: required(layered(&given.accel, &f.accel, file(), Some("auto".to_string()))),
        }
    }

    /// Fills the options of a command that boots (`run`, `calibrate`)
    /// from the file where its command line (`m`, the subcommand's
    /// matches) left them out: the machine (`--smp`, `--mem`, `--cpu`,
    /// `--accel`), the kernel cache, and the receiver (`--upload-url`,
    /// `--upload-token-file`, `--upload-ca-file`). The file's receiver is
    /// not used with `--serve` or `--no-upload`, and its token file not
    /// with `--upload-token`.
    pub fn apply_to_run(&self, run: &mut RunOptions, m: &ArgMatches, env: impl Fn(&str) -> Option<OsString>) {
        let mut given = Given {
            upload_url: run.upload_url.clone(),
            upload_token_file: run.upload_token_file.clone(),
            upload_ca_file: run.upload_ca_file.clone(),
            kernel_cache: run.kernel_cache.clone(),
            ..Given::default()
        };
        machine_given(&mut given, m, run.smp, &run.mem, &run.cpu, &run.accel);
        let e = self.effective(&given, env);
        (run.smp, run.mem, run.cpu, run.accel) = (e.smp.value, e.mem.value, e.cpu.value, e.accel.value);
        run.kernel_cache = Some(e.kernel_cache.value);
        if !(run.serve || run.no_upload) {
            let token = run.upload_token.is_some();
            self.fill_upload(&mut run.upload_url, token, &mut run.upload_token_file, &mut run.upload_ca_file);
        }
    }

    /// Fills a receiver's flags from the file where the command line left
    /// them out: the URL; then, only when there is a URL, the token file
    /// (unless a token was given: `token_given`) and the CA file.
    pub fn fill_upload(
        &self,
        url: &mut Option<String>,
        token_given: bool,
        token_file: &mut Option<PathBuf>,
        ca_file: &mut Option<PathBuf>,
    ) {
        let given = Given {
            upload_url: url.clone(),
            upload_token_file: token_file.clone(),
            upload_ca_file: ca_file.clone(),
            ..Given::default()
        };
        let e = self.effective(&given, |_| None);
        *url = e.upload_url.value;
        if url.is_some() {
            if !token_given {
                *token_file = e.upload_token_file.value;
            }
            *ca_file = e.upload_ca_file.value;
        }
    }

    /// The kernel cache root: `flag` (a `--cache`), else
    /// `$BOOTBENCH_CACHE` (read through `env`), else the file's
    /// kernel.cache, else the XDG default.
    pub fn kernel_cache(&self, flag: Option<PathBuf>, env: impl Fn(&str) -> Option<OsString>) -> PathBuf {
        self.effective(&Given { kernel_cache: flag, ..Given::default() }, env).kernel_cache.value
    }

    /// Fills the machine of `bootbench bisect`'s boots (`--smp`, `--mem`,
    /// `--cpu`, `--accel`) from the file where the command line (`m`) left
    /// them out.
    pub fn apply_to_bisect_boot(&self, boot: &mut BootOptions, m: &ArgMatches) {
        let mut given = Given::default();
        machine_given(&mut given, m, boot.smp, &boot.mem, &boot.cpu, &boot.accel);
        let e = self.effective(&given, |_| None);
        (boot.smp, boot.mem, boot.cpu, boot.accel) = (e.smp.value, e.mem.value, e.cpu.value, e.accel.value);
    }
}

/// Whether the argument `id` was given on the command line (not defaulted).
pub fn given_on_command_line(m: &ArgMatches, id: &str) -> bool {
    m.value_source(id) == Some(ValueSource::CommandLine)
}

/// The machine flags the command line gave, into `given`.
fn machine_given(given: &mut Given, m: &ArgMatches, smp: Option<u32>, mem: &str, cpu: &Option<String>, accel: &str) {
    let flag = |id: &str| given_on_command_line(m, id);
    given.smp = smp.filter(|_| flag("smp"));
    given.mem = flag("mem").then(|| mem.to_string());
    given.cpu = cpu.clone().filter(|_| flag("cpu"));
    given.accel = flag("accel").then(|| accel.to_string());
}

/// The values a command line gave, each `None` when its flag was not
/// given: the same keys as the file's (`upload --url` is `upload_url`,
/// `kernel ... --cache` is `kernel_cache`, `--smp` is `smp`, ...).
pub type Given = FileValues;

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// bootbench's built-in default.
    Default,
    /// The config file at this path.
    File(PathBuf),
    /// This environment variable.
    Environment(&'static str),
    /// A flag on the command line.
    Flag,
}

impl Source {
    /// The kind alone: `default`, `file`, `environment` or `flag`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::File(_) => "file",
            Source::Environment(_) => "environment",
            Source::Flag => "flag",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Environment(name) => write!(f, "environment ({name})"),
            other => f.write_str(other.kind()),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

/// Every configurable value, in effect, with its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The receiver's URL (none: no upload).
    pub upload_url: Sourced<Option<String>>,
    /// The receiver's token file.
    pub upload_token_file: Sourced<Option<PathBuf>>,
    /// A lab's own CA.
    pub upload_ca_file: Sourced<Option<PathBuf>>,
    /// The kernel cache root.
    pub kernel_cache: Sourced<PathBuf>,
    /// vCPUs (none: [`DEFAULT_SMP`], or [`ICOUNT_SMP`] under icount).
    pub smp: Sourced<Option<u32>>,
    /// Guest memory.
    pub mem: Sourced<String>,
    /// QEMU CPU model (none: the arch profile's).
    pub cpu: Sourced<Option<String>>,
    /// Accelerator.
    pub accel: Sourced<String>,
}

/// One row of [`Effective::rows`]: the file's key, the value as text (none:
/// not set), what an unset value means, and the source.
pub struct Row<'a> {
    /// The key as the file spells it.
    pub key: &'static str,
    /// The value, when there is one.
    pub value: Option<String>,
    /// What bootbench does without a value.
    pub unset: &'static str,
    /// Where the value came from.
    pub source: &'a Source,
}

impl Effective {
    /// The values in the file's order, one row each.
    pub fn rows(&self) -> Vec<Row<'_>> {
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let row = |key, value, unset, source| Row { key, value, unset, source };
        vec![
            row("upload.url", self.upload_url.value.clone(), "none: no upload", &self.upload_url.source),
            row("upload.token_file", path(&self.upload_token_file.value), "none", &self.upload_token_file.source),
            row("upload.ca_file", path(&self.upload_ca_file.value), "none", &self.upload_ca_file.source),
            row("kernel.cache", Some(self.kernel_cache.value.display().to_string()), "", &self.kernel_cache.source),
            row("machine.smp", self.smp.value.map(|n| n.to_string()), SMP_UNSET, &self.smp.source),
            row("machine.mem", Some(self.mem.value.clone()), "", &self.mem.source),
            row("machine.cpu", self.cpu.value.clone(), "the arch profile's", &self.cpu.source),
            row("machine.accel", Some(self.accel.value.clone()), "", &self.accel.source),
        ]
    }
}

/// What an unset `machine.smp` means (see [`crate::boot::options::smp_for`]).
const SMP_UNSET: &str = "2, or 1 with --clock icount";
const _: () = assert!(DEFAULT_SMP == 2 && ICOUNT_SMP == 1, "SMP_UNSET names these numbers");

/// flag, else file, else `default`.
fn layered<T: Clone>(
    flag: &Option<T>,
    file: &Option<T>,
    file_source: Source,
    default: Option<T>,
) -> Sourced<Option<T>> {
    match (flag, file) {
        (Some(v), _) => Sourced { value: Some(v.clone()), source: Source::Flag },
        (None, Some(v)) => Sourced { value: Some(v.clone()), source: file_source },
        (None, None) => Sourced { value: default, source: Source::Default },
    }
}

/// A value that always has a default.
fn required<T: Default>(s: Sourced<Option<T>>) -> Sourced<T> {
    Sourced { value: s.value.unwrap_or_default(), source: s.source }
}

/// Parses and checks the text of the config file at `path`.
fn parse(text: &str, path: &Path) -> Result<FileValues, SettingsError> {
    let de =
        toml::Deserializer::parse(text).map_err(|source| SettingsError::Syntax { path: path.to_path_buf(), source })?;
    let file: ConfigFile = serde_path_to_error::deserialize(de).map_err(|e| {
        let key = key_of(&e.path().to_string());
        SettingsError::Key { path: path.to_path_buf(), key, source: e.into_inner() }
    })?;
    let bad = |key: &str, problem: String| SettingsError::Value { path: path.to_path_buf(), key: key.into(), problem };
    // Relative paths are the file's directory's.
    let dir = path.parent().unwrap_or(Path::new(""));
    let resolve = |key: &str, p: Option<PathBuf>| match p {
        Some(p) if p.as_os_str().is_empty() => Err(bad(key, "is empty".into())),
        Some(p) => Ok(Some(dir.join(p))),
        None => Ok(None),
    };
    if let Some(url) = &file.upload.url {
        match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            Ok(u) => return Err(bad("upload.url", format!("'{url}' is not http or https ({})", u.scheme()))),
            Err(e) => return Err(bad("upload.url", format!("'{url}' is not a URL: {e}"))),
        }
    }
    if file.machine.smp == Some(0) {
        return Err(bad("machine.smp", "must be 1 or more".into()));
    }
    if let Some(mem) = &file.machine.mem {
        MemChoice::parse(mem).map_err(|e| bad("machine.mem", format!("{e:#}")))?;
    }
    if let Some(cpu) = &file.machine.cpu {
        if cpu.trim().is_empty() || cpu.contains(char::is_whitespace) {
            return Err(bad("machine.cpu", format!("'{cpu}' is not one QEMU CPU model name")));
        }
    }
    if let Some(accel) = &file.machine.accel {
        accel.parse::<qemu::AccelRequest>().map_err(|e| bad("machine.accel", format!("{e} (auto, kvm or tcg)")))?;
    }
    Ok(FileValues {
        upload_url: file.upload.url,
        upload_token_file: resolve("upload.token_file", file.upload.token_file)?,
        upload_ca_file: resolve("upload.ca_file", file.upload.ca_file)?,
        kernel_cache: resolve("kernel.cache", file.kernel.cache)?,
        smp: file.machine.smp,
        mem: file.machine.mem,
        cpu: file.machine.cpu,
        accel: file.machine.accel,
    })
}

/// The dotted key of a deserialization error at `path` (`.` is the top;
/// an unknown key's path ends with it).
fn key_of(path: &str) -> String {
    if path == "." {
        "(top level)".to_string()
    } else {
        path.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::{CommandFactory, FromArgMatches, Parser};

    /// An environment of `vars` alone.
    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// A config file with `text` in a fresh directory, loaded.
    fn settings(text: &str) -> (tempfile::TempDir, Settings) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let s = Settings::load(&path).unwrap_or_else(|e| panic!("{text}: {e}"));
        (dir, s)
    }

    fn error(text: &str) -> (PathBuf, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        let e = Settings::load(&path).expect_err(text);
        (path, format!("{:#}", anyhow::Error::from(e)))
    }

    /// `argv` parsed as the binary parses it: the command and its matches.
    fn parse(argv: &[&str]) -> (Cli, ArgMatches) {
        let m = Cli::command().try_get_matches_from(argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        (Cli::from_arg_matches(&m).unwrap(), m)
    }

    /// `bootbench run ARGS` with `s` applied (and `vars` as the environment).
    fn run(s: &Settings, args: &[&str], vars: &[(&str, &str)]) -> RunOptions {
        let argv: Vec<&str> = ["bootbench", "run"].iter().chain(args).copied().collect();
        let (cli, m) = parse(&argv);
        let Command::Run(mut r) = cli.command else { panic!("not run") };
        s.apply_to_run(&mut r, m.subcommand().unwrap().1, env(vars));
        *r
    }

    const FULL: &str = r#"
[upload]
url = "https://lab.example:8443"
token_file = "upload.token"
ca_file = "/etc/lab/ca.pem"

[kernel]
cache = "kernels"

[machine]
smp = 4
mem = "2G"
cpu = "max"
accel = "tcg"
"#;

    #[test]
    fn an_unknown_key_or_a_wrong_type_is_an_error_naming_the_file_the_key_and_the_line() {
        for (text, key, line, says) in [
            ("[machine]\nsmp = 4\nmemory = \"2G\"\n", "machine.memory", 3, "unknown field `memory`"),
            ("[machines]\nsmp = 4\n", "machines", 1, "unknown field `machines`"),
            ("url = \"http://x\"\n", "url", 1, "unknown field `url`"),
            ("[machine]\nsmp = \"four\"\n", "machine.smp", 2, "invalid type: string \"four\", expected u32"),
            ("[upload]\nurl = 8080\n", "upload.url", 2, "invalid type: integer"),
            ("[kernel]\ncache = true\n", "kernel.cache", 2, "invalid type: boolean"),
        ] {
            let (path, e) = error(text);
            assert!(e.contains(&format!("config file {}: key `{key}`", path.display())), "{text}: {e}");
            assert!(e.contains(&format!("line {line}, column")) && e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_value_bootbench_refuses_is_an_error_naming_the_key_and_the_problem() {
        for (text, key, says) in [
            ("[machine]\nmem = \"lots\"\n", "machine.mem", "bad memory size 'lots'"),
            ("[machine]\naccel = \"fast\"\n", "machine.accel", "fast"),
            ("[machine]\nsmp = 0\n", "machine.smp", "1 or more"),
            ("[machine]\ncpu = \"max host\"\n", "machine.cpu", "not one QEMU CPU model"),
            ("[upload]\nurl = \"lab:8080/x y\"\n", "upload.url", "not http or https"),
            ("[upload]\nurl = \"not a url\"\n", "upload.url", "is not a URL"),
            ("[upload]\ntoken_file = \"\"\n", "upload.token_file", "is empty"),
        ] {
            let (path, e) = error(text);
            assert!(e.contains(&format!("config file {}: key `{key}`: ", path.display())), "{text}: {e}");
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn bad_toml_is_an_error_with_its_line_and_a_missing_file_sets_nothing() {
        let (path, e) = error("[machine]\nsmp = [\n");
        assert!(e.contains(&format!("the config file {} is not valid TOML", path.display())), "{e}");
        assert!(e.contains("line 2, column"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("config.toml");
        let s = Settings::load(&missing).unwrap();
        assert_eq!(s, Settings { path: missing.clone(), found: false, values: FileValues::default() });
        // A directory where the file should be cannot be read: an error.
        std::fs::create_dir(&missing).unwrap();
        let e = Settings::load(&missing).unwrap_err();
        assert!(matches!(e, SettingsError::Read { .. }), "{e}");
        assert!(e.to_string().contains(&missing.display().to_string()), "{e}");
        let (_d, empty) = settings("");
        assert_eq!((empty.found, empty.values), (true, FileValues::default()));
    }

    #[test]
    fn relative_paths_are_the_files_directorys() {
        let (dir, s) = settings(FULL);
        assert_eq!(s.values.upload_token_file, Some(dir.path().join("upload.token")));
        assert_eq!(s.values.kernel_cache, Some(dir.path().join("kernels")));
        assert_eq!(s.values.upload_ca_file, Some(PathBuf::from("/etc/lab/ca.pem")), "an absolute path is kept");
        let (dir, s) = settings("[kernel]\ncache = \"../shared/kernels\"\n");
        assert_eq!(s.values.kernel_cache, Some(dir.path().join("../shared/kernels")));
        // A config path given relative to the current directory still
        // gives absolute paths.
        let s = Settings::load(Path::new("no-such-dir/config.toml")).unwrap();
        assert!(s.path.is_absolute() && s.path.ends_with("no-such-dir/config.toml"), "{}", s.path.display());
    }

    #[test]
    fn the_file_is_found_by_bootbench_config_then_xdg_then_home() {
        let at = |vars: &[(&str, &str)]| config_path_from(env(vars)).map_err(|e| e.to_string());
        let all = [("BOOTBENCH_CONFIG", "/b/c.toml"), ("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(at(&all), Ok(PathBuf::from("/b/c.toml")));
        assert_eq!(at(&all[1..]), Ok(PathBuf::from("/x/bootbench/config.toml")));
        assert_eq!(at(&all[2..]), Ok(PathBuf::from("/h/.config/bootbench/config.toml")));
        // Empty is unset; a relative XDG_CONFIG_HOME is ignored (XDG spec).
        assert_eq!(
            at(&[("BOOTBENCH_CONFIG", ""), ("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")]),
            Ok(PathBuf::from("/h/.config/bootbench/config.toml"))
        );
        assert_eq!(at(&[("BOOTBENCH_CONFIG", "rel.toml")]), Ok(PathBuf::from("rel.toml")));
        assert!(at(&[]).unwrap_err().contains("BOOTBENCH_CONFIG, XDG_CONFIG_HOME and HOME"));
    }

    #[test]
    fn the_machine_is_the_flags_else_the_files_else_the_default() {
        let (_d, file) = settings(FULL);
        let none = Settings { path: PathBuf::from("/none"), found: false, values: FileValues::default() };
        let machine = |r: RunOptions| (r.smp, r.mem, r.cpu, r.accel);
        let s = |v: &str| v.to_string();
        assert_eq!(machine(run(&none, &[], &[])), (None, s("auto"), None, s("auto")), "defaults");
        assert_eq!(machine(run(&file, &[], &[])), (Some(4), s("2G"), Some(s("max")), s("tcg")), "the file");
        let flags = ["--smp", "1", "--mem", "512M", "--cpu", "qemu64", "--accel", "kvm"];
        assert_eq!(machine(run(&file, &flags, &[])), (Some(1), s("512M"), Some(s("qemu64")), s("kvm")));
        // A flag that spells out the built-in default still wins.
        assert_eq!(machine(run(&file, &["--mem", "auto", "--accel", "auto"], &[])).1, "auto");
        assert_eq!(machine(run(&file, &["--mem", "auto", "--accel", "auto"], &[])).3, "auto");
        // One flag leaves the others to the file.
        assert_eq!(machine(run(&file, &["--mem", "1G"], &[])), (Some(4), s("1G"), Some(s("max")), s("tcg")));
        // calibrate flattens the same options, with a default of its own for --boots.
        let (mut cli, m) = parse(&["bootbench", "calibrate", "--accel", "kvm"]);
        let Command::Calibrate(c) = &mut cli.command else { panic!() };
        file.apply_to_run(&mut c.run, m.subcommand().unwrap().1, env(&[]));
        assert_eq!(machine(c.run.clone()), (Some(4), s("2G"), Some(s("max")), s("kvm")));
        // bisect has its own flag set.
        let (mut cli, m) = parse(&["bootbench", "bisect", "--smp", "3"]);
        let Command::Bisect(b) = &mut cli.command else { panic!() };
        file.apply_to_bisect_boot(&mut b.boot, m.subcommand().unwrap().1);
        assert_eq!(
            (b.boot.smp, &*b.boot.mem, b.boot.cpu.as_deref(), &*b.boot.accel),
            (Some(3), "2G", Some("max"), "tcg")
        );
    }

    #[test]
    fn the_receiver_is_the_flags_else_the_files_unless_the_run_uploads_nowhere_else() {
        let (dir, file) = settings(FULL);
        let up = |r: RunOptions| (r.upload_url, r.upload_token.is_some(), r.upload_token_file, r.upload_ca_file);
        let url = Some("https://lab.example:8443".to_string());
        let (token, ca) = (Some(dir.path().join("upload.token")), Some(PathBuf::from("/etc/lab/ca.pem")));
        assert_eq!(up(run(&file, &[], &[])), (url.clone(), false, token.clone(), ca.clone()), "the file");
        let none = Settings { path: PathBuf::from("/none"), found: false, values: FileValues::default() };
        assert_eq!(up(run(&none, &[], &[])), (None, false, None, None), "no file: no upload");
        // Each flag wins over its key alone.
        let other = Some("http://10.0.2.2:8080".to_string());
        assert_eq!(
            up(run(&file, &["--upload-url", "http://10.0.2.2:8080"], &[])),
            (other, false, token.clone(), ca.clone())
        );
        let r = run(&file, &["--upload-token-file", "/t", "--upload-ca-file", "/c"], &[]);
        assert_eq!(up(r), (url.clone(), false, Some(PathBuf::from("/t")), Some(PathBuf::from("/c"))));
        // A token on the command line replaces the file's token file.
        assert_eq!(up(run(&file, &["--upload-token", "secret"], &[])), (url, true, None, ca));
        // --serve and --no-upload take nothing of the file's receiver.
        assert_eq!(up(run(&file, &["--serve"], &[])), (None, false, None, None));
        assert_eq!(up(run(&file, &["--no-upload"], &[])), (None, false, None, None));
        assert!(Cli::try_parse_from(["bootbench", "run", "--no-upload", "--upload-url", "http://x"]).is_err());
        // `upload` takes the same keys.
        let (mut cli, _) = parse(&["bootbench", "upload", "results.json", "--ca-file", "/c"]);
        let Command::Upload(a) = &mut cli.command else { panic!() };
        file.fill_upload(&mut a.url, a.token.is_some(), &mut a.token_file, &mut a.ca_file);
        assert_eq!(
            (a.url.as_deref(), a.token_file.clone(), a.ca_file.clone()),
            (Some("https://lab.example:8443"), token, Some(PathBuf::from("/c")))
        );
    }

    #[test]
    fn the_kernel_cache_is_the_flags_else_the_environments_else_the_files_else_xdgs() {
        let (dir, file) = settings(FULL);
        let none = Settings { path: PathBuf::from("/none"), found: false, values: FileValues::default() };
        let vars = [("BOOTBENCH_CACHE", "/env"), ("XDG_CACHE_HOME", "/xdg"), ("HOME", "/h")];
        let cache = |s: &Settings, flag: Option<&str>, vars: &[(&str, &str)]| {
            let e = s.effective(&Given { kernel_cache: flag.map(PathBuf::from), ..Given::default() }, env(vars));
            (e.kernel_cache.value, e.kernel_cache.source)
        };
        assert_eq!(cache(&file, Some("/flag"), &vars), (PathBuf::from("/flag"), Source::Flag));
        assert_eq!(cache(&file, None, &vars), (PathBuf::from("/env"), Source::Environment("BOOTBENCH_CACHE")));
        assert_eq!(cache(&file, None, &vars[1..]), (dir.path().join("kernels"), Source::File(file.path.clone())));
        assert_eq!(cache(&none, None, &vars[1..]), (PathBuf::from("/xdg/bootbench/kernels"), Source::Default));
        // `run` and `kernel fetch` get it the same way.
        assert_eq!(run(&file, &[], &vars[1..]).kernel_cache_root(), dir.path().join("kernels"));
        assert_eq!(run(&file, &[], &vars).kernel_cache_root(), PathBuf::from("/env"));
        assert_eq!(file.kernel_cache(Some(PathBuf::from("/flag")), env(&vars)), PathBuf::from("/flag"));
    }

    #[test]
    fn each_value_says_where_it_came_from() {
        let (_d, file) = settings("[machine]\nmem = \"3G\"\n");
        let given = Given { accel: Some("tcg".into()), ..Given::default() };
        let e = file.effective(&given, env(&[("HOME", "/h")]));
        let rows: Vec<(&str, Option<String>, String)> =
            e.rows().into_iter().map(|r| (r.key, r.value, r.source.to_string())).collect();
        let from_file = file.path.display().to_string();
        assert_eq!(rows[5], ("machine.mem", Some("3G".into()), from_file));
        assert_eq!(rows[7], ("machine.accel", Some("tcg".into()), "flag".into()));
        assert_eq!(rows[0], ("upload.url", None, "default".into()));
        assert_eq!(rows[3], ("kernel.cache", Some("/h/.cache/bootbench/kernels".into()), "default".into()));
        let keys: Vec<&str> = rows.iter().map(|r| r.0).collect();
        assert_eq!(
            keys,
            [
                "upload.url",
                "upload.token_file",
                "upload.ca_file",
                "kernel.cache",
                "machine.smp",
                "machine.mem",
                "machine.cpu",
                "machine.accel"
            ]
        );
    }
}
