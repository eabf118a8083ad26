//! The config file from the command line: `bootbench config show` prints
//! the values a file sets and where each came from, `config path` where the
//! file is, a flag given on the command line wins over the file, and a bad
//! file is refused naming the file and the key. No boots: `kernel check`
//! stands for the commands that take the kernel cache.

mod support;

use std::path::Path;
use std::time::Duration;
use support::*;

const DEADLINE: Duration = Duration::from_secs(60);

/// `bootbench ARGS` with the config file at `config` and no
/// `BOOTBENCH_CACHE` or XDG variable from the test's own environment.
fn with_config(config: &Path, args: &[&str]) -> CliRun {
    let mut c = bootbench(args);
    c.env("BOOTBENCH_CONFIG", config).env_remove("BOOTBENCH_CACHE").env_remove("XDG_CACHE_HOME");
    run_with_deadline(c, DEADLINE)
}

/// The `config show` row of `key`: its value and source, cut at the
/// header's columns.
fn row<'a>(table: &'a str, key: &str) -> (&'a str, &'a str) {
    let header = table.lines().find(|l| l.starts_with("KEY ")).unwrap_or_else(|| panic!("no header: {table}"));
    let (value_at, source_at) = (header.find("VALUE").unwrap(), header.find("SOURCE").unwrap());
    let line = table.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_else(|| panic!("no {key}"));
    (line[value_at..source_at].trim_end(), &line[source_at..])
}

#[test]
fn config_show_prints_the_files_values_and_where_each_came_from() {
    let dir = scratch();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[upload]\nurl = \"https://lab.example:8443\"\ntoken_file = \"lab.token\"\n\n\
         [kernel]\ncache = \"kernels\"\n\n[machine]\nsmp = 4\nmem = \"2G\"\n",
    )
    .unwrap();
    let file = config.display().to_string();
    let path = with_config(&config, &["config", "path"]);
    path.assert_success();
    assert_eq!(path.stdout.trim(), file);

    let show = with_config(&config, &["config", "show"]);
    show.assert_success();
    let t = &show.stdout;
    assert!(t.starts_with(&format!("config file  {file}\n")), "{t}");
    assert_eq!(row(t, "upload.url"), ("https://lab.example:8443", file.as_str()));
    let token = dir.path().join("lab.token").display().to_string();
    assert_eq!(row(t, "upload.token_file"), (token.as_str(), file.as_str()), "relative to the file's directory");
    let kernels = dir.path().join("kernels").display().to_string();
    assert_eq!(row(t, "kernel.cache"), (kernels.as_str(), file.as_str()));
    assert_eq!(row(t, "machine.smp"), ("4", file.as_str()));
    assert_eq!(row(t, "machine.mem"), ("2G", file.as_str()));
    assert_eq!(row(t, "machine.accel"), ("auto", "default"));
    assert_eq!(row(t, "upload.ca_file"), ("(none)", "default"));

    // The environment wins over the file, and says so.
    let mut c = bootbench(["config", "show", "--json"]);
    c.env("BOOTBENCH_CONFIG", &config).env("BOOTBENCH_CACHE", "/env/kernels");
    let json = run_with_deadline(c, DEADLINE);
    json.assert_success();
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let value = |key: &str| doc["values"].as_array().unwrap().iter().find(|v| v["key"] == key).unwrap().clone();
    assert_eq!(
        value("kernel.cache"),
        serde_json::json!({"key": "kernel.cache", "value": "/env/kernels", "source": "environment", "from": "BOOTBENCH_CACHE"})
    );
    assert_eq!(
        value("machine.smp"),
        serde_json::json!({"key": "machine.smp", "value": "4", "source": "file", "from": file})
    );
    assert_eq!((doc["file"].as_str(), doc["found"].as_bool()), (Some(file.as_str()), Some(true)));

    // No file: every value is the default.
    let none = with_config(&dir.path().join("missing.toml"), &["config", "show"]);
    none.assert_success();
    assert!(none.stdout.contains("(not found: built-in defaults)"), "{}", none.stdout);
    assert_eq!(row(&none.stdout, "machine.smp"), ("(2, or 1 with --clock icount)", "default"));
    assert_eq!(row(&none.stdout, "upload.url"), ("(none: no upload)", "default"));
}

#[test]
fn a_flag_wins_over_the_file_and_the_file_over_the_default() {
    let dir = scratch();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[kernel]\ncache = \"from-file\"\n").unwrap();
    let check = |extra: &[&str]| {
        let mut args = vec!["kernel", "check", "--arch", "x86_64"];
        args.extend(extra);
        let run = with_config(&config, &args);
        assert_eq!(run.code(), Some(1), "{}", run.transcript());
        run.stderr
    };
    let from_file = dir.path().join("from-file").display().to_string();
    let e = check(&[]);
    assert!(e.contains(&format!("no x86_64 kernel in {from_file}:")), "{e}");
    let flag = dir.path().join("from-flag").display().to_string();
    let e = check(&["--cache", &flag]);
    assert!(e.contains(&format!("no x86_64 kernel in {flag}:")), "{e}");
}

#[test]
fn a_bad_file_is_refused_naming_the_file_the_key_and_the_line() {
    let dir = scratch();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[machine]\nsmp = 2\ncpus = 4\n").unwrap();
    for args in [&["config", "show"][..], &["kernel", "check", "--arch", "x86_64"]] {
        let run = with_config(&config, args);
        assert_eq!(run.code(), Some(1), "{}", run.transcript());
        let e = &run.stderr;
        assert!(e.contains(&format!("the config file {}: key `machine.cpus`", config.display())), "{e}");
        assert!(e.contains("line 3, column 1") && e.contains("unknown field `cpus`"), "{e}");
    }
    // A command that takes nothing from the file does not read it.
    let report = with_config(&config, &["report", "/nonexistent/results.json"]);
    assert!(!report.stderr.contains("config file"), "{}", report.transcript());
}
