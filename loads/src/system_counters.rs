//! System-wide counters around one measured iteration: snapshots of
//! /proc/stat, /proc/interrupts, /proc/softirqs and /proc/vmstat, and their
//! difference as a [`SystemDeltas`]. Owns reading and parsing those files.
//! Must not do costly work at the iteration's edges: a snapshot is four
//! reads into buffers it keeps from one iteration to the next, and all
//! parsing happens when the difference is taken, after the iteration.
//!
//! The files are text, so parsing is the same on 32- and 64-bit and on
//! either endianness; every count is held as `u64`.

// PID 1 can reach this module (see ARCHITECTURE.md, "PID 1"): no panics.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use crate::schema::{CpuTime, SystemDeltas};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Errors while reading or parsing the counters.
#[derive(Debug, thiserror::Error)]
pub enum SystemCountersError {
    /// A /proc file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line that should hold counts does not.
    #[error("/proc/{file} line {line}: {why}")]
    Parse {
        /// The file under /proc, e.g. `stat`.
        file: &'static str,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    /// A counter every kernel prints is missing.
    #[error("/proc/{file} has no '{what}' line")]
    Missing {
        /// The file under /proc.
        file: &'static str,
        /// The missing line's key.
        what: &'static str,
    },
}

/// The raw text of the four files at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    stat: String,
    interrupts: String,
    softirqs: String,
    vmstat: String,
}

impl Snapshot {
    /// A snapshot of the given texts (fixtures, or files read elsewhere).
    pub fn from_texts(stat: &str, interrupts: &str, softirqs: &str, vmstat: &str) -> Snapshot {
        Snapshot {
            stat: stat.to_string(),
            interrupts: interrupts.to_string(),
            softirqs: softirqs.to_string(),
            vmstat: vmstat.to_string(),
        }
    }

    /// Re-reads the four files under `proc_root` (normally `/proc`) into
    /// this snapshot's buffers, which keep their capacity between reads.
    pub fn read(&mut self, proc_root: &Path) -> Result<(), SystemCountersError> {
        for (name, buf) in [
            ("stat", &mut self.stat),
            ("interrupts", &mut self.interrupts),
            ("softirqs", &mut self.softirqs),
            ("vmstat", &mut self.vmstat),
        ] {
            let path = proc_root.join(name);
            buf.clear();
            std::fs::File::open(&path)
                .and_then(|mut f| f.read_to_string(buf))
                .map_err(|source| SystemCountersError::Read { path, source })?;
        }
        Ok(())
    }

    /// What changed from `earlier` to this snapshot; CPU ticks are divided
    /// by `user_hz` (see [`user_hz`]).
    pub fn delta_since(&self, earlier: &Snapshot, user_hz: u64) -> Result<SystemDeltas, SystemCountersError> {
        let (s0, s1) = (parse_stat(&earlier.stat)?, parse_stat(&self.stat)?);
        let hz = user_hz.max(1) as f64;
        let cpus = s1
            .cpus
            .iter()
            .filter_map(|(cpu, t1)| {
                let t0 = s0.cpus.get(cpu)?;
                let s = |k: usize| {
                    let (a, b) = (t0.get(k).copied().unwrap_or(0), t1.get(k).copied().unwrap_or(0));
                    (i128::from(b) - i128::from(a)) as f64 / hz
                };
                Some(CpuTime {
                    cpu: *cpu,
                    user_s: s(0),
                    nice_s: s(1),
                    system_s: s(2),
                    idle_s: s(3),
                    iowait_s: s(4),
                    irq_s: s(5),
                    softirq_s: s(6),
                    steal_s: s(7),
                })
            })
            .collect();
        Ok(SystemDeltas {
            context_switches: s1.ctxt.saturating_sub(s0.ctxt),
            forks: s1.processes.saturating_sub(s0.processes),
            cpus,
            interrupts: per_cpu_delta(
                &parse_per_cpu("interrupts", &earlier.interrupts)?,
                &parse_per_cpu("interrupts", &self.interrupts)?,
            ),
            softirqs: per_cpu_delta(
                &parse_per_cpu("softirqs", &earlier.softirqs)?,
                &parse_per_cpu("softirqs", &self.softirqs)?,
            ),
            vmstat: vmstat_delta(&parse_vmstat(&earlier.vmstat)?, &parse_vmstat(&self.vmstat)?),
        })
    }
}

/// Clock ticks per second of /proc/stat's CPU times (USER_HZ, from
/// `sysconf(_SC_CLK_TCK)`); 100, what every Linux arch exports, if unknown.
pub fn user_hz() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(hz)) if hz > 0 => hz as u64,
        _ => 100,
    }
}

/// The two snapshots around an iteration, reused from one iteration to the
/// next (what the runner holds).
#[derive(Debug)]
pub struct IterationCounters {
    proc_root: PathBuf,
    user_hz: u64,
    before: Snapshot,
    after: Snapshot,
    started: bool,
}

impl Default for IterationCounters {
    fn default() -> Self {
        IterationCounters::new(PathBuf::from("/proc"))
    }
}

impl IterationCounters {
    /// Counters read from `proc_root` (normally `/proc`).
    pub fn new(proc_root: PathBuf) -> IterationCounters {
        IterationCounters {
            proc_root,
            user_hz: user_hz(),
            before: Snapshot::default(),
            after: Snapshot::default(),
            started: false,
        }
    }

    /// Takes the snapshot before an iteration. A failure is kept quiet
    /// here and makes [`IterationCounters::finish`] return the error.
    pub fn start(&mut self) {
        self.started = self.before.read(&self.proc_root).is_ok();
    }

    /// Takes the snapshot after the iteration and returns the difference.
    pub fn finish(&mut self) -> Result<SystemDeltas, SystemCountersError> {
        if !self.started {
            // Read again only to report why the first read failed.
            self.before.read(&self.proc_root)?;
        }
        self.started = false;
        self.after.read(&self.proc_root)?;
        self.after.delta_since(&self.before, self.user_hz)
    }
}

/// What /proc/stat says that the deltas use.
#[derive(Debug, Default)]
struct StatCounters {
    /// Ticks per CPU: user nice system idle iowait irq softirq steal.
    cpus: BTreeMap<u32, [u64; 8]>,
    ctxt: u64,
    processes: u64,
}

fn parse_u64(file: &'static str, line: usize, word: &str) -> Result<u64, SystemCountersError> {
    word.parse().map_err(|_| SystemCountersError::Parse { file, line, why: format!("'{word}' is not a count") })
}

fn parse_stat(text: &str) -> Result<StatCounters, SystemCountersError> {
    let mut out = StatCounters::default();
    let (mut ctxt, mut processes) = (None, None);
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_ascii_whitespace();
        let Some(key) = words.next() else { continue };
        if let Some(n) = key.strip_prefix("cpu").filter(|n| !n.is_empty()) {
            let cpu: u32 = n.parse().map_err(|_| SystemCountersError::Parse {
                file: "stat",
                line: i + 1,
                why: format!("'{key}' is not cpuN"),
            })?;
            // Older kernels print fewer columns (steal came in 2.6.11); the
            // missing ones stay 0.
            let mut ticks = [0u64; 8];
            for (slot, word) in ticks.iter_mut().zip(words) {
                *slot = parse_u64("stat", i + 1, word)?;
            }
            out.cpus.insert(cpu, ticks);
        } else if key == "ctxt" || key == "processes" {
            let word = words.next().ok_or(SystemCountersError::Parse {
                file: "stat",
                line: i + 1,
                why: format!("'{key}' has no value"),
            })?;
            let v = parse_u64("stat", i + 1, word)?;
            if key == "ctxt" {
                ctxt = Some(v);
            } else {
                processes = Some(v);
            }
        }
    }
    out.ctxt = ctxt.ok_or(SystemCountersError::Missing { file: "stat", what: "ctxt" })?;
    out.processes = processes.ok_or(SystemCountersError::Missing { file: "stat", what: "processes" })?;
    Ok(out)
}

/// One line of /proc/interrupts or /proc/softirqs: its key and per-CPU
/// counts (one count for the lines that are not per CPU, like `ERR`).
type PerCpu<'a> = BTreeMap<&'a str, (String, Vec<u64>)>;

/// Parses /proc/interrupts or /proc/softirqs: a header of `CPUn` columns,
/// then `LABEL: count... [description]` lines. Numbered lines (IRQ
/// numbers) are keyed with their description, since the number alone says
/// nothing; named lines by their name.
fn parse_per_cpu<'a>(file: &'static str, text: &'a str) -> Result<PerCpu<'a>, SystemCountersError> {
    let mut lines = text.lines().enumerate();
    let columns = lines
        .next()
        .map(|(_, header)| header.split_ascii_whitespace().filter(|w| w.starts_with("CPU")).count())
        .filter(|&n| n > 0)
        .ok_or(SystemCountersError::Parse { file, line: 1, why: "no CPU column header".into() })?;
    let mut out = PerCpu::new();
    for (_, line) in lines {
        let Some((label, rest)) = line.split_once(':') else { continue };
        let label = label.trim();
        if label.is_empty() {
            continue;
        }
        let mut counts = Vec::with_capacity(columns);
        let mut words = rest.split_ascii_whitespace().peekable();
        while counts.len() < columns {
            match words.peek().map(|w| w.parse::<u64>()) {
                Some(Ok(v)) => {
                    counts.push(v);
                    words.next();
                }
                _ => break,
            }
        }
        if counts.is_empty() {
            // Not a counter line; skipping it keeps the rest of the file.
            continue;
        }
        let key = if label.bytes().all(|b| b.is_ascii_digit()) {
            let description: Vec<&str> = words.collect();
            if description.is_empty() {
                label.to_string()
            } else {
                format!("{label} {}", description.join(" "))
            }
        } else {
            label.to_string()
        };
        out.insert(label, (key, counts));
    }
    Ok(out)
}

/// The increase of a counter the kernel keeps as `unsigned int` per CPU:
/// a smaller later value is a 32-bit wrap if the earlier one fits 32 bits,
/// else (a 64-bit counter cannot wrap in an iteration) no increase.
fn counter_increase(before: u64, after: u64) -> u64 {
    if after >= before {
        after - before
    } else if before <= u64::from(u32::MAX) {
        after + (1u64 << 32) - before
    } else {
        0
    }
}

fn per_cpu_delta(before: &PerCpu<'_>, after: &PerCpu<'_>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (label, (key, counts)) in after {
        let total = match before.get(label) {
            // Same columns: per CPU, so a wrap on one CPU is seen as such.
            Some((_, earlier)) if earlier.len() == counts.len() => {
                counts.iter().zip(earlier).map(|(&a, &b)| counter_increase(b, a)).sum()
            }
            // CPUs came or went: only the totals can be compared.
            Some((_, earlier)) => counts.iter().sum::<u64>().saturating_sub(earlier.iter().sum()),
            // Registered during the iteration: it counted from zero.
            None => counts.iter().sum(),
        };
        if total != 0 {
            out.insert(key.clone(), total);
        }
    }
    out
}

fn parse_vmstat(text: &str) -> Result<BTreeMap<&str, i128>, SystemCountersError> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let mut words = line.split_ascii_whitespace();
        let (Some(name), Some(value)) = (words.next(), words.next()) else { continue };
        let v: i128 = value.parse().map_err(|_| SystemCountersError::Parse {
            file: "vmstat",
            line: i + 1,
            why: format!("'{name}' has value '{value}', not a number"),
        })?;
        out.insert(name, v);
    }
    Ok(out)
}

fn vmstat_delta(before: &BTreeMap<&str, i128>, after: &BTreeMap<&str, i128>) -> BTreeMap<String, i64> {
    after
        .iter()
        .filter_map(|(name, &v)| {
            let d = v - before.get(name).copied().unwrap_or(0);
            (d != 0).then(|| (name.to_string(), d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_0: &str = "cpu  300 10 200 5000 20 0 5 0 0 0
cpu0 100 10 100 2500 10 0 2 0 0 0
cpu1 200 0 100 2500 10 0 3 0 0 0
intr 11560222 0 0 0
ctxt 1000
btime 1764500000
processes 500
procs_running 1
procs_blocked 0
softirq 100 0 50 0 0 0 0 50 0 0 0
";
    const STAT_1: &str = "cpu  450 10 260 5090 20 0 7 0 0 0
cpu0 180 10 120 2540 10 1 3 4 0 0
cpu1 270 0 140 2550 10 0 4 0 0 0
intr 11570222 0 0 0
ctxt 1750
btime 1764500000
processes 540
procs_running 2
procs_blocked 0
softirq 140 0 70 0 0 0 0 70 0 0 0
";
    // x86 layout: numbered lines with chip, hwirq and handler names; named
    // lines with a description; ERR/MIS with one total count.
    const IRQ_0: &str = "           CPU0       CPU1       
  0:         40          0   IO-APIC   2-edge      timer
 26:          0         15  IO-APIC   4-edge      ttyS0
 31:          0       2726 PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
LOC:     459544 4294967290   Local timer interrupts
RES:        100        200   Rescheduling interrupts
ERR:          0
MIS:          0
";
    const IRQ_1: &str = "           CPU0       CPU1       
  0:         40          0   IO-APIC   2-edge      timer
 26:          3         17  IO-APIC   4-edge      ttyS0
 31:          0       2726 PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
 40:          0          9  PCI-MSIX-0000:00:02.0   0-edge      virtio1-req.0
LOC:     459644          4   Local timer interrupts
RES:        100        200   Rescheduling interrupts
ERR:          2
MIS:          0
";
    // ppc64 pseries layout (XICS), one CPU.
    const IRQ_PPC: &str = "           CPU0       
 16:       1200  XICS   0 Edge      IPI
 19:         30  XICS 4096 Level     hvc_console
LOC:      50000   Local timer interrupts for timer event device
";
    const SOFTIRQ_0: &str = "                    CPU0       CPU1       
          HI:          0          0
       TIMER:        100        200
      NET_RX:          5          5
       SCHED:         50         50
";
    const SOFTIRQ_1: &str = "                    CPU0       CPU1       
          HI:          0          0
       TIMER:        130        210
      NET_RX:          5          5
       SCHED:         51         50
";
    const VMSTAT_0: &str = "nr_free_pages 1000\npgfault 5000\npgmajfault 3\nnr_dirty 0\n";
    const VMSTAT_1: &str = "nr_free_pages 900\npgfault 5400\npgmajfault 3\nnr_dirty 0\nnew_counter 7\n";

    fn deltas() -> SystemDeltas {
        let before = Snapshot::from_texts(STAT_0, IRQ_0, SOFTIRQ_0, VMSTAT_0);
        let after = Snapshot::from_texts(STAT_1, IRQ_1, SOFTIRQ_1, VMSTAT_1);
        after.delta_since(&before, 100).unwrap()
    }

    #[test]
    fn stat_gives_switches_forks_and_per_cpu_seconds() {
        let d = deltas();
        assert_eq!((d.context_switches, d.forks), (750, 40));
        assert_eq!(d.cpus.len(), 2);
        let c0 = &d.cpus[0];
        assert_eq!(c0.cpu, 0);
        assert_eq!((c0.user_s, c0.nice_s, c0.system_s, c0.idle_s), (0.8, 0.0, 0.2, 0.4));
        assert_eq!((c0.iowait_s, c0.irq_s, c0.softirq_s, c0.steal_s), (0.0, 0.01, 0.01, 0.04));
        assert_eq!((d.cpus[1].cpu, d.cpus[1].user_s, d.cpus[1].idle_s), (1, 0.7, 0.5));
    }

    #[test]
    fn user_hz_scales_cpu_time() {
        let before = Snapshot::from_texts(STAT_0, IRQ_0, SOFTIRQ_0, VMSTAT_0);
        let after = Snapshot::from_texts(STAT_1, IRQ_1, SOFTIRQ_1, VMSTAT_1);
        assert_eq!(after.delta_since(&before, 250).unwrap().cpus[0].user_s, 80.0 / 250.0);
        assert_eq!(user_hz(), 100, "Linux exports USER_HZ 100 on every arch");
    }

    #[test]
    fn interrupts_sum_cpus_and_keep_only_changes() {
        let d = deltas();
        let want: BTreeMap<String, u64> = [
            ("26 IO-APIC 4-edge ttyS0", 5),
            ("40 PCI-MSIX-0000:00:02.0 0-edge virtio1-req.0", 9),
            // CPU1's count wrapped at 2^32: 4294967290 -> 4 is 10.
            ("LOC", 100 + 10),
            ("ERR", 2),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        assert_eq!(d.interrupts, want);
    }

    #[test]
    fn ppc64_interrupt_layout_parses() {
        let p = parse_per_cpu("interrupts", IRQ_PPC).unwrap();
        assert_eq!(p["16"], ("16 XICS 0 Edge IPI".to_string(), vec![1200]));
        assert_eq!(p["LOC"], ("LOC".to_string(), vec![50000]));
    }

    #[test]
    fn softirqs_and_vmstat_keep_only_changes_with_sign() {
        let d = deltas();
        let soft: Vec<(&str, u64)> = d.softirqs.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(soft, [("SCHED", 1), ("TIMER", 40)]);
        let vm: Vec<(&str, i64)> = d.vmstat.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(vm, [("new_counter", 7), ("nr_free_pages", -100), ("pgfault", 400)]);
    }

    #[test]
    fn lines_without_counts_are_skipped() {
        let p = parse_per_cpu("softirqs", "CPU0\n TIMER: 5\n NOTE: none here\n").unwrap();
        assert_eq!(p.keys().copied().collect::<Vec<_>>(), ["TIMER"]);
    }

    #[test]
    fn cpu_columns_changing_compares_totals() {
        let one_cpu = "CPU0\n 26: 10 IO-APIC 4-edge ttyS0\n";
        let two_cpus = "CPU0 CPU1\n 26: 10 7 IO-APIC 4-edge ttyS0\n";
        let d = per_cpu_delta(
            &parse_per_cpu("interrupts", one_cpu).unwrap(),
            &parse_per_cpu("interrupts", two_cpus).unwrap(),
        );
        assert_eq!(d["26 IO-APIC 4-edge ttyS0"], 7);
    }

    #[test]
    fn bad_text_is_an_error_naming_file_and_line() {
        let good = Snapshot::from_texts(STAT_0, IRQ_0, SOFTIRQ_0, VMSTAT_0);
        let cases = [
            (
                Snapshot::from_texts("cpu0 1 2 x\nctxt 1\nprocesses 1\n", IRQ_0, SOFTIRQ_0, VMSTAT_0),
                "/proc/stat line 1",
            ),
            (Snapshot::from_texts("cpu0 1 2 3\nprocesses 1\n", IRQ_0, SOFTIRQ_0, VMSTAT_0), "no 'ctxt'"),
            (Snapshot::from_texts(STAT_0, "no header\n", SOFTIRQ_0, VMSTAT_0), "/proc/interrupts line 1"),
            (Snapshot::from_texts(STAT_0, IRQ_0, "TIMER: 1\n", VMSTAT_0), "/proc/softirqs line 1"),
            (Snapshot::from_texts(STAT_0, IRQ_0, SOFTIRQ_0, "pgfault 1\nnr_x many\n"), "/proc/vmstat line 2"),
        ];
        for (bad, want) in cases {
            let e = bad.delta_since(&good, 100).unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
        }
    }

    #[test]
    fn empty_maps_are_left_out_of_the_json() {
        let s = Snapshot::from_texts(STAT_0, IRQ_0, SOFTIRQ_0, VMSTAT_0);
        let d = s.delta_since(&s, 100).unwrap();
        let json = serde_json::to_value(&d).unwrap();
        let keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["context_switches", "cpus", "forks"]);
        let full = deltas();
        let back: SystemDeltas = serde_json::from_str(&serde_json::to_string(&full).unwrap()).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn this_machine_counts_its_own_switches() {
        let mut c = IterationCounters::default();
        c.start();
        for _ in 0..20 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let d = c.finish().unwrap();
        assert!(d.context_switches >= 20, "{d:?}");
        assert!(!d.cpus.is_empty());
        assert!(d.cpus.iter().all(|c| c.user_s >= 0.0 && c.system_s >= 0.0), "{:?}", d.cpus);
    }

    #[test]
    fn a_missing_proc_is_an_error_naming_the_file() {
        let mut c = IterationCounters::new(PathBuf::from("/nonexistent-proc"));
        c.start();
        let e = c.finish().unwrap_err().to_string();
        assert_eq!(e, "cannot read /nonexistent-proc/stat");
    }
}
