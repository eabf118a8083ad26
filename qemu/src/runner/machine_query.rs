//! What a `-machine` name stands for in a given QEMU: the versioned
//! machine type an alias resolves to (`q35` is `pc-q35-10.0` in QEMU 10.0)
//! and that type's default CPU model. Both decide what the guest executes,
//! so an icount figure (a count of guest instructions) depends on them; the
//! results record them so that figures from two hosts can be checked for
//! having run the same virtual machine. Asked through QMP's
//! `query-machines` of a QEMU that boots nothing (`-machine none`).

use super::qemu_process::{guestless_qemu, kill_and_reap, spawn_stderr_reader, wait_bounded};
use serde::Deserialize;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// How long QEMU may take to answer and quit (it takes well under a second).
const QUERY_LIMIT: Duration = Duration::from_secs(10);

/// Why the machine type could not be learned.
#[derive(Debug, thiserror::Error)]
pub enum MachineQueryError {
    /// QEMU could not be started.
    #[error("cannot start {} to ask for its machine types", binary.display())]
    Spawn {
        /// The QEMU binary.
        binary: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// QEMU did not answer and quit in time.
    #[error("{} did not answer query-machines within {limit:?}", binary.display())]
    Timeout {
        /// The QEMU binary.
        binary: PathBuf,
        /// The limit.
        limit: Duration,
    },
    /// Its answer had no list of machines.
    #[error("{} gave no answer to query-machines: {detail}", binary.display())]
    NoAnswer {
        /// The QEMU binary.
        binary: PathBuf,
        /// What it printed (shortened).
        detail: String,
    },
    /// It knows no machine of that name.
    #[error("{} knows no machine type '{machine}'", binary.display())]
    Unknown {
        /// The QEMU binary.
        binary: PathBuf,
        /// The `-machine` name asked for.
        machine: String,
    },
}

/// A machine name as one QEMU resolves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineFacts {
    /// The versioned machine type, e.g. `pc-q35-10.0` for `q35`; the name
    /// itself when it is no alias.
    pub machine_type: String,
    /// The type's default CPU model, e.g. `qemu64-x86_64-cpu`, when QEMU
    /// names one.
    pub default_cpu: Option<String>,
}

/// One entry of QMP's `query-machines`.
#[derive(Debug, Deserialize)]
struct MachineInfo {
    name: String,
    #[serde(default)]
    alias: Option<String>,
    #[serde(default, rename = "default-cpu-type")]
    default_cpu_type: Option<String>,
}

/// Asks `binary` what `machine` (as given to `-machine`) stands for.
pub fn machine_facts(binary: &Path, machine: &str) -> Result<MachineFacts, MachineQueryError> {
    machine_facts_within(binary, machine, QUERY_LIMIT)
}

fn machine_facts_within(binary: &Path, machine: &str, limit: Duration) -> Result<MachineFacts, MachineQueryError> {
    let answer = query_machines(binary, limit)?;
    facts_from_answer(&answer.stdout, machine).map_err(|e| match e {
        AnswerError::NoList(stdout) => {
            // QEMU says why on stderr when it refused to start.
            let said = answer.stderr.trim();
            let detail = if said.is_empty() { stdout } else { said.chars().take(300).collect() };
            MachineQueryError::NoAnswer { binary: binary.into(), detail }
        }
        AnswerError::Unknown => MachineQueryError::Unknown { binary: binary.into(), machine: machine.into() },
    })
}

/// Runs QEMU with QMP on stdio: capabilities, `query-machines`, `quit`.
fn query_machines(binary: &Path, limit: Duration) -> Result<Answer, MachineQueryError> {
    let spawn = |source| MachineQueryError::Spawn { binary: binary.into(), source };
    let mut command = guestless_qemu(binary, &["-qmp", "stdio"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(spawn)?;
    let stderr = child.stderr.take().map(spawn_stderr_reader);
    if let Some(mut stdin) = child.stdin.take() {
        // QMP answers commands in order; a QEMU that exits early closes
        // its stdin, and its stdout then says less.
        let _ = stdin.write_all(
            b"{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-machines\"}\n{\"execute\":\"quit\"}\n",
        );
    }
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = out.read_to_string(&mut text);
            text
        })
    });
    match wait_bounded(&mut child, limit) {
        Ok(Some(_)) => {}
        Ok(None) | Err(_) => {
            let _ = kill_and_reap(&mut child);
            return Err(MachineQueryError::Timeout { binary: binary.into(), limit });
        }
    }
    let stdout = reader.and_then(|r| r.join().ok()).unwrap_or_default();
    let stderr = stderr.and_then(|r| r.join().ok()).unwrap_or_default();
    Ok(Answer { stdout, stderr })
}

/// What QEMU printed.
struct Answer {
    /// QMP's replies, a JSON object per line.
    stdout: String,
    /// Why it refused, when it did.
    stderr: String,
}

/// What was wrong with an answer.
#[derive(Debug, PartialEq)]
enum AnswerError {
    /// No line held the machine list.
    NoList(String),
    /// The list lacks the machine.
    Unknown,
}

/// Finds `machine` (a name or an alias) in QMP's output, a JSON object per
/// line.
fn facts_from_answer(answer: &str, machine: &str) -> Result<MachineFacts, AnswerError> {
    #[derive(Deserialize)]
    struct Reply {
        #[serde(rename = "return")]
        ret: Vec<MachineInfo>,
    }
    let list = answer
        .lines()
        .find_map(|line| serde_json::from_str::<Reply>(line).ok())
        .ok_or_else(|| AnswerError::NoList(answer.chars().take(200).collect()))?
        .ret;
    list.into_iter()
        .find(|m| m.name == machine || m.alias.as_deref() == Some(machine))
        .map(|m| MachineFacts { machine_type: m.name, default_cpu: m.default_cpu_type })
        .ok_or(AnswerError::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"QMP": {"version": {"qemu": {"micro": 2, "minor": 0, "major": 10}}, "capabilities": ["oob"]}}
{"return": {}}
{"return": [{"hotpluggable-cpus": true, "name": "pc-q35-10.0", "default-cpu-type": "qemu64-x86_64-cpu", "alias": "q35"}, {"name": "pc-q35-9.2", "default-cpu-type": "qemu64-x86_64-cpu"}, {"name": "none"}]}
{"return": {}}
{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "SHUTDOWN", "data": {"guest": false, "reason": "host-qmp-quit"}}
"#;

    #[test]
    fn an_alias_resolves_to_its_versioned_type_and_a_type_to_itself() {
        let q35 = facts_from_answer(ANSWER, "q35").unwrap();
        assert_eq!(q35.machine_type, "pc-q35-10.0");
        assert_eq!(q35.default_cpu.as_deref(), Some("qemu64-x86_64-cpu"));
        assert_eq!(facts_from_answer(ANSWER, "pc-q35-9.2").unwrap().machine_type, "pc-q35-9.2");
        assert_eq!(facts_from_answer(ANSWER, "none").unwrap().default_cpu, None);
    }

    #[test]
    fn an_unknown_machine_or_an_answer_without_a_list_is_an_error() {
        assert_eq!(facts_from_answer(ANSWER, "pseries"), Err(AnswerError::Unknown));
        let e = facts_from_answer("qemu-system-x86_64: -qmp stdio: oops\n", "q35").unwrap_err();
        assert!(matches!(&e, AnswerError::NoList(d) if d.contains("oops")), "{e:?}");
    }

    /// The error of asking a fake QEMU (a shell script of `body`) within
    /// `limit`.
    fn fake_qemu_error(body: &str, limit: Duration) -> MachineQueryError {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("qemu-system-x86_64");
        std::fs::write(&fake, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Another test's fork may still hold the just-written script open
        // for writing (ETXTBSY) for a moment.
        loop {
            match machine_facts_within(&fake, "q35", limit) {
                Err(MachineQueryError::Spawn { source, .. }) if source.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                other => break other.unwrap_err(),
            }
        }
    }

    #[test]
    fn a_qemu_that_never_answers_is_killed_at_the_limit() {
        let started = std::time::Instant::now();
        let e = fake_qemu_error("exec sleep 30", Duration::from_millis(300));
        assert!(matches!(e, MachineQueryError::Timeout { .. }), "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "not killed at the limit: {:?}", started.elapsed());
        assert!(e.to_string().contains("did not answer query-machines within 300ms"), "{e}");
    }

    #[test]
    fn a_qemu_that_refuses_is_reported_with_what_it_said() {
        let e = fake_qemu_error("echo 'qemu-system-x86_64: -qmp stdio: could not connect' >&2\nexit 1", QUERY_LIMIT);
        assert!(matches!(e, MachineQueryError::NoAnswer { .. }), "{e:?}");
        assert!(
            e.to_string()
                .ends_with("gave no answer to query-machines: qemu-system-x86_64: -qmp stdio: could not connect"),
            "{e}"
        );
    }

    #[test]
    fn errors_name_the_binary_and_the_machine() {
        let e = machine_facts(Path::new("/nonexistent/qemu-system-x86_64"), "q35").unwrap_err();
        assert!(e.to_string().contains("/nonexistent/qemu-system-x86_64"), "{e}");
        let e = MachineQueryError::Unknown { binary: "/usr/bin/qemu".into(), machine: "q99".into() };
        assert_eq!(e.to_string(), "/usr/bin/qemu knows no machine type 'q99'");
    }
}
