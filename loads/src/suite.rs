//! Suite configuration: which workloads run, how often, with which
//! parameters. A suite comes from a built-in name or a JSON file packed into
//! the image, and `bootbench.*` keys on the kernel cmdline override it. An
//! unknown key or a bad value is an error, never a silent default.
//!
//! The workload names a suite may use are given to the functions that
//! check them (the `workloads` argument of the `*_for` functions): this
//! module must not depend on the workload registry or on any workload.
//! The registry binds its names to them as `Suite::from_json`,
//! `Suite::validate`, `CmdlineConfig::parse` and `CmdlineConfig::apply`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Names of the built-in suites, smallest first.
pub const BUILTIN_SUITES: &[&str] = &["quick", "standard", "full", "contest"];

/// Errors in suite files and cmdline overrides.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// Not one of [`BUILTIN_SUITES`].
    #[error("unknown suite '{0}' (built-in suites: quick, standard, full, contest)")]
    UnknownSuite(String),
    /// The suite JSON does not parse or has unknown fields.
    #[error("suite '{name}' is not valid")]
    BadSuite {
        /// File or suite name.
        name: String,
        /// Parser error.
        #[source]
        source: serde_json::Error,
    },
    /// A cmdline key this init does not know.
    #[error("unknown kernel cmdline key '{key}' (known: {known})")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// Known keys, for the message.
        known: String,
    },
    /// A cmdline key with a value that does not parse or is out of range.
    #[error("bad value '{value}' for kernel cmdline key '{key}': {why}")]
    BadValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What was expected.
        why: String,
    },
    /// A workload name that no workload has.
    #[error("unknown workload '{name}' (known: {known})")]
    UnknownWorkload {
        /// The name as given.
        name: String,
        /// Known workloads, for the message.
        known: String,
    },
    /// A suite with nothing to run.
    #[error("suite '{0}' has no workloads")]
    Empty(String),
}

/// One workload entry of a suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// Workload name, e.g. `fork`.
    pub name: String,
    /// Measured iterations; the suite's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<u32>,
    /// Discarded warmup iterations; the suite's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    /// Workload parameters; the workload fills in and validates defaults.
    #[serde(default)]
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// A whole suite.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Suite name, recorded in every result.
    pub name: String,
    /// Seed for every generated input.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Default measured iterations per workload.
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    /// Default warmup iterations per workload.
    #[serde(default = "default_warmup")]
    pub warmup: u32,
    /// Bound on the whole run inside the guest, in seconds.
    #[serde(default = "default_watchdog")]
    pub watchdog_s: u64,
    /// Workloads in the order they run.
    pub workloads: Vec<WorkloadSpec>,
}

fn default_seed() -> u64 {
    0x5eed_b007
}
fn default_iterations() -> u32 {
    5
}
fn default_warmup() -> u32 {
    1
}
fn default_watchdog() -> u64 {
    1800
}

impl Suite {
    /// A built-in suite by name.
    pub fn builtin(name: &str) -> Result<Suite, SuiteError> {
        if name == "contest" {
            return Ok(contest_suite());
        }
        let (iterations, fork_count, watchdog_s) = match name {
            "quick" => (5, 1000, 600),
            "standard" => (10, 10_000, 2 * 3600),
            "full" => (20, 50_000, 4 * 3600),
            other => return Err(SuiteError::UnknownSuite(other.to_string())),
        };
        let mut fork_params = serde_json::Map::new();
        fork_params.insert("count".into(), fork_count.into());
        Ok(Suite {
            name: name.to_string(),
            seed: default_seed(),
            iterations,
            warmup: default_warmup(),
            watchdog_s,
            workloads: [
                vec![WorkloadSpec { name: "fork".into(), iterations: None, warmup: None, params: fork_params }],
                nbench_specs(name),
                kernbench_era_specs(name),
            ]
            .concat(),
        })
    }

    /// Parses a suite file's JSON; `name` is used in errors, and every
    /// workload must be one of `workloads`.
    pub fn from_json_for(name: &str, json: &str, workloads: &[&str]) -> Result<Suite, SuiteError> {
        let suite: Suite =
            serde_json::from_str(json).map_err(|source| SuiteError::BadSuite { name: name.to_string(), source })?;
        suite.validate_for(workloads)?;
        Ok(suite)
    }

    /// Checks that the suite names only `workloads` and is not empty.
    pub fn validate_for(&self, workloads: &[&str]) -> Result<(), SuiteError> {
        if self.workloads.is_empty() {
            return Err(SuiteError::Empty(self.name.clone()));
        }
        for w in &self.workloads {
            if !workloads.contains(&w.name.as_str()) {
                return Err(SuiteError::UnknownWorkload { name: w.name.clone(), known: workloads.join(", ") });
            }
        }
        Ok(())
    }

    /// Canonical JSON of the suite (what its sha256 is taken over).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// sha256 of [`Suite::to_json`], hex.
    pub fn sha256(&self) -> String {
        hex::encode(Sha256::digest(self.to_json().as_bytes()))
    }

    /// Iterations for `spec`, the suite default when it has none.
    pub fn iterations_for(&self, spec: &WorkloadSpec) -> u32 {
        spec.iterations.unwrap_or(self.iterations)
    }

    /// Warmup iterations for `spec`.
    pub fn warmup_for(&self, spec: &WorkloadSpec) -> u32 {
        spec.warmup.unwrap_or(self.warmup)
    }
}

/// The `contest` suite: contest's eleven rows, three runs of each (the
/// `[runs]` of reference 003 were 2 to 5), on the scratch disk `bootbench
/// run` attaches for it. Hours under TCG with a 1 GiB guest; the rows and
/// sizes are `bootbench.contest.*` parameters.
fn contest_suite() -> Suite {
    Suite {
        name: "contest".to_string(),
        seed: default_seed(),
        iterations: 3,
        warmup: 0,
        watchdog_s: 8 * 3600,
        workloads: vec![WorkloadSpec {
            name: "contest".into(),
            iterations: None,
            warmup: None,
            params: serde_json::Map::new(),
        }],
    }
}

/// The kbuild, SDET and hackbench entries of built-in suite `size`.
///
/// Quick fits CI under TCG next to fork, dbench and tbench (the six take
/// about a minute of guest time on x86_64): a 16-file tree built at the
/// optimal and maximal job counts without kernbench's warmup build, SDET
/// at 1 and 4 scripts of 6 units, hackbench with 2 groups of 10. Standard
/// and full follow reference 000 (kernbench and SDET at 1/4/16/64/128
/// scripts, 10 and 20 iterations): kernbench's half/optimal/maximal runs
/// after its warmup build, and hackbench's classic 10 groups of 20; full
/// doubles the tree and the SDET script length.
fn kernbench_era_specs(size: &str) -> Vec<WorkloadSpec> {
    let quick = size == "quick";
    let spec = |name: &str, iterations: Option<u32>, warmup: Option<u32>, params: serde_json::Value| WorkloadSpec {
        name: name.into(),
        iterations,
        warmup,
        params: match params {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        },
    };
    let (files, modes, warmup_build) = match size {
        "quick" => (16, vec!["optimal", "maximal"], false),
        "standard" => (300, vec!["half", "optimal", "maximal"], true),
        _ => (600, vec!["half", "optimal", "maximal"], true),
    };
    let (levels, units) = match size {
        "quick" => (vec![1, 4], 6),
        "standard" => (vec![1, 4, 16, 64, 128], 12),
        _ => (vec![1, 4, 16, 64, 128], 24),
    };
    let (groups, fds, loops) = if quick { (2, 10, 20) } else { (10, 20, 100) };
    let few = quick.then_some(3);
    vec![
        // kernbench's own warmup build replaces a discarded iteration.
        spec(
            "kbuild",
            few,
            Some(0),
            serde_json::json!({ "files": files, "modes": modes, "warmup_build": warmup_build }),
        ),
        spec("sdet", few, quick.then_some(0), serde_json::json!({ "levels": levels, "units": units })),
        spec("hackbench", few, None, serde_json::json!({ "groups": groups, "fds": fds, "loops": loops })),
    ]
}

/// The dbench and tbench entries of built-in suite `size`. Quick fits CI
/// under TCG (about 8 s of guest time each); standard and full follow
/// reference 000 (10 to 20 iterations). The warmup is inside each iteration
/// (`warmup_s`), so no whole iteration is discarded.
fn nbench_specs(size: &str) -> Vec<WorkloadSpec> {
    let (clients, warmup_s, duration_s, iterations) = match size {
        "quick" => (2, 0.5, 2.0, 3),
        "standard" => (4, 2.0, 10.0, 10),
        _ => (8, 5.0, 20.0, 20),
    };
    ["dbench", "tbench"]
        .into_iter()
        .map(|name| {
            let mut params = serde_json::Map::new();
            params.insert("clients".into(), clients.into());
            params.insert("warmup_s".into(), warmup_s.into());
            params.insert("duration_s".into(), duration_s.into());
            params.insert("loadfile".into(), "builtin".into());
            WorkloadSpec { name: name.into(), iterations: Some(iterations), warmup: Some(0), params }
        })
        .collect()
}

/// Settings from `bootbench.*` kernel cmdline keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CmdlineConfig {
    /// `bootbench.suite=NAME`: run this built-in suite instead of the packed one.
    pub suite: Option<String>,
    /// `bootbench.iterations=N` (N ≥ 1), for every workload.
    pub iterations: Option<u32>,
    /// `bootbench.warmup=N`.
    pub warmup: Option<u32>,
    /// `bootbench.workloads=a,b`: run only these, in this order.
    pub workloads: Option<Vec<String>>,
    /// `bootbench.seed=N`.
    pub seed: Option<u64>,
    /// `bootbench.watchdog=SECONDS` (≥ 1).
    pub watchdog_s: Option<u64>,
    /// `bootbench.accel=kvm|tcg|icount|bare-metal`, recorded in provenance.
    pub accel: Option<String>,
    /// `bootbench.modules=0|1`: load the packed kernel modules, the early
    /// (storage) and the late (results port, NIC) lists (default 1).
    pub load_modules: Option<bool>,
    /// `bootbench.port=NAME`: also send the result to this virtio-serial port.
    pub port: Option<String>,
    /// `bootbench.upload=URL`: after the run, upload the result to this
    /// receiver (http or https base URL, e.g. `http://10.0.2.2:8080`).
    pub upload: Option<String>,
    /// `bootbench.token=TOKEN`: the upload's bearer token (required with
    /// `bootbench.upload`).
    pub token: Option<String>,
    /// `bootbench.ip=dhcp|kernel|ADDR/PREFIX`: how the guest gets its
    /// address for the upload.
    pub ip: Option<IpSetting>,
    /// `bootbench.gw=ADDR`: default gateway (overrides DHCP's router).
    pub gw: Option<std::net::Ipv4Addr>,
    /// `bootbench.dns=ADDR[,ADDR...]`: DNS servers for an upload host name
    /// (override DHCP's).
    pub dns: Option<Vec<std::net::Ipv4Addr>>,
    /// `bootbench.iface=NAME`: the network interface to use (default: the
    /// first Ethernet interface).
    pub iface: Option<String>,
    /// `bootbench.upload_attempts=N` (1..=20): attempts in all.
    pub upload_attempts: Option<u32>,
    /// `bootbench.upload_timeout=SECONDS` (1..=600): time allowed for one
    /// request.
    pub upload_timeout_s: Option<u64>,
    /// `bootbench.alive=SECONDS` (2..=3600): seconds between the `alive`
    /// events printed while a workload runs (default
    /// [`crate::console_protocol::ALIVE_INTERVAL_S`]); keep it under the
    /// host's silence timeout.
    pub alive_s: Option<u64>,
    /// `bootbench.scratch=/dev/NAME`: the whole block device the init
    /// mounts at `/scratch` before the workloads (contest's disk loads).
    pub scratch: Option<String>,
    /// `bootbench.scratch_fs=TYPE`: its filesystem (default `ext4`; only
    /// with `bootbench.scratch`).
    pub scratch_fs: Option<String>,
    /// `bootbench.swap=/dev/NAME`: a block device the init enables as swap.
    pub swap: Option<String>,
    /// `bootbench.iosched=NAME`: the block scheduler for the scratch device
    /// (one of [`IO_SCHEDULERS`]; only with `bootbench.scratch`).
    pub iosched: Option<String>,
    /// `bootbench.zram=BYTES`: a compressed RAM swap device of this size
    /// (zram0), used before any disk swap ([`MIN_ZRAM_BYTES`] at least).
    pub zram_bytes: Option<u64>,
    /// `bootbench.<workload>.<param>=VALUE` parameter overrides, in order.
    pub params: Vec<(String, String, serde_json::Value)>,
}

/// Block schedulers `bootbench.iosched` may name (what blk-mq offers).
pub const IO_SCHEDULERS: &[&str] = &["none", "mq-deadline", "kyber", "bfq"];

/// Smallest `bootbench.zram`: ten 64 KiB pages, the least swapon takes on
/// any arch's page size, rounded up to 1 MiB.
pub const MIN_ZRAM_BYTES: u64 = 1 << 20;

/// The filesystem mounted on the scratch device when
/// `bootbench.scratch_fs` does not say.
pub const DEFAULT_SCRATCH_FS: &str = "ext4";

/// Checks a `/dev/NAME` whole-disk path: the init derives
/// `/sys/block/NAME` from it, so nested paths and partitions' parents
/// cannot be guessed.
fn parse_block_device(key: &str, value: &str) -> Result<String, SuiteError> {
    let name = value.strip_prefix("/dev/").unwrap_or_default();
    let ok =
        !name.is_empty() && name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
    if !ok {
        return Err(bad(key, value, "expected a whole block device as /dev/NAME (e.g. /dev/vda)"));
    }
    Ok(value.to_string())
}

const KNOWN_KEYS: &[&str] = &[
    "suite",
    "iterations",
    "warmup",
    "workloads",
    "seed",
    "watchdog",
    "accel",
    "modules",
    "port",
    "upload",
    "token",
    "ip",
    "gw",
    "dns",
    "iface",
    "upload_attempts",
    "upload_timeout",
    "scratch",
    "scratch_fs",
    "swap",
    "iosched",
    "zram",
    "alive",
];

/// How the guest's network interface gets its IPv4 address
/// (`bootbench.ip=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpSetting {
    /// Ask a DHCP server (the init's own client).
    Dhcp,
    /// Keep the address the kernel configured (`ip=` with IP_PNP).
    Kernel,
    /// This address and prefix length.
    Static {
        /// The address.
        addr: std::net::Ipv4Addr,
        /// Prefix length, 1..=32.
        prefix: u8,
    },
}

fn parse_ipv4(key: &str, value: &str, text: &str) -> Result<std::net::Ipv4Addr, SuiteError> {
    text.parse().map_err(|_| bad(key, value, &format!("'{text}' is not an IPv4 address")))
}

fn parse_ip_setting(key: &str, value: &str) -> Result<IpSetting, SuiteError> {
    match value {
        "dhcp" => return Ok(IpSetting::Dhcp),
        "kernel" => return Ok(IpSetting::Kernel),
        _ => {}
    }
    let Some((addr, prefix)) = value.split_once('/') else {
        return Err(bad(key, value, "expected dhcp, kernel or ADDR/PREFIX (e.g. 10.0.2.15/24)"));
    };
    let addr = parse_ipv4(key, value, addr)?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|p| (1..=32).contains(p))
        .ok_or_else(|| bad(key, value, "the prefix length must be a number from 1 to 32"))?;
    Ok(IpSetting::Static { addr, prefix })
}

/// Checks an upload URL the way the uploader will use it: http or https,
/// a host, no credentials, query or fragment.
fn check_upload_url(key: &str, value: &str) -> Result<(), SuiteError> {
    let url = url::Url::parse(value).map_err(|e| bad(key, value, &format!("not a URL ({e})")))?;
    let why = if !matches!(url.scheme(), "http" | "https") {
        "only http:// and https:// are supported"
    } else if url.host_str().is_none_or(str::is_empty) {
        "the URL has no host"
    } else if !url.username().is_empty() || url.password().is_some() {
        "credentials in the URL are not allowed; give the token as bootbench.token"
    } else if url.query().is_some() || url.fragment().is_some() {
        "a query or fragment is not allowed; give the receiver's base URL"
    } else {
        return Ok(());
    };
    Err(bad(key, value, why))
}

/// Accel modes a result may record.
pub const ACCEL_MODES: &[&str] = &["kvm", "tcg", "icount", "bare-metal"];

fn bad(key: &str, value: &str, why: &str) -> SuiteError {
    SuiteError::BadValue { key: key.to_string(), value: value.to_string(), why: why.to_string() }
}

fn parse_num<T>(key: &str, value: &str, min: T) -> Result<T, SuiteError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let v: T = value.parse().map_err(|_| bad(key, value, "expected a whole number"))?;
    if v < min {
        return Err(bad(key, value, &format!("must be at least {min}")));
    }
    Ok(v)
}

/// Cmdline keys whose values are secrets.
const SECRET_KEYS: &[&str] = &["bootbench.token"];

/// `cmdline` with the values of secret keys (`bootbench.token`) replaced
/// by `<redacted>`, for results and logs.
///
/// ```
/// let c = loads::suite::redact_secrets("console=ttyS0 bootbench.token=s3cret quiet");
/// assert_eq!(c, "console=ttyS0 bootbench.token=<redacted> quiet");
/// ```
pub fn redact_secrets(cmdline: &str) -> String {
    cmdline
        .split(' ')
        .map(|w| match w.split_once('=') {
            Some((k, _)) if SECRET_KEYS.contains(&k.trim_start_matches('"')) => format!("{k}=<redacted>"),
            _ => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a kernel cmdline into words, honouring double quotes as the
/// kernel does (`key="a b"` is one word, quotes removed).
pub fn split_cmdline(cmdline: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut any = false;
    for c in cmdline.chars() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                any = true;
            }
            c if c.is_whitespace() && !in_quotes => {
                if any {
                    words.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(cur);
    }
    words
}

impl CmdlineConfig {
    /// Reads every `bootbench.*` word of `cmdline`; other words are the
    /// kernel's and are ignored. Workload names must be in `workloads`.
    pub fn parse_for(cmdline: &str, workloads: &[&str]) -> Result<CmdlineConfig, SuiteError> {
        let mut cfg = CmdlineConfig::default();
        for word in split_cmdline(cmdline) {
            let Some(rest) = word.strip_prefix("bootbench.") else { continue };
            let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
            let full = format!("bootbench.{key}");
            if value.is_empty() {
                return Err(bad(&full, value, "a value is required (key=value)"));
            }
            match key {
                "suite" => {
                    if !BUILTIN_SUITES.contains(&value) {
                        return Err(bad(&full, value, "expected one of quick, standard, full"));
                    }
                    cfg.suite = Some(value.to_string());
                }
                "iterations" => cfg.iterations = Some(parse_num(&full, value, 1u32)?),
                "warmup" => cfg.warmup = Some(parse_num(&full, value, 0u32)?),
                "seed" => cfg.seed = Some(parse_num(&full, value, 0u64)?),
                "watchdog" => cfg.watchdog_s = Some(parse_num(&full, value, 1u64)?),
                "accel" => {
                    if !ACCEL_MODES.contains(&value) {
                        return Err(bad(&full, value, "expected kvm, tcg, icount or bare-metal"));
                    }
                    cfg.accel = Some(value.to_string());
                }
                "port" => {
                    if !value.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)) {
                        return Err(bad(&full, value, "a port name uses only letters, digits, '.', '_' and '-'"));
                    }
                    cfg.port = Some(value.to_string());
                }
                "upload" => {
                    check_upload_url(&full, value)?;
                    cfg.upload = Some(value.to_string());
                }
                "token" => {
                    if !value.bytes().all(|b| b.is_ascii_graphic()) {
                        return Err(bad(&full, "<hidden>", "a token uses printable ASCII only"));
                    }
                    cfg.token = Some(value.to_string());
                }
                "ip" => cfg.ip = Some(parse_ip_setting(&full, value)?),
                "gw" => cfg.gw = Some(parse_ipv4(&full, value, value)?),
                "dns" => {
                    let servers =
                        value.split(',').map(|a| parse_ipv4(&full, value, a)).collect::<Result<Vec<_>, _>>()?;
                    if servers.len() > 3 {
                        return Err(bad(&full, value, "at most 3 DNS servers"));
                    }
                    cfg.dns = Some(servers);
                }
                "iface" => {
                    let ok = value.len() <= 15 && value.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
                    if !ok {
                        return Err(bad(
                            &full,
                            value,
                            "an interface name has at most 15 letters, digits, '.', '_' or '-'",
                        ));
                    }
                    cfg.iface = Some(value.to_string());
                }
                "upload_attempts" => {
                    let n = parse_num(&full, value, 1u32)?;
                    if n > 20 {
                        return Err(bad(&full, value, "at most 20 attempts"));
                    }
                    cfg.upload_attempts = Some(n);
                }
                "upload_timeout" => {
                    let n = parse_num(&full, value, 1u64)?;
                    if n > 600 {
                        return Err(bad(&full, value, "at most 600 seconds"));
                    }
                    cfg.upload_timeout_s = Some(n);
                }
                "scratch" => cfg.scratch = Some(parse_block_device(&full, value)?),
                "swap" => cfg.swap = Some(parse_block_device(&full, value)?),
                "scratch_fs" => {
                    if value.len() > 16 || !value.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) {
                        return Err(bad(&full, value, "expected a filesystem type such as ext4, xfs or btrfs"));
                    }
                    cfg.scratch_fs = Some(value.to_string());
                }
                "iosched" => {
                    if !IO_SCHEDULERS.contains(&value) {
                        return Err(bad(&full, value, &format!("expected one of {}", IO_SCHEDULERS.join(", "))));
                    }
                    cfg.iosched = Some(value.to_string());
                }
                "alive" => {
                    let n = parse_num(&full, value, crate::console_protocol::MIN_ALIVE_INTERVAL_S)?;
                    if n > 3600 {
                        return Err(bad(&full, value, "at most 3600 seconds"));
                    }
                    cfg.alive_s = Some(n);
                }
                "zram" => cfg.zram_bytes = Some(parse_num(&full, value, MIN_ZRAM_BYTES)?),
                "modules" => {
                    cfg.load_modules = Some(match value {
                        "1" | "yes" | "on" => true,
                        "0" | "no" | "off" => false,
                        _ => return Err(bad(&full, value, "expected 0 or 1")),
                    })
                }
                "workloads" => {
                    let names: Vec<String> = value.split(',').map(str::to_string).collect();
                    for n in &names {
                        if !workloads.contains(&n.as_str()) {
                            return Err(bad(
                                &full,
                                value,
                                &format!("unknown workload '{n}' (known: {})", workloads.join(", ")),
                            ));
                        }
                    }
                    cfg.workloads = Some(names);
                }
                other => match other.split_once('.') {
                    Some((workload, param)) if workloads.contains(&workload) && !param.is_empty() => {
                        let v = serde_json::from_str(value)
                            .unwrap_or_else(|_| serde_json::Value::String(value.to_string()));
                        cfg.params.push((workload.to_string(), param.to_string(), v));
                    }
                    _ => {
                        return Err(SuiteError::UnknownKey {
                            key: full,
                            known: format!("bootbench.{{{}}} and bootbench.<workload>.<param>", KNOWN_KEYS.join(",")),
                        })
                    }
                },
            }
        }
        cfg.check_upload_keys()?;
        cfg.check_storage_keys()?;
        Ok(cfg)
    }

    /// The scratch disk's filesystem and scheduler describe a scratch
    /// disk: without one they would configure nothing. The swap device
    /// cannot also be the scratch disk.
    fn check_storage_keys(&self) -> Result<(), SuiteError> {
        if self.scratch.is_none() {
            let given =
                [("bootbench.scratch_fs", self.scratch_fs.is_some()), ("bootbench.iosched", self.iosched.is_some())];
            if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
                return Err(SuiteError::UnknownKey {
                    key: key.to_string(),
                    known: "it only applies with bootbench.scratch=/dev/NAME".into(),
                });
            }
        }
        if let (Some(scratch), Some(swap)) = (&self.scratch, &self.swap) {
            if scratch == swap {
                return Err(bad("bootbench.swap", swap, "the swap device cannot also be the scratch device"));
            }
        }
        Ok(())
    }

    /// Keys that only make sense together: an upload needs a token, and
    /// network keys without an upload would configure nothing.
    fn check_upload_keys(&self) -> Result<(), SuiteError> {
        if self.upload.is_some() && self.token.is_none() {
            return Err(bad("bootbench.token", "", "required with bootbench.upload (the receiver checks it)"));
        }
        if self.upload.is_none() {
            let given = [
                ("bootbench.token", self.token.is_some()),
                ("bootbench.ip", self.ip.is_some()),
                ("bootbench.gw", self.gw.is_some()),
                ("bootbench.dns", self.dns.is_some()),
                ("bootbench.iface", self.iface.is_some()),
                ("bootbench.upload_attempts", self.upload_attempts.is_some()),
                ("bootbench.upload_timeout", self.upload_timeout_s.is_some()),
            ];
            if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
                return Err(SuiteError::UnknownKey {
                    key: key.to_string(),
                    known: "it only applies with bootbench.upload=URL".into(),
                });
            }
        }
        Ok(())
    }

    /// Applies the overrides to `packed` (the suite in the image). Parameter
    /// overrides for workloads not in the suite are an error, and the
    /// result may name only `workloads`.
    pub fn apply_for(&self, packed: Suite, workloads: &[&str]) -> Result<Suite, SuiteError> {
        let mut suite = match &self.suite {
            Some(name) => Suite::builtin(name)?,
            None => packed,
        };
        if let Some(n) = self.iterations {
            suite.iterations = n;
            suite.workloads.iter_mut().for_each(|w| w.iterations = None);
        }
        if let Some(n) = self.warmup {
            suite.warmup = n;
            suite.workloads.iter_mut().for_each(|w| w.warmup = None);
        }
        if let Some(s) = self.seed {
            suite.seed = s;
        }
        if let Some(w) = self.watchdog_s {
            suite.watchdog_s = w;
        }
        if let Some(names) = &self.workloads {
            let mut picked = Vec::new();
            for n in names {
                let spec = suite.workloads.iter().find(|w| &w.name == n).cloned().unwrap_or(WorkloadSpec {
                    name: n.clone(),
                    iterations: None,
                    warmup: None,
                    params: Default::default(),
                });
                picked.push(spec);
            }
            suite.workloads = picked;
        }
        for (workload, param, value) in &self.params {
            let spec = suite.workloads.iter_mut().find(|w| &w.name == workload).ok_or_else(|| {
                bad(
                    &format!("bootbench.{workload}.{param}"),
                    &value.to_string(),
                    &format!("workload '{workload}' is not in suite '{}'", suite.name),
                )
            })?;
            spec.params.insert(param.clone(), value.clone());
        }
        suite.validate_for(workloads)?;
        Ok(suite)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid() {
        for n in BUILTIN_SUITES {
            Suite::builtin(n).unwrap().validate().unwrap();
        }
        assert!(matches!(Suite::builtin("huge"), Err(SuiteError::UnknownSuite(_))));
    }

    #[test]
    fn cmdline_overrides_apply() {
        let cfg = CmdlineConfig::parse(
            "console=ttyS0 panic=-1 bootbench.iterations=3 bootbench.warmup=0 bootbench.fork.count=77 bootbench.accel=tcg",
        )
        .unwrap();
        let s = cfg.apply(Suite::builtin("quick").unwrap()).unwrap();
        assert_eq!(s.iterations, 3);
        assert_eq!(s.warmup, 0);
        assert_eq!(s.workloads[0].params["count"], serde_json::json!(77));
        assert_eq!(cfg.accel.as_deref(), Some("tcg"));
    }

    #[test]
    fn unknown_key_is_an_error_naming_it() {
        let e = CmdlineConfig::parse("quiet bootbench.itrations=3").unwrap_err();
        assert!(e.to_string().contains("bootbench.itrations"), "{e}");
        let e = CmdlineConfig::parse("bootbench.nosuch.param=1").unwrap_err();
        assert!(matches!(e, SuiteError::UnknownKey { .. }));
    }

    #[test]
    fn bad_values_are_errors_naming_key_and_value() {
        for (line, key) in [
            ("bootbench.iterations=0", "bootbench.iterations"),
            ("bootbench.iterations=many", "bootbench.iterations"),
            ("bootbench.accel=warp", "bootbench.accel"),
            ("bootbench.suite=huge", "bootbench.suite"),
            ("bootbench.workloads=fork,nope", "bootbench.workloads"),
            ("bootbench.watchdog=", "bootbench.watchdog"),
        ] {
            let e = CmdlineConfig::parse(line).unwrap_err().to_string();
            assert!(e.contains(key), "{line}: {e}");
        }
    }

    #[test]
    fn upload_and_network_keys_parse() {
        let cfg = CmdlineConfig::parse(
            "bootbench.upload=http://10.0.2.2:8080 bootbench.token=abc bootbench.ip=10.0.2.15/24 \
             bootbench.gw=10.0.2.2 bootbench.dns=10.0.2.3,1.1.1.1 bootbench.iface=eth1 \
             bootbench.upload_attempts=3 bootbench.upload_timeout=5",
        )
        .unwrap();
        assert_eq!(cfg.upload.as_deref(), Some("http://10.0.2.2:8080"));
        assert_eq!(cfg.token.as_deref(), Some("abc"));
        assert_eq!(cfg.ip, Some(IpSetting::Static { addr: [10, 0, 2, 15].into(), prefix: 24 }));
        assert_eq!(cfg.gw, Some([10, 0, 2, 2].into()));
        assert_eq!(cfg.dns, Some(vec![[10, 0, 2, 3].into(), [1, 1, 1, 1].into()]));
        assert_eq!(cfg.iface.as_deref(), Some("eth1"));
        assert_eq!((cfg.upload_attempts, cfg.upload_timeout_s), (Some(3), Some(5)));
        let cfg = CmdlineConfig::parse("bootbench.upload=https://lab.example/bb bootbench.token=t bootbench.ip=dhcp")
            .unwrap();
        assert_eq!(cfg.ip, Some(IpSetting::Dhcp));
        let cfg = CmdlineConfig::parse("bootbench.upload=http://h bootbench.token=t bootbench.ip=kernel").unwrap();
        assert_eq!(cfg.ip, Some(IpSetting::Kernel));
    }

    #[test]
    fn bad_upload_and_network_values_name_the_key() {
        let up = "bootbench.upload=http://10.0.2.2:1 bootbench.token=t";
        for (extra, key, word) in [
            ("bootbench.ip=10.0.2.15", "bootbench.ip", "ADDR/PREFIX"),
            ("bootbench.ip=10.0.2.300/24", "bootbench.ip", "not an IPv4"),
            ("bootbench.ip=10.0.2.15/33", "bootbench.ip", "prefix"),
            ("bootbench.gw=router", "bootbench.gw", "not an IPv4"),
            ("bootbench.dns=1.1.1.1,x", "bootbench.dns", "'x'"),
            ("bootbench.dns=1.1.1.1,1.1.1.2,1.1.1.3,1.1.1.4", "bootbench.dns", "at most 3"),
            ("bootbench.iface=eth0/x", "bootbench.iface", "interface name"),
            ("bootbench.upload_attempts=0", "bootbench.upload_attempts", "at least 1"),
            ("bootbench.upload_attempts=99", "bootbench.upload_attempts", "at most 20"),
            ("bootbench.upload_timeout=0", "bootbench.upload_timeout", "at least 1"),
        ] {
            let e = CmdlineConfig::parse(&format!("{up} {extra}")).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(word), "{extra}: {e}");
        }
        for (line, word) in [
            ("bootbench.upload=ftp://h bootbench.token=t", "http"),
            ("bootbench.upload=10.0.2.2:8080 bootbench.token=t", "not a URL"),
            ("bootbench.upload=http://u:p@h/ bootbench.token=t", "credentials"),
            ("bootbench.upload=http://h/?x=1 bootbench.token=t", "query"),
        ] {
            let e = CmdlineConfig::parse(line).unwrap_err().to_string();
            assert!(e.contains("bootbench.upload") && e.contains(word), "{line}: {e}");
        }
        let e = CmdlineConfig::parse("bootbench.upload=http://h").unwrap_err().to_string();
        assert!(e.contains("bootbench.token") && e.contains("required"), "{e}");
        let e = CmdlineConfig::parse("bootbench.ip=dhcp").unwrap_err().to_string();
        assert!(e.contains("bootbench.ip") && e.contains("bootbench.upload"), "{e}");
    }

    #[test]
    fn storage_keys_parse() {
        let cfg = CmdlineConfig::parse(
            "bootbench.scratch=/dev/vda bootbench.scratch_fs=ext4 bootbench.swap=/dev/vdb bootbench.iosched=mq-deadline",
        )
        .unwrap();
        assert_eq!(cfg.scratch.as_deref(), Some("/dev/vda"));
        assert_eq!(cfg.scratch_fs.as_deref(), Some("ext4"));
        assert_eq!(cfg.swap.as_deref(), Some("/dev/vdb"));
        assert_eq!(cfg.iosched.as_deref(), Some("mq-deadline"));
        assert_eq!(CmdlineConfig::parse("bootbench.alive=10").unwrap().alive_s, Some(10));
        assert_eq!(CmdlineConfig::parse("bootbench.alive=2").unwrap().alive_s, Some(2));
        for bad_alive in ["bootbench.alive=1", "bootbench.alive=3601", "bootbench.alive=1m"] {
            let e = CmdlineConfig::parse(bad_alive).unwrap_err().to_string();
            assert!(e.contains("bootbench.alive"), "{e}");
        }
        let cfg = CmdlineConfig::parse("bootbench.zram=67108864").unwrap();
        assert_eq!(cfg.zram_bytes, Some(64 << 20));
        for bad_size in ["bootbench.zram=4096", "bootbench.zram=64M", "bootbench.zram=-1"] {
            let e = CmdlineConfig::parse(bad_size).unwrap_err().to_string();
            assert!(e.contains("bootbench.zram"), "{e}");
        }
        let cfg = CmdlineConfig::parse("bootbench.swap=/dev/vda").unwrap();
        assert_eq!((cfg.scratch, cfg.swap.as_deref()), (None, Some("/dev/vda")));
        for s in IO_SCHEDULERS {
            CmdlineConfig::parse(&format!("bootbench.scratch=/dev/vda bootbench.iosched={s}")).unwrap();
        }
    }

    #[test]
    fn bad_storage_keys_name_key_and_problem() {
        for (line, key, word) in [
            ("bootbench.scratch=vda", "bootbench.scratch", "/dev/NAME"),
            ("bootbench.scratch=/dev/", "bootbench.scratch", "/dev/NAME"),
            ("bootbench.scratch=/dev/../etc", "bootbench.scratch", "/dev/NAME"),
            ("bootbench.swap=/dev/disk/by-id/x", "bootbench.swap", "/dev/NAME"),
            ("bootbench.scratch=/dev/vda bootbench.scratch_fs=Ext4!", "bootbench.scratch_fs", "filesystem type"),
            ("bootbench.scratch=/dev/vda bootbench.iosched=cfq", "bootbench.iosched", "mq-deadline, kyber, bfq"),
            ("bootbench.iosched=bfq", "bootbench.iosched", "bootbench.scratch"),
            ("bootbench.scratch_fs=xfs", "bootbench.scratch_fs", "bootbench.scratch"),
            ("bootbench.scratch=/dev/vda bootbench.swap=/dev/vda", "bootbench.swap", "cannot also be"),
        ] {
            let e = CmdlineConfig::parse(line).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains(word), "{line}: {e}");
        }
    }

    #[test]
    fn quoted_words_split_like_the_kernel() {
        assert_eq!(split_cmdline(r#"a "b c" d="e f"  g"#), vec!["a", "b c", "d=e f", "g"]);
    }

    #[test]
    fn suite_file_errors_name_the_file() {
        let e = Suite::from_json("my.json", r#"{"name":"x","workloads":[],"bogus":1}"#).unwrap_err();
        assert!(e.to_string().contains("my.json"));
        let e = Suite::from_json("my.json", r#"{"name":"x","workloads":[]}"#).unwrap_err();
        assert!(matches!(e, SuiteError::Empty(_)));
        let e = Suite::from_json("s", r#"{"name":"x","workloads":[{"name":"nope"}]}"#).unwrap_err();
        assert!(e.to_string().contains("nope"));
    }
}
