//! The build in the pack (`loads::pack_build`) on the host, as kernbench
//! and contest's `pack` foreground run it: a stand-in userland pack made of
//! the host's own programs (its /usr directories bind-mounted read-only)
//! and a tiny kernel tree whose Makefile honours `O=` and kbuild's goal
//! names, the whole pack read-only. Each test assembles the pack in a
//! forked child with its own mount namespace and runs the workload there,
//! so no mount outlives the test. They need root (namespaces, chroot) and
//! the host's make, gcc, ld, cp and find; without them a test says
//! `skipped:` and why, and does nothing.

use loads::userland_pack::{self, PackCommand, PackError};
use loads::workload::RunContext;
use loads::workloads;
use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};
use nix::unistd::{fork, ForkResult};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

const TOOLS: [&str; 5] = ["/usr/bin/make", "/usr/bin/gcc", "/usr/bin/ld", "/bin/cp", "/usr/bin/find"];

/// Why this host cannot run the real path, if it cannot.
fn missing_prerequisite(tools: &[&str]) -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root for mount namespaces and chroot".into());
    }
    tools.iter().find(|t| !Path::new(t).exists()).map(|t| format!("needs {t} on the host"))
}

macro_rules! require {
    ($tools:expr) => {
        if let Some(why) = missing_prerequisite($tools) {
            eprintln!("skipped: {why}");
            return;
        }
    };
}

/// The stand-in for Linux's top Makefile: kbuild's goals (objects,
/// `dir/`, vmlinux, clean), outputs under `O=`. Every compile records the
/// environment it got and appends its object to `compiles.log`.
const MAKEFILE: &str = "\
O ?= .
src := $(CURDIR)
kernel_objs := kernel/fork.o kernel/sched/core.o
mm_objs := mm/mmap.o
ext4_objs := fs/ext4/inode.o
all_objs := $(kernel_objs) $(mm_objs) fs/exec.o $(ext4_objs) block/blk-core.o
.PHONY: kernel/ mm/ fs/ext4/ vmlinux clean $(all_objs)
$(all_objs): %.o: $(O)/%.o
\t@:
kernel/: $(addprefix $(O)/,$(kernel_objs))
mm/: $(addprefix $(O)/,$(mm_objs))
fs/ext4/: $(addprefix $(O)/,$(ext4_objs))
vmlinux: $(addprefix $(O)/,$(all_objs))
\tld -r -o $(O)/vmlinux $^
$(O)/%.o: $(src)/%.c $(O)/include/generated/autoconf.h
\t@mkdir -p $(dir $@)
\tgcc -O2 -include $(O)/include/generated/autoconf.h -c -o $@ $<
\t@echo 'cmd_$@ := gcc' > $(dir $@).$(notdir $@).cmd
\t@echo $@ >> $(O)/compiles.log
\t@env | sort > $(O)/make.env
clean:
\trm -f $(addprefix $(O)/,$(all_objs)) $(O)/vmlinux
\tfind $(O) -name '.*.o.cmd' -delete
";

const SOURCES: [&str; 6] =
    ["kernel/fork.c", "kernel/sched/core.c", "mm/mmap.c", "fs/exec.c", "fs/ext4/inode.c", "block/blk-core.c"];

/// A pack in a temporary directory: mount points for the host's
/// directories, the tree, the prepared output skeleton.
struct FakePack {
    tmp: tempfile::TempDir,
    /// (host directory, mount point in the pack), bound read-only.
    binds: Vec<(PathBuf, PathBuf)>,
}

impl FakePack {
    fn root(&self) -> PathBuf {
        self.tmp.path().join("pack")
    }

    fn work_dir(&self) -> PathBuf {
        self.tmp.path().join("work")
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Mirrors `host` (a directory's entry) at `at`: a symlink as the same
/// symlink, a directory as a mount point to bind.
fn mirror(host: &Path, at: &Path, binds: &mut Vec<(PathBuf, PathBuf)>) {
    let Ok(meta) = std::fs::symlink_metadata(host) else { return };
    if meta.file_type().is_symlink() {
        std::os::unix::fs::symlink(std::fs::read_link(host).unwrap(), at).unwrap();
    } else if meta.is_dir() {
        std::fs::create_dir_all(at).unwrap();
        binds.push((host.to_path_buf(), at.to_path_buf()));
    }
}

/// The fake pack's identity.
const FAKE_PACK_ID: &str = "5e1f0000000000000000000000000000000000000000000000000000000000aa";

fn fake_pack(broken_source: Option<&str>) -> FakePack {
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("pack");
    for d in ["proc", "dev", "tmp", "bootbench/work", "usr/src", "etc"] {
        std::fs::create_dir_all(pack.join(d)).unwrap();
    }
    std::fs::create_dir_all(tmp.path().join("work")).unwrap();
    let mut binds = vec![(PathBuf::from("/etc"), pack.join("etc"))];
    for top in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        mirror(&Path::new("/").join(top), &pack.join(top), &mut binds);
    }
    // All of the host's /usr but its src, where the pack's tree goes.
    for e in std::fs::read_dir("/usr").unwrap() {
        let name = e.unwrap().file_name();
        if name != "src" {
            mirror(&Path::new("/usr").join(&name), &pack.join("usr").join(&name), &mut binds);
        }
    }
    // The preparation's make environment, which every build adds to its own.
    write(&pack.join("bootbench/make.env"), "KBUILD_BUILD_USER=bootbench\nSOURCE_DATE_EPOCH=1\n");
    // Its identity, which the results carry.
    write(&pack.join("bootbench/pack.id"), &format!("{}\n", FAKE_PACK_ID));
    let src = pack.join("usr/src/linux");
    write(&src.join("Makefile"), MAKEFILE);
    for (i, s) in SOURCES.iter().enumerate() {
        let func = s.trim_end_matches(".c").replace(['/', '-'], "_");
        let body = if Some(*s) == broken_source { "return }" } else { "return CONFIG_FAKE;" };
        write(
            &src.join(s),
            &format!("#ifndef CONFIG_FAKE\n#error no autoconf.h\n#endif\nint {func}_{i}(void) {{ {body} }}\n"),
        );
    }
    let obj = pack.join("usr/src/linux-obj");
    for (f, text) in [
        (".config", "CONFIG_FAKE=y\n"),
        ("Makefile", "include /usr/src/linux/Makefile\n"),
        ("include/generated/autoconf.h", "#define CONFIG_FAKE 1\n"),
        ("kernel/bounds.s", "prepared\n"),
        ("kernel/.bounds.s.cmd", "cmd_kernel/bounds.s := gcc\n"),
        ("scripts/kconfig/conf.o", "prepared\n"),
    ] {
        write(&obj.join(f), text);
        // Prepared long before any build, as in the pack.
        let old = SystemTime::now() - Duration::from_secs(30 * 24 * 3600);
        std::fs::File::options().write(true).open(obj.join(f)).unwrap().set_modified(old).unwrap();
    }
    std::os::unix::fs::symlink("/usr/src/linux", obj.join("source")).unwrap();
    FakePack { tmp, binds }
}

fn bind_read_only(from: &Path, to: &Path, recursive: bool) -> nix::Result<()> {
    let none: Option<&str> = None;
    let rec = if recursive { MsFlags::MS_REC } else { MsFlags::empty() };
    mount(Some(from), to, none, MsFlags::MS_BIND | rec, none)?;
    mount(none, to, none, MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY, none)
}

/// Runs `f` in a forked child that has its own mount namespace with the
/// pack assembled (read-only), and returns what it returned. The mounts
/// end with the child.
fn in_pack_namespace(pack: &FakePack, f: impl FnOnce() -> Result<Value, String>) -> Result<Value, String> {
    let (r, w) = nix::unistd::pipe().unwrap();
    let (mut r, w) = (std::fs::File::from(r), std::fs::File::from(w));
    // SAFETY: the child runs the closure and leaves with _exit.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            drop(r);
            let assemble = || -> Result<(), String> {
                let none: Option<&str> = None;
                unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("unshare: {e}"))?;
                mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)
                    .map_err(|e| format!("make / private: {e}"))?;
                bind_read_only(&pack.root(), &pack.root(), false).map_err(|e| format!("pack read-only: {e}"))?;
                for (from, to) in &pack.binds {
                    bind_read_only(from, to, true).map_err(|e| format!("bind {}: {e}", from.display()))?;
                }
                Ok(())
            };
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| assemble().and_then(|()| f())))
                .unwrap_or_else(|_| Err("the closure panicked".into()));
            let mut w = w;
            let _ = w.write_all(serde_json::to_string(&out.map_err(Value::String)).unwrap_or_default().as_bytes());
            drop(w);
            // SAFETY: leaves the child without running the harness's code.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => {
            drop(w);
            let mut text = String::new();
            r.read_to_string(&mut text).unwrap();
            nix::sys::wait::waitpid(child, None).unwrap();
            let out: Result<Value, Value> =
                serde_json::from_str(&text).map_err(|e| format!("child sent {text:?}: {e}"))?;
            out.map_err(|v| v.as_str().unwrap_or_default().to_string())
        }
    }
}

/// Prepares kernbench on the fake pack and runs `iterations`, returning
/// the params, each iteration and what the output tree holds after.
fn run_kernbench(pack: &FakePack, target: &str, jobs: &[&str], iterations: usize) -> Result<Value, String> {
    let (root, work_dir) = (pack.root(), pack.work_dir());
    in_pack_namespace(pack, move || {
        let chain = |e: &dyn std::error::Error| loads::error_chain::error_chain(e);
        let p = json!({ "pack": root, "target": target, "jobs": jobs, "dir": work_dir });
        let ctx = RunContext::new(1, work_dir.clone());
        let mut w = workloads::prepare("kernbench", p.as_object().unwrap(), &ctx).map_err(|e| chain(&e))?;
        let mut its = Vec::new();
        for _ in 0..iterations {
            its.push(serde_json::to_value(w.run_iteration().map_err(|e| chain(&e))?).unwrap());
        }
        let obj = work_dir.join("kernbench/obj");
        let env = std::fs::read_to_string(obj.join("make.env")).unwrap_or_default();
        let compiles = std::fs::read_to_string(obj.join("compiles.log")).unwrap_or_default().lines().count();
        Ok(json!({
            "params": w.params(),
            "iterations": its,
            "bounds_kept": obj.join("kernel/bounds.s").exists() && obj.join("kernel/.bounds.s.cmd").exists(),
            "build_log": work_dir.join("kernbench/build.log").exists(),
            "env": env,
            "compiles": compiles,
        }))
    })
}

fn assert_builds(out: &Value, levels: &[&str], objects: u64, goals: Value) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let its = out["iterations"].as_array().unwrap();
    for it in its {
        let d = &it["detail"];
        assert_eq!(d["goals"], goals, "{d}");
        for l in levels {
            let m = |k: &str| it["metrics"][format!("{k}_{l}")]["value"].as_f64().unwrap_or(f64::NAN);
            let (elapsed, user, sys) = (m("elapsed"), m("user"), m("system"));
            assert!(elapsed > 0.0 && user + sys > 0.0, "{l}: {it}");
            assert!((m("cpu_percent") - (user + sys) / elapsed * 100.0).abs() < 1e-6, "{l}: {it}");
            assert!(m("context_switches") >= 0.0 && m("sleeps") > 0.0, "make waits for its jobs: {l}: {it}");
            assert_eq!(d[format!("objects_{l}")], objects, "{l}: every object rebuilt after the reset: {d}");
        }
        let jobs = |l: &str| d[format!("jobs_{l}")].as_str().map(str::to_string);
        if levels.contains(&"half") {
            assert_eq!(jobs("half"), Some(format!("-j{}", (cpus / 2).max(1))));
        }
        if levels.contains(&"optimal") {
            assert_eq!(jobs("optimal"), Some(format!("-j{}", 4 * cpus)));
        }
        if levels.contains(&"maximal") {
            assert_eq!(jobs("maximal").as_deref(), Some("-j"));
        }
    }
    let builds = its.len() * levels.len();
    assert_eq!(out["compiles"], builds as u64 * objects, "every timed build compiled every object: {out}");
    assert_eq!(out["bounds_kept"], true, "the reset keeps what prepare made: {out}");
    assert_eq!(out["build_log"], true, "make's output goes to the log");
    // The environment is the fixed one: besides it only what make exports
    // (its MAKE* words and the command line's `O=`) and the shell's PWD.
    let made = |l: &&str| ["MAKE", "MFLAGS", "O=", "PWD="].iter().any(|p| l.starts_with(p));
    let env: Vec<&str> = out["env"].as_str().unwrap().lines().filter(|l| !made(l)).collect();
    let want = [
        "HOME=/",
        "KBUILD_BUILD_USER=bootbench",
        "LANG=C",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "SOURCE_DATE_EPOCH=1",
        "TMPDIR=/tmp",
    ];
    assert_eq!(env, want, "{env:?}");
}

fn assert_no_mount_left(pack: &FakePack) {
    for d in ["usr/bin", "proc", "bootbench/work", "etc"] {
        let n = std::fs::read_dir(pack.root().join(d)).unwrap().count();
        assert_eq!(n, 0, "{d} is an empty mount point again once the child is gone");
    }
}

#[test]
fn kernbench_builds_each_target_chrooted_in_a_read_only_pack() {
    require!(&TOOLS);
    let pack = fake_pack(None);
    let out = run_kernbench(&pack, "quick", &["half", "optimal", "max"], 2).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out["params"]["jobs"], json!(["half", "optimal", "maximal"]));
    assert_eq!(out["params"]["target"], "quick");
    assert_eq!(out["params"]["pack_id"], FAKE_PACK_ID, "the pack's identity is a parameter: other packs never compare");
    assert_builds(
        &out,
        &["half", "optimal", "maximal"],
        4,
        json!(["kernel/fork.o", "mm/mmap.o", "fs/exec.o", "block/blk-core.o"]),
    );
    // The real standard and full targets need gigabytes at maximal (see
    // memory_needed_mib); the stand-in tree checks their goals and resets.
    let out = run_kernbench(&pack, "standard", &["half", "optimal"], 2).unwrap_or_else(|e| panic!("{e}"));
    assert_builds(&out, &["half", "optimal"], 4, json!(["kernel/", "mm/", "fs/ext4/"]));
    let out = run_kernbench(&pack, "full", &["optimal", "half"], 2).unwrap_or_else(|e| panic!("{e}"));
    assert_builds(&out, &["optimal", "half"], 6, json!(["vmlinux"]));
    assert_no_mount_left(&pack);
    assert!(!pack.root().join("usr/src/linux/kernel/fork.o").exists(), "nothing is built in the source tree");
}

#[test]
fn kernbench_make_failure_carries_the_exit_status_and_the_log_tail() {
    require!(&TOOLS);
    let pack = fake_pack(Some("block/blk-core.c"));
    let e = run_kernbench(&pack, "quick", &["optimal"], 1).unwrap_err();
    assert!(e.contains("/usr/bin/make -C /usr/src/linux O=/bootbench/work/obj -j"), "{e}");
    assert!(e.contains("failed in the pack (exit status 2)"), "{e}");
    assert!(e.contains("kernbench/build.log:") && e.contains("blk-core.c") && e.contains("error:"), "gcc's words: {e}");
    assert_no_mount_left(&pack);
}

#[test]
fn kernbench_pack_setup_failures_name_the_step_and_the_errno() {
    require!(&[]);
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("pack");
    for d in ["proc", "dev", "tmp", "bootbench/work"] {
        std::fs::create_dir_all(pack.join(d)).unwrap();
    }
    let cmd = |cwd: &str, program: &str| PackCommand {
        pack: pack.clone(),
        work: tmp.path().to_path_buf(),
        cwd: cwd.into(),
        argv: vec![program.into()],
        log: tmp.path().join("log"),
        extra_env: Vec::new(),
        own_group: true,
    };
    let setup = |r: Result<userland_pack::Ran, PackError>| match r {
        Err(e @ PackError::Setup { .. }) => loads::error_chain::error_chain(&e),
        other => panic!("expected a set-up error, got {other:?}"),
    };
    let e = setup(userland_pack::run(&cmd("/bootbench/work/obj", "/usr/bin/make")));
    assert!(e.contains("could not chdir to /bootbench/work/obj in the pack") && e.contains("ENOENT"), "{e}");
    let e = setup(userland_pack::run(&cmd("/", "/usr/bin/make")));
    assert!(e.contains("could not exec /usr/bin/make in the pack") && e.contains("ENOENT"), "{e}");
    std::fs::remove_dir(pack.join("tmp")).unwrap();
    let e = setup(userland_pack::run(&cmd("/", "/usr/bin/make")));
    assert!(e.contains(&format!("could not mount a tmpfs on {}/tmp", pack.display())), "{e}");
    assert!(std::fs::read_dir(pack.join("proc")).unwrap().next().is_none(), "no mount is left behind");
}

/// Prepares contest with the pack foreground on the fake pack, runs one
/// iteration of `rows`, and returns the params, the iteration and the
/// compiles the tree's make log counted.
fn run_contest(pack: &FakePack, rows: &[&str]) -> Result<Value, String> {
    run_contest_with(pack, rows, json!({}))
}

/// [`run_contest`] with more parameters.
fn run_contest_with(pack: &FakePack, rows: &[&str], more: Value) -> Result<Value, String> {
    let (root, work_dir) = (pack.root(), pack.work_dir());
    let rows: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    in_pack_namespace(pack, move || {
        let chain = |e: &dyn std::error::Error| loads::error_chain::error_chain(e);
        // No cache drop: it would be the host's.
        let mut p = json!({
            "build": "pack", "pack": root, "rows": rows, "dir": work_dir, "drop_caches": false,
            "lead_s": 0.2, "mem_bytes": 48u64 << 20, "jobs": 4,
        });
        for (k, v) in more.as_object().unwrap() {
            p[k] = v.clone();
        }
        let ctx = RunContext::new(1, work_dir.clone());
        let mut w = workloads::prepare("contest", p.as_object().unwrap(), &ctx).map_err(|e| chain(&e))?;
        let it = serde_json::to_value(w.run_iteration().map_err(|e| chain(&e))?).unwrap();
        let obj = work_dir.join("contest/linux/obj");
        let compiles = std::fs::read_to_string(obj.join("compiles.log")).unwrap_or_default().lines().count();
        Ok(json!({ "params": w.params(), "iteration": it, "compiles": compiles }))
    })
}

#[test]
fn contest_times_the_pack_build_in_each_row_after_an_untimed_reset() {
    require!(&TOOLS);
    let pack = fake_pack(None);
    let out = run_contest(&pack, &["fork_load", "no_load"]).unwrap_or_else(|e| panic!("{e}"));
    let p = &out["params"];
    assert_eq!((&p["build"], &p["target"], &p["jobs"]), (&json!("pack"), &json!("quick"), &json!(4)), "{p}");
    assert_eq!(p["rows"], json!(["no_load", "fork_load"]), "contest's order");
    assert_eq!(p["pack_id"], FAKE_PACK_ID, "the pack's identity is a parameter: other packs never compare");
    let it = &out["iteration"];
    assert!(it["errors"].as_array().is_none_or(|e| e.is_empty()), "{it}");
    for r in ["no_load", "fork_load"] {
        let m = |k: &str| it["metrics"][format!("{k}_{r}")]["value"].as_f64().unwrap_or(f64::NAN);
        assert!(m("time") > 0.0 && m("cpu_percent") > 0.0, "{r}: {it}");
        let row = it["detail"]["rows"].as_array().unwrap().iter().find(|d| d["row"] == r).unwrap();
        assert_eq!(row["build_objects"], 4, "{r}: every quick object rebuilt after the reset: {row}");
        assert!(row.get("build_execs").is_none(), "the applets' count is the synthetic build's: {row}");
    }
    assert!(it["metrics"]["loads_fork_load"]["value"].as_f64().unwrap() > 0.0, "{it}");
    assert_eq!(it["metrics"]["ratio_no_load"]["value"], 1.0);
    let d = &it["detail"];
    assert_eq!(
        (&d["target"], &d["goals"]),
        (&json!("quick"), &json!(["kernel/fork.o", "mm/mmap.o", "fs/exec.o", "block/blk-core.o"]))
    );
    assert!(d.get("tree_sha256").is_none(), "no synthetic tree: {d}");
    // The untimed warmup build and the two rows' each compiled all four.
    assert_eq!(out["compiles"], 3 * 4, "{out}");
    assert_no_mount_left(&pack);
}

#[test]
fn contest_pack_build_failure_is_the_row_s_error_with_make_s_words() {
    require!(&TOOLS);
    let pack = fake_pack(Some("block/blk-core.c"));
    // The warmup build fails first: contest is not prepared.
    let e = run_contest(&pack, &["no_load"]).unwrap_err();
    assert!(e.contains("contest") && e.contains("failed in the pack (exit status 2)"), "{e}");
    assert!(e.contains("contest/linux/build.log:") && e.contains("blk-core.c"), "{e}");
    assert_no_mount_left(&pack);
}

/// Prepares sdet on the fake pack and runs one iteration at `levels`,
/// returning the params, the iteration and what is left of the homes.
fn run_sdet(pack: &FakePack, levels: &[u32]) -> Result<Value, String> {
    let (root, work_dir) = (pack.root(), pack.work_dir());
    let levels = levels.to_vec();
    in_pack_namespace(pack, move || {
        let chain = |e: &dyn std::error::Error| loads::error_chain::error_chain(e);
        let p = json!({ "pack": root, "levels": levels, "units": 14 });
        let ctx = RunContext::new(1, work_dir.clone());
        let mut w = workloads::prepare("sdet", p.as_object().unwrap(), &ctx).map_err(|e| chain(&e))?;
        let it = serde_json::to_value(w.run_iteration().map_err(|e| chain(&e))?).unwrap();
        let root = work_dir.join("sdet");
        let script = std::fs::read_to_string(root.join("scripts/s0.sh")).unwrap_or_default();
        Ok(json!({
            "params": w.params(),
            "iteration": it,
            "homes_left": root.join("homes").exists(),
            "script": script,
        }))
    })
}

#[test]
fn sdet_runs_real_shell_scripts_of_the_packs_programs_at_each_level() {
    require!(&["/bin/sh", "/usr/bin/cc", "/usr/bin/sed", "/usr/bin/diff", "/usr/bin/find"]);
    let pack = fake_pack(None);
    let out = run_sdet(&pack, &[1, 3]).unwrap_or_else(|e| panic!("{e}"));
    let p = &out["params"];
    assert_eq!(p["pack_id"], FAKE_PACK_ID, "{p}");
    assert_eq!((&p["levels"], &p["units"]), (&json!([1, 3]), &json!(14)), "{p}");
    assert_eq!(workloads::version("sdet"), Some(2), "real scripts are not version 1's applets");
    assert!(p.get("pack").is_none(), "where it is mounted is no parameter: {p}");
    let it = &out["iteration"];
    for n in [1, 3] {
        let m = it["metrics"][format!("scripts_per_hour_{n}")]["value"].as_f64().unwrap();
        let elapsed = it["detail"][format!("elapsed_{n}")].as_f64().unwrap();
        assert!((m - f64::from(n) * 3600.0 / elapsed).abs() < 1e-6 * m, "{n}: {m} scripts/h, {elapsed} s");
        // The shells and every command they ran were reaped under the
        // driver: far more than one process's faults.
        assert!(it["detail"][format!("minor_faults_{n}")].as_u64().unwrap() > 1000, "{it}");
    }
    // 12 one-line units, mkdir/cp/ls/rm and sed/diff.
    assert_eq!(it["detail"]["commands_per_script"], 18, "{it}");
    assert_eq!(out["homes_left"], false, "a level that succeeded leaves no homes");
    // The last level's scripts: one per user, the last user's home.
    let script = out["script"].as_str().unwrap();
    assert!(script.contains("cd /bootbench/work/homes/user0 || fail cd $?"), "{script}");
    assert!(script.contains("cc -O -c -I src/include -o tmp/obj8.o src/"), "{script}");
    assert_no_mount_left(&pack);
}

#[test]
fn a_command_stopped_by_its_caller_is_killed_at_once_and_can_share_the_callers_group() {
    require!(&["/bin/sh", "/bin/sleep"]);
    let pack = fake_pack(None);
    let (root, work_dir) = (pack.root(), pack.work_dir());
    let out = in_pack_namespace(&pack, move || {
        let mut found = Vec::new();
        for own_group in [false, true] {
            let stat = work_dir.join("stat");
            let _ = std::fs::remove_file(&stat);
            let cmd = PackCommand {
                pack: root.clone(),
                work: work_dir.clone(),
                cwd: "/".into(),
                argv: vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "cat /proc/$$/stat > /bootbench/work/stat; exec sleep 60".into(),
                ],
                log: work_dir.join("log"),
                extra_env: Vec::new(),
                own_group,
            };
            let t0 = std::time::Instant::now();
            let stop = || stat.exists() && std::fs::metadata(&stat).is_ok_and(|m| m.len() > 0);
            let ended = userland_pack::run_until(&cmd, Some(&stop)).map_err(|e| e.to_string())?;
            let stat = std::fs::read_to_string(&stat).unwrap_or_default();
            let after_comm: Vec<&str> = stat.rsplit_once(") ").map(|(_, r)| r.split(' ').collect()).unwrap_or_default();
            let (pid, pgrp) = (stat.split(' ').next().unwrap_or(""), after_comm.get(2).copied().unwrap_or(""));
            found.push(json!({
                "stopped": ended == userland_pack::Ended::Stopped,
                "seconds": t0.elapsed().as_secs_f64(),
                "own_group": pgrp == pid,
                "callers_group": pgrp == nix::unistd::getpgrp().as_raw().to_string(),
            }));
        }
        // Without a stop: the program's own time, from its exec to its
        // reaping, within the whole time from the fork.
        let cmd = PackCommand {
            pack: root.clone(),
            work: work_dir.clone(),
            cwd: "/".into(),
            argv: vec!["/bin/sleep".into(), "0.3".into()],
            log: work_dir.join("log"),
            extra_env: Vec::new(),
            own_group: true,
        };
        let ran = userland_pack::run(&cmd).map_err(|e| e.to_string())?;
        found.push(json!({ "from_exec_s": ran.from_exec_s, "elapsed_s": ran.elapsed_s }));
        Ok(json!(found))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let timed = &out[2];
    let (from_exec, elapsed) = (timed["from_exec_s"].as_f64().unwrap(), timed["elapsed_s"].as_f64().unwrap());
    assert!((0.3..1.5).contains(&from_exec) && from_exec < elapsed, "{timed}");
    for (r, own) in out.as_array().unwrap().iter().take(2).zip([false, true]) {
        assert_eq!(r["stopped"], true, "{r}");
        assert!(r["seconds"].as_f64().unwrap() < 10.0, "a 60 s sleep was stopped at once: {r}");
        assert_eq!((&r["own_group"], &r["callers_group"]), (&json!(own), &json!(!own)), "{r}");
    }
    assert_no_mount_left(&pack);
}

#[test]
fn contest_s_tar_and_list_loads_run_the_packs_tar_and_ls_on_a_real_tree_and_stop_at_once() {
    require!(&[
        "/usr/bin/tar",
        "/usr/bin/ls",
        "/usr/bin/rm",
        "/usr/bin/cp",
        "/bin/sh",
        "/usr/bin/make",
        "/usr/bin/gcc"
    ]);
    let pack = fake_pack(None);
    // The fake Linux tree has kernel/, fs/, mm/ and block/; a head start
    // long enough for whole archives of it.
    let more = json!({ "tar_dirs": ["linux/kernel", "linux/fs"], "lead_s": 1.0 });
    let out = run_contest_with(&pack, &["ctar_load", "xtar_load", "list_load"], more).unwrap_or_else(|e| panic!("{e}"));
    let p = &out["params"];
    assert_eq!((&p["load_tools"], &p["tar_dirs"]), (&json!("pack"), &json!(["linux/kernel", "linux/fs"])), "{p}");
    let it = &out["iteration"];
    assert!(it["errors"].as_array().is_none_or(|e| e.is_empty()), "{it}");
    let d = &it["detail"];
    // kernel/fork.c, kernel/sched/core.c, fs/exec.c, fs/ext4/inode.c and
    // their five directories.
    assert_eq!((&d["tree_entries"], d["tree_bytes"].as_u64().unwrap() > 0), (&json!(9), true), "{d}");
    assert!(d["list_roots"].as_array().unwrap().iter().any(|r| r == "/usr"), "{d}");
    assert!(!d["list_roots"].as_array().unwrap().iter().any(|r| r == "/proc" || r == "/dev"), "{d}");
    for (row, unit) in [("ctar_load", "archives"), ("xtar_load", "extractions"), ("list_load", "listings")] {
        let r = d["rows"].as_array().unwrap().iter().find(|r| r["row"] == row).unwrap();
        assert_eq!(r["load_unit"], unit, "{r}");
        // Stopped by the word, the command killed at once: no grace spent,
        // and not the rest of a pass either (a listing of the host's /usr
        // takes a good part of a second).
        assert_eq!(r["load_killed"], false, "{r}");
        let stop = r["load_stop_s"].as_f64().unwrap();
        let pass = r["load_wall_s"].as_f64().unwrap() / r["load_work_total"].as_f64().unwrap().max(1.0);
        eprintln!("{row}: stopped in {stop:.3} s, a pass takes about {pass:.3} s");
        assert!(stop < 0.5, "{r}");
        if row == "list_load" {
            assert!(stop < 0.2 && stop < pass / 2.0, "stopped in {stop} s, a pass takes {pass} s: {r}");
        }
        // The pack's programs ran in the load's group: their CPU is its.
        assert!(r["load_cpu_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    for row in ["ctar_load", "xtar_load"] {
        let total = d["rows"].as_array().unwrap().iter().find(|r| r["row"] == row).unwrap()["load_work_total"].clone();
        assert!(total.as_u64().unwrap() >= 1, "{row}: whole passes in a second's head start: {total}");
    }
    assert_no_mount_left(&pack);
}
