//! The `bootbench.*` kernel cmdline keys: splitting the cmdline as the
//! kernel does, parsing and checking every key, redacting secrets, and
//! applying the overrides to a suite. It must not depend on any workload:
//! the names it accepts are passed in.

// PID 1 runs this module: no panics (see ARCHITECTURE.md, "PID 1").
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use super::builtin::BUILTIN_SUITES;
use super::document::{Suite, SuiteError, WorkloadSpec, LIMITS};
use crate::lab_protocol;
use std::net::{Ipv4Addr, SocketAddrV4};

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
    /// `bootbench.token=TOKEN`: the upload's bearer token, for a guest whose
    /// initramfs has no secrets segment ([`crate::guest_secrets`], which
    /// wins when both are there). Discouraged: the cmdline is readable by
    /// every process of the guest and, on a host, in QEMU's argv.
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
    /// `bootbench.scratch_label=LABEL`: the scratch filesystem is the one
    /// ext2/3/4 filesystem whose volume label is LABEL, on whatever disk or
    /// partition holds it (a lab machine's dedicated partition, made with
    /// `mke2fs -L LABEL`); the init checks the label before it mounts
    /// anything, and empties the filesystem before the workloads. Not with
    /// `bootbench.scratch`.
    pub scratch_label: Option<String>,
    /// `bootbench.scratch_fs=TYPE`: its filesystem (default `ext4`; only
    /// with `bootbench.scratch` or `bootbench.scratch_label`).
    pub scratch_fs: Option<String>,
    /// `bootbench.swap=/dev/NAME`: a block device the init enables as swap.
    pub swap: Option<String>,
    /// `bootbench.iosched=NAME`: the block scheduler for the scratch device
    /// (one of [`IO_SCHEDULERS`]; only with `bootbench.scratch`).
    pub iosched: Option<String>,
    /// `bootbench.pack=SERIAL`: the read-only disk with this virtio serial
    /// holds the userland pack; the init mounts it at [`PACK_MOUNT`].
    pub pack: Option<String>,
    /// `bootbench.pack_label=LABEL`: a lab machine's pack store, the one
    /// ext2/3/4 filesystem with this volume label, holds the userland pack
    /// as a file its agent fetched ([`crate::lab_protocol::pack_store_file`]);
    /// the init mounts the store read-only and the pack from it, through a
    /// read-only loop device, at [`PACK_MOUNT`]. Needs
    /// `bootbench.pack_sha256`; not with `bootbench.pack`.
    pub pack_label: Option<String>,
    /// `bootbench.pack_sha256=HEX`: which pack of the store (its image's
    /// sha256, checked by the agent when it fetched it).
    pub pack_sha256: Option<String>,
    /// `bootbench.zram=BYTES`: a compressed RAM swap device of this size
    /// (zram0), used before any disk swap ([`MIN_ZRAM_BYTES`] at least).
    pub zram_bytes: Option<u64>,
    /// `bootbench.lava=0|1`: also print the lines LAVA's `monitors` test
    /// action reads ([`crate::lava_lines`]; default 0).
    pub lava: Option<bool>,
    /// `bootbench.role=agent|candidate` ([`lab_protocol::ROLE_KEY`]):
    /// what the init does (default: the suite, `candidate`).
    pub role: Option<Role>,
    /// `bootbench.lab=URL` ([`lab_protocol::LAB_URL_KEY`]): the lab
    /// receiver's base URL (only with `bootbench.role=agent`, which needs it).
    pub lab: Option<String>,
    /// `bootbench.machine=NAME` ([`lab_protocol::MACHINE_KEY`]): this
    /// machine's name at the lab receiver (only with, and needed by,
    /// `bootbench.role=agent`).
    pub machine: Option<String>,
    /// `bootbench.after=poweroff|reboot|halt` ([`lab_protocol::AFTER_KEY`]):
    /// how the run ends (default: power off).
    pub after: Option<AfterRun>,
    /// `bootbench.netconsole=IPV4:PORT` ([`lab_protocol::NETCONSOLE_KEY`]):
    /// send the kernel's messages there with netconsole, set up before the
    /// first workload.
    pub netconsole: Option<SocketAddrV4>,
    /// `bootbench.hw_watchdog=SECONDS` ([`lab_protocol::HW_WATCHDOG_KEY`]):
    /// arm the hardware watchdog with this timeout (within
    /// [`LIMITS`]`.hw_watchdog_s`, 0 = off; more than twice the `alive`
    /// interval, at which PID 1 pets it).
    pub hw_watchdog_s: Option<u64>,
    /// `bootbench.lab_job=ID` ([`lab_protocol::JOB_KEY`]): the lab job this
    /// candidate boots for.
    pub lab_job: Option<u64>,
    /// `bootbench.<workload>.<param>=VALUE` parameter overrides, in order.
    pub params: Vec<(String, String, serde_json::Value)>,
    /// `bootbench.test_fault=NAME[,NAME...]`: faults to inject, for bootbench's
    /// own fault-matrix tests only (each one of [`TEST_FAULTS`]). The init
    /// records every injected fault as an error in the result, so a run
    /// with one can never pass for a clean measurement.
    pub test_faults: Vec<String>,
}

/// The faults `bootbench.test_fault` can inject (test-only; see
/// ARCHITECTURE.md, "Fault matrix"):
/// - `kernel-panic`: after the first workload's result is printed, crash
///   the kernel through /proc/sysrq-trigger;
/// - `init-panic`: after the first workload, panic inside PID 1;
/// - `silence`: after the first workload, PID 1 stops printing and sleeps
///   without end (the host sees a silent guest);
/// - `segv`: the first workload's child dies of SIGSEGV before it measures;
/// - `orphans`: the first workload's child leaves a tree of processes that
///   ignore SIGTERM, in their own session, behind it;
/// - `late-hang`: a step after the result is printed blocks without end.
pub const TEST_FAULTS: &[&str] = &["kernel-panic", "init-panic", "silence", "segv", "orphans", "late-hang"];

/// What the init is in this boot (`bootbench.role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Role {
    /// Runs the suite and reports (the default).
    #[default]
    Candidate,
    /// A lab machine's agent: asks the lab receiver for jobs and kexecs
    /// their kernels; never runs the suite.
    Agent,
}

/// How a run ends once its result is out (`bootbench.after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AfterRun {
    /// Power off (the default; QEMU exits).
    #[default]
    PowerOff,
    /// Reboot (a lab machine's default boot brings its agent back).
    Reboot,
    /// Halt without powering off.
    Halt,
}

impl AfterRun {
    /// The ending a value of the key names.
    pub fn from_value(value: &str) -> Option<AfterRun> {
        match value {
            "poweroff" => Some(AfterRun::PowerOff),
            "reboot" => Some(AfterRun::Reboot),
            "halt" => Some(AfterRun::Halt),
            _ => None,
        }
    }

    /// The ending `cmdline` asks for, read from that key alone: for a
    /// cmdline the full parse refused (a bad value in another key), so a
    /// lab candidate with a configuration error still reboots into its
    /// agent rather than powering the machine off. The last valid value
    /// wins, as in the full parse.
    pub fn from_raw_cmdline(cmdline: &str) -> Option<AfterRun> {
        let key = format!("{}=", lab_protocol::AFTER_KEY);
        split_cmdline(cmdline)
            .into_iter()
            .filter_map(|w| w.strip_prefix(key.as_str()).and_then(AfterRun::from_value))
            .next_back()
    }

    /// The key's value for this ending.
    pub fn name(self) -> &'static str {
        match self {
            AfterRun::PowerOff => "poweroff",
            AfterRun::Reboot => "reboot",
            AfterRun::Halt => "halt",
        }
    }
}

/// The longest `bootbench.scratch_label`: an ext2/3/4 volume name.
pub const MAX_SCRATCH_LABEL: usize = 16;

/// Whether `label` can be a `bootbench.scratch_label` (and `bootbench lab
/// machine add --scratch-label`): 1 to [`MAX_SCRATCH_LABEL`] letters,
/// digits, '.', '_' or '-'.
pub fn valid_scratch_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= MAX_SCRATCH_LABEL
        && label.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Block schedulers `bootbench.iosched` may name (what blk-mq offers).
pub const IO_SCHEDULERS: &[&str] = &["none", "mq-deadline", "kyber", "bfq"];

/// Smallest `bootbench.zram`: ten 64 KiB pages, the least swapon takes on
/// any arch's page size, rounded up to 1 MiB.
pub const MIN_ZRAM_BYTES: u64 = LIMITS.zram_bytes.0;

/// The virtio serial of the userland pack's disk, as the host attaches it.
pub const PACK_SERIAL: &str = "bootbench-pack";
/// Where the init mounts the userland pack (read-only).
pub const PACK_MOUNT: &str = "/pack";
/// The userland pack's filesystem.
pub const PACK_FS: &str = "ext4";

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

/// Checks a volume label (`bootbench.scratch_label`,
/// `bootbench.pack_label`): what an ext2/3/4 superblock's volume name
/// holds.
fn parse_label(key: &str, value: &str) -> Result<String, SuiteError> {
    if !valid_scratch_label(value) {
        return Err(bad(
            key,
            value,
            &format!("expected a volume label of 1 to {MAX_SCRATCH_LABEL} letters, digits, '.', '_' or '-'"),
        ));
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
    "scratch_label",
    "scratch_fs",
    "swap",
    "iosched",
    "zram",
    "pack",
    "pack_label",
    "pack_sha256",
    "alive",
    "lava",
    "test_fault",
    "role",
    "lab",
    "machine",
    "after",
    "netconsole",
    "hw_watchdog",
    "lab_job",
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

/// A 0|1 key (`yes`/`no` and `on`/`off` too).
fn parse_switch(key: &str, value: &str) -> Result<bool, SuiteError> {
    match value {
        "1" | "yes" | "on" => Ok(true),
        "0" | "no" | "off" => Ok(false),
        _ => Err(bad(key, value, "expected 0 or 1")),
    }
}

/// `IPV4:PORT`, the port 1..=65535.
fn parse_udp_target(key: &str, value: &str) -> Result<SocketAddrV4, SuiteError> {
    let Some((addr, port)) = value.rsplit_once(':') else {
        return Err(bad(key, value, "expected IPV4:PORT (e.g. 10.0.2.2:6666)"));
    };
    let addr = parse_ipv4(key, value, addr)?;
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| bad(key, value, "the port must be a number from 1 to 65535"))?;
    if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() {
        return Err(bad(key, value, "expected the address of one host"));
    }
    Ok(SocketAddrV4::new(addr, port))
}

fn parse_ipv4(key: &str, value: &str, text: &str) -> Result<Ipv4Addr, SuiteError> {
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

/// A whole number within `range` (inclusive, from [`LIMITS`]).
fn parse_num<T>(key: &str, value: &str, range: (u64, u64)) -> Result<T, SuiteError>
where
    T: TryFrom<u64>,
{
    let v: u64 = value.parse().map_err(|_| bad(key, value, "expected a whole number"))?;
    if v < range.0 {
        return Err(bad(key, value, &format!("must be at least {}", range.0)));
    }
    if v > range.1 {
        return Err(bad(key, value, &format!("must be at most {}", range.1)));
    }
    T::try_from(v).map_err(|_| bad(key, value, "too large"))
}

/// Parts of a key's last dotted component that make its value a secret
/// (compared ASCII case-insensitively): `bootbench.token`, and any other
/// token-like key a user or lab adds (`lab.api_token`, `x.password`).
const SECRET_KEY_PARTS: &[&str] = &["token", "secret", "password", "passwd"];

/// Whether the cmdline key `key` (as [`split_cmdline`] reads it, quotes
/// removed) holds a secret.
pub fn is_secret_key(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    SECRET_KEY_PARTS.iter().any(|p| last.contains(p))
}

/// The value `cmdline` words substitute for a secret.
pub const REDACTED: &str = "<redacted>";

/// `cmdline` with every word whose key is a secret ([`is_secret_key`])
/// replaced by `KEY=<redacted>`, for results and logs. Words are found as
/// [`split_cmdline`] finds them (the kernel's quoting: whitespace outside
/// double quotes ends a word), so a quoted value, a quote inside the key or
/// tabs between words cannot carry a secret past it; everything else is
/// kept byte for byte.
///
/// ```
/// let c = loads::suite::redact_secrets("console=ttyS0 bootbench.token=s3cret quiet");
/// assert_eq!(c, "console=ttyS0 bootbench.token=<redacted> quiet");
/// let c = loads::suite::redact_secrets("a\t\"bootbench.token=s3 cret\" b");
/// assert_eq!(c, "a\tbootbench.token=<redacted> b");
/// ```
pub fn redact_secrets(cmdline: &str) -> String {
    let mut out = String::with_capacity(cmdline.len());
    let mut kept = 0;
    for (span, word) in cmdline_words(cmdline) {
        let Some((key, _)) = word.split_once('=') else { continue };
        if !is_secret_key(key) {
            continue;
        }
        out.push_str(cmdline.get(kept..span.start).unwrap_or_default());
        out.push_str(key);
        out.push('=');
        out.push_str(REDACTED);
        kept = span.end;
    }
    out.push_str(cmdline.get(kept..).unwrap_or_default());
    out
}

/// The values of the secret keys of `cmdline` ([`is_secret_key`]), as the
/// guest reads them: what must not appear in anything recorded.
pub fn secret_values(cmdline: &str) -> Vec<String> {
    cmdline_words(cmdline)
        .into_iter()
        .filter_map(|(_, w)| w.split_once('=').filter(|(k, _)| is_secret_key(k)).map(|(_, v)| v.to_string()))
        .filter(|v| !v.is_empty())
        .collect()
}

/// Splits a kernel cmdline into words, honouring double quotes as the
/// kernel does (`key="a b"` is one word, quotes removed).
pub fn split_cmdline(cmdline: &str) -> Vec<String> {
    cmdline_words(cmdline).into_iter().map(|(_, w)| w).collect()
}

/// [`split_cmdline`]'s words with the byte range each spans in `cmdline`
/// (quotes included).
fn cmdline_words(cmdline: &str) -> Vec<(std::ops::Range<usize>, String)> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut start = None;
    for (i, c) in cmdline.char_indices() {
        match c {
            c if c.is_whitespace() && !in_quotes => {
                if let Some(s) = start.take() {
                    words.push((s..i, std::mem::take(&mut cur)));
                }
            }
            '"' => {
                in_quotes = !in_quotes;
                start.get_or_insert(i);
            }
            c => {
                cur.push(c);
                start.get_or_insert(i);
            }
        }
    }
    if let Some(s) = start {
        words.push((s..cmdline.len(), cur));
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
                        return Err(bad(&full, value, &format!("expected one of {}", BUILTIN_SUITES.join(", "))));
                    }
                    cfg.suite = Some(value.to_string());
                }
                "iterations" => cfg.iterations = Some(parse_num(&full, value, LIMITS.iterations)?),
                "warmup" => cfg.warmup = Some(parse_num(&full, value, LIMITS.warmup)?),
                "seed" => cfg.seed = Some(parse_num(&full, value, (0, u64::MAX))?),
                "watchdog" => cfg.watchdog_s = Some(parse_num(&full, value, LIMITS.watchdog_s)?),
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
                "upload_attempts" => cfg.upload_attempts = Some(parse_num(&full, value, LIMITS.upload_attempts)?),
                "upload_timeout" => cfg.upload_timeout_s = Some(parse_num(&full, value, LIMITS.upload_timeout_s)?),
                "scratch" => cfg.scratch = Some(parse_block_device(&full, value)?),
                "scratch_label" => cfg.scratch_label = Some(parse_label(&full, value)?),
                "swap" => cfg.swap = Some(parse_block_device(&full, value)?),
                "pack" => {
                    // What a virtio-blk serial can hold whole.
                    let ok = !value.is_empty()
                        && value.len() <= 20
                        && value.chars().all(|c| c.is_ascii_alphanumeric() || "_-".contains(c));
                    if !ok {
                        return Err(bad(&full, value, "expected a disk serial of 1 to 20 letters, digits, '_' or '-'"));
                    }
                    cfg.pack = Some(value.to_string());
                }
                "pack_label" => cfg.pack_label = Some(parse_label(&full, value)?),
                "pack_sha256" => {
                    if !lab_protocol::valid_sha256(value) {
                        return Err(bad(&full, value, "expected a sha256 of 64 lower-case hex digits"));
                    }
                    cfg.pack_sha256 = Some(value.to_string());
                }
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
                "alive" => cfg.alive_s = Some(parse_num(&full, value, LIMITS.alive_s)?),
                "zram" => cfg.zram_bytes = Some(parse_num(&full, value, LIMITS.zram_bytes)?),
                "modules" => cfg.load_modules = Some(parse_switch(&full, value)?),
                "lava" => cfg.lava = Some(parse_switch(&full, value)?),
                "role" => {
                    cfg.role = Some(match value {
                        "agent" => Role::Agent,
                        "candidate" => Role::Candidate,
                        _ => return Err(bad(&full, value, "expected agent or candidate")),
                    })
                }
                "lab" => {
                    check_upload_url(&full, value)?;
                    cfg.lab = Some(value.to_string());
                }
                "machine" => {
                    if !lab_protocol::valid_machine_name(value) {
                        return Err(bad(
                            &full,
                            value,
                            &format!(
                                "a machine name has 1 to {} letters, digits, '-', '_' or '.', and does not start with '.'",
                                lab_protocol::MAX_MACHINE_NAME
                            ),
                        ));
                    }
                    cfg.machine = Some(value.to_string());
                }
                "after" => {
                    cfg.after = Some(
                        AfterRun::from_value(value)
                            .ok_or_else(|| bad(&full, value, "expected poweroff, reboot or halt"))?,
                    )
                }
                "netconsole" => cfg.netconsole = Some(parse_udp_target(&full, value)?),
                "hw_watchdog" => cfg.hw_watchdog_s = Some(parse_num(&full, value, LIMITS.hw_watchdog_s)?),
                "lab_job" => cfg.lab_job = Some(parse_num(&full, value, (0, u64::MAX))?),
                "test_fault" => {
                    for f in value.split(',') {
                        if !TEST_FAULTS.contains(&f) {
                            return Err(bad(&full, value, &format!("expected one of {}", TEST_FAULTS.join(", "))));
                        }
                        cfg.test_faults.push(f.to_string());
                    }
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
        cfg.check_lab_keys()?;
        Ok(cfg)
    }

    /// The role this boot has (`bootbench.role`, default candidate).
    pub fn role(&self) -> Role {
        self.role.unwrap_or_default()
    }

    /// The hardware watchdog's timeout, when one is asked for (0 is off).
    pub fn hw_watchdog(&self) -> Option<u64> {
        self.hw_watchdog_s.filter(|s| *s > 0)
    }

    /// An agent needs its receiver and its name, which nothing else uses;
    /// a hardware watchdog pet at every `alive` tick must outlast two of
    /// them (one late tick must not reset a healthy machine).
    fn check_lab_keys(&self) -> Result<(), SuiteError> {
        let agent = self.role() == Role::Agent;
        for (key, given) in
            [(lab_protocol::LAB_URL_KEY, self.lab.is_some()), (lab_protocol::MACHINE_KEY, self.machine.is_some())]
        {
            if agent && !given {
                return Err(SuiteError::UnknownKey {
                    key: key.to_string(),
                    known: "bootbench.role=agent needs bootbench.lab=URL and bootbench.machine=NAME".into(),
                });
            }
            if !agent && given {
                return Err(SuiteError::UnknownKey {
                    key: key.to_string(),
                    known: "it only applies with bootbench.role=agent".into(),
                });
            }
        }
        if let Some(s) = self.hw_watchdog() {
            let alive = self.alive_s.unwrap_or(crate::console_protocol::ALIVE_INTERVAL_S);
            if s <= alive.saturating_mul(2) {
                return Err(bad(
                    lab_protocol::HW_WATCHDOG_KEY,
                    &s.to_string(),
                    &format!(
                        "must exceed twice the alive interval ({alive} s), at which the init pets the watchdog while a workload runs"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The scratch disk's filesystem and scheduler describe a scratch
    /// disk: without one they would configure nothing. The swap device
    /// cannot also be the scratch disk.
    fn check_storage_keys(&self) -> Result<(), SuiteError> {
        match (&self.pack_label, &self.pack_sha256, &self.pack) {
            (Some(label), Some(_), Some(_)) => {
                return Err(bad(
                    "bootbench.pack_label",
                    label,
                    "give the pack by disk serial or by store label, not both",
                ))
            }
            (Some(label), None, _) => {
                return Err(bad("bootbench.pack_label", label, "needs bootbench.pack_sha256, the pack in the store"))
            }
            (None, Some(sha), _) => {
                return Err(bad("bootbench.pack_sha256", sha, "needs bootbench.pack_label, the store that holds it"))
            }
            _ => {}
        }
        if let (Some(pack), Some(scratch)) = (&self.pack_label, &self.scratch_label) {
            if pack == scratch {
                return Err(bad(
                    "bootbench.pack_label",
                    pack,
                    "the pack store cannot be the scratch filesystem (which is emptied before each run)",
                ));
            }
        }
        if let (Some(_), Some(label)) = (&self.scratch, &self.scratch_label) {
            return Err(bad("bootbench.scratch_label", label, "give the scratch disk by device or by label, not both"));
        }
        if let (Some(fs), Some(_)) = (&self.scratch_fs, &self.scratch_label) {
            if !["ext2", "ext3", "ext4"].contains(&fs.as_str()) {
                return Err(bad(
                    "bootbench.scratch_fs",
                    fs,
                    "a filesystem found by bootbench.scratch_label is ext2, ext3 or ext4 (its label is read from that superblock)",
                ));
            }
        }
        if self.scratch.is_none() && self.scratch_label.is_none() {
            let given =
                [("bootbench.scratch_fs", self.scratch_fs.is_some()), ("bootbench.iosched", self.iosched.is_some())];
            if let Some((key, _)) = given.iter().find(|(_, g)| *g) {
                return Err(SuiteError::UnknownKey {
                    key: key.to_string(),
                    known: "it only applies with bootbench.scratch=/dev/NAME or bootbench.scratch_label=LABEL".into(),
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

    /// Keys that only make sense together: network keys without anything
    /// that uses the network (an upload, an agent, netconsole) would
    /// configure nothing, nor would a token without an upload or an agent.
    fn check_upload_keys(&self) -> Result<(), SuiteError> {
        let agent = self.role() == Role::Agent;
        let network = self.upload.is_some() || agent || self.netconsole.is_some();
        let checks = [
            ("bootbench.token", self.token.is_some(), self.upload.is_some() || agent),
            ("bootbench.ip", self.ip.is_some(), network),
            ("bootbench.gw", self.gw.is_some(), network),
            ("bootbench.dns", self.dns.is_some(), network),
            ("bootbench.iface", self.iface.is_some(), network),
            ("bootbench.upload_attempts", self.upload_attempts.is_some(), self.upload.is_some()),
            ("bootbench.upload_timeout", self.upload_timeout_s.is_some(), self.upload.is_some()),
        ];
        if let Some((key, _, _)) = checks.iter().find(|(_, given, used)| *given && !*used) {
            let known = match *key {
                "bootbench.upload_attempts" | "bootbench.upload_timeout" => "it only applies with bootbench.upload=URL",
                "bootbench.token" => "it only applies with bootbench.upload=URL or bootbench.role=agent",
                _ => "it only applies with bootbench.upload=URL, bootbench.role=agent or bootbench.netconsole=IP:PORT",
            };
            return Err(SuiteError::UnknownKey { key: key.to_string(), known: known.into() });
        }
        Ok(())
    }

    /// Applies the overrides to `packed` (the suite in the image). Parameter
    /// overrides for workloads not in the suite are an error, and the
    /// result may name only `workloads`. `bootbench.suite=NAME` is the
    /// built-in suite as built for this program's arch (the guest's).
    pub fn apply_for(&self, packed: Suite, workloads: &[&str]) -> Result<Suite, SuiteError> {
        let mut suite = match &self.suite {
            Some(name) => Suite::builtin_for(name, std::env::consts::ARCH)?,
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
