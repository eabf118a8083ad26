//! Tests of the filesystem client: each operation against a real directory,
//! status checks, and refusing symbolic links.

use super::super::loadfile::Loadfile;
use super::*;

fn run(dir: &Path, text: &str) -> Result<FsClient, FsClientError> {
    let lf = Loadfile::parse("t", text.as_bytes()).unwrap();
    let mut c = FsClient::open(dir, 0)?;
    for l in &lf.lines {
        c.execute(l)?;
    }
    Ok(c)
}

#[test]
fn replays_a_client_txt_shaped_sequence() {
    let tmp = tempfile::tempdir().unwrap();
    let c = run(
        tmp.path(),
        r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 16385 NT_STATUS_OK
Close 16385 NT_STATUS_OK
NTCreateX "\clients\client1\mixfile" 0x40 0x1 9935 NT_STATUS_OBJECT_NAME_NOT_FOUND
FIND_FIRST "\clients\client1\FILLER.*" 260 1366 0 NT_STATUS_NO_SUCH_FILE
NTCreateX "\clients\client1\filler.000" 0x40 0x2 9938 NT_STATUS_OK
QUERY_FS_INFORMATION 1 NT_STATUS_OK
WriteX 9938 65534 1 1 NT_STATUS_OK
QUERY_FILE_INFORMATION 9938 258 NT_STATUS_OK
WriteX 9938 0 65536 65536 NT_STATUS_OK
ReadX 9938 0 4096 4096 NT_STATUS_OK
LockX 9938 2147483538 1 NT_STATUS_OK
UnlockX 9938 2147483538 1 NT_STATUS_OK
SET_FILE_INFORMATION 9938 1004 NT_STATUS_OK
Flush 9938 NT_STATUS_OK
Close 9938 NT_STATUS_OK
FIND_FIRST "\clients\client1\FILLER.*" 260 1366 1 NT_STATUS_OK
FIND_FIRST "\clients\client1\*" 260 1366 3 NT_STATUS_OK
FIND_FIRST "\clients\client1\<.JNK" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_PATH_INFORMATION "\clients\client1\FILLER.000" 1004 NT_STATUS_OK
Rename "\clients\client1\filler.000" "\clients\client1\b" NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\filler.000" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\b" 0x6 NT_STATUS_OK
NTCreateX "\clients\client1\d" 0x1 0x2 5 NT_STATUS_OK
Close 5 NT_STATUS_OK
Rmdir "\clients\client1\d" NT_STATUS_OK
"#,
    )
    .unwrap();
    let counters = c.counters();
    assert_eq!(counters["find_count_mismatches"], 0, "{counters:?}");
    assert_eq!(counters["read_size_mismatches"], 0);
    assert_eq!(counters["names_resolved_case_insensitively"], 1, "FILLER.000 found as filler.000");
    assert!(tmp.path().join("clients/client0").is_dir(), "client1 maps to client0");
    assert_eq!(std::fs::read_dir(tmp.path().join("clients/client0")).unwrap().count(), 0);
}

#[test]
fn status_mismatch_names_line_and_op() {
    let tmp = tempfile::tempdir().unwrap();
    let e = run(
        tmp.path(),
        "Mkdir \"\\clients\" NT_STATUS_OK\nMkdir \"\\clients\\client1\" NT_STATUS_OK\nNTCreateX \"\\clients\\client1\\x\" 0x40 0x1 7 NT_STATUS_OK\n",
    )
    .err()
    .unwrap();
    let msg = e.to_string();
    assert!(msg.contains("line 3") && msg.contains("NTCreateX") && msg.contains("ENOENT"), "{msg}");
    let e = run(
        tmp.path(),
        "Mkdir \"\\clients\" NT_STATUS_OK\nMkdir \"\\clients\\client1\" NT_STATUS_OK\nQUERY_PATH_INFORMATION \"\\clients\\client1\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND\n",
    )
    .err()
    .unwrap();
    assert!(matches!(&e, FsClientError::Status { line: 3, got, .. } if got == "success"), "{e}");
}

#[test]
fn unknown_handles_and_short_writes_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let e = run(tmp.path(), "ReadX 44 0 10 10 NT_STATUS_OK\n").err().unwrap();
    assert!(matches!(e, FsClientError::UnknownHandle { line: 1, handle: 44, .. }), "{e}");
    let e = run(tmp.path(), "Close 4 NT_STATUS_OK\n").err().unwrap();
    assert!(e.to_string().contains("handle 4 is not open"), "{e}");
    let e = run(
        tmp.path(),
        "Mkdir \"\\clients\" NT_STATUS_OK\nMkdir \"\\clients\\client1\" NT_STATUS_OK\nNTCreateX \"\\clients\\client1\\x\" 0x40 0x2 7 NT_STATUS_OK\nWriteX 7 0 10 12 NT_STATUS_OK\n",
    )
    .err()
    .unwrap();
    assert!(matches!(e, FsClientError::ShortWrite { line: 4, got: 10, .. }), "{e}");
}

#[test]
fn symbolic_links_are_refused_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"keep").unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("clients/client0")).unwrap();
    // A link planted in the client's directory before the run is
    // removed, not followed, when the client starts.
    std::os::unix::fs::symlink(outside.path(), root.join("clients/client0/out")).unwrap();
    let mut c = FsClient::open(&root, 0).unwrap();
    assert!(!root.join("clients/client0").exists());
    assert!(outside.path().join("secret").exists());
    // A link that appears during the run is refused at the line using it.
    std::fs::create_dir_all(root.join("clients/client0")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), root.join("clients/client0/ln")).unwrap();
    let lf = Loadfile::parse(
        "t",
        b"QUERY_PATH_INFORMATION \"\\clients\\client1\\ln\" 1004 NT_STATUS_OK\nNTCreateX \"\\clients\\client1\\ln\" 0x40 0x1 3 NT_STATUS_OK\nUnlink \"\\clients\\client1\\ln\" 0 NT_STATUS_OK\n",
    )
    .unwrap();
    for l in &lf.lines {
        let e = c.execute(l).unwrap_err();
        assert!(matches!(e, FsClientError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains(&format!("line {}", l.number)), "{e}");
    }
    assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"keep");
    // A `clients` link planted in the replay directory stops the client
    // before it removes anything through it.
    let root2 = tmp.path().join("root2");
    std::fs::create_dir_all(outside.path().join("client0")).unwrap();
    std::fs::create_dir_all(&root2).unwrap();
    std::os::unix::fs::symlink(outside.path(), root2.join("clients")).unwrap();
    let e = FsClient::open(&root2, 0).err().unwrap();
    assert!(matches!(e, FsClientError::Setup { .. }), "{e}");
    assert!(outside.path().join("client0").is_dir());
}

#[test]
fn deltree_never_follows_links_out() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"keep").unwrap();
    std::fs::create_dir(outside.path().join("dir")).unwrap();
    std::fs::write(outside.path().join("dir/file"), b"keep").unwrap();
    let root = tmp.path();
    let mut c = FsClient::open(root, 0).unwrap();
    std::fs::create_dir_all(root.join("clients/client0/sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("clients/client0/sub/out")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("dir"), root.join("clients/client0/dirlink")).unwrap();
    let lf = Loadfile::parse("t", b"Deltree \"\\clients\\client1\" NT_STATUS_OK\n").unwrap();
    c.execute(&lf.lines[0]).unwrap();
    // The links are unlinked like files, never walked.
    assert!(std::fs::symlink_metadata(root.join("clients/client0/sub/out")).is_err());
    assert!(std::fs::symlink_metadata(root.join("clients/client0/dirlink")).is_err());
    assert!(root.join("clients/client0/sub").is_dir(), "directories stay, as in dbench");
    assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"keep");
    assert_eq!(std::fs::read(outside.path().join("dir/file")).unwrap(), b"keep");
    // A Deltree whose own path is a link leaves it and what it points to.
    std::os::unix::fs::symlink(outside.path(), root.join("clients/client0/sub/tree")).unwrap();
    let lf = Loadfile::parse("t", b"Deltree \"\\clients\\client1\\sub\\tree\" NT_STATUS_OK\n").unwrap();
    c.execute(&lf.lines[0]).unwrap();
    assert_eq!(std::fs::read(outside.path().join("secret")).unwrap(), b"keep");
    assert_eq!(std::fs::read(outside.path().join("dir/file")).unwrap(), b"keep");
}

#[test]
fn deltree_removes_files_and_leaves_directories_as_dbench_does() {
    let tmp = tempfile::tempdir().unwrap();
    let own = tmp.path().join("clients/client0");
    let mut c = FsClient::open(tmp.path(), 0).unwrap();
    std::fs::create_dir_all(own.join("a/b/c")).unwrap();
    for f in ["f", "a/g", "a/b/h", "a/b/c/i"] {
        std::fs::write(own.join(f), b"x").unwrap();
    }
    let lf = Loadfile::parse("t", b"Deltree \"\\clients\\client1\" NT_STATUS_OK\n").unwrap();
    c.execute(&lf.lines[0]).unwrap();
    let mut left: Vec<String> = walkdir::WalkDir::new(&own)
        .into_iter()
        .map(|e| e.unwrap().path().strip_prefix(&own).unwrap().display().to_string())
        .collect();
    left.sort();
    assert_eq!(left, ["", "a", "a/b", "a/b/c"], "every file went, every directory stayed");
    // The rest of a replay copes with what stayed: Mkdir of a directory
    // that exists is fine, a Rmdir's status is still checked, and a look
    // that expects a missing name accepts a directory Deltree left (and
    // counts it), but not one the loadfile made again.
    let c = {
        let lf = Loadfile::parse(
            "t",
            br#"QUERY_PATH_INFORMATION "\clients\client1\a" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
FIND_FIRST "\clients\client1\a\b" 260 1366 1 NT_STATUS_NO_SUCH_FILE
Mkdir "\clients\client1\a" NT_STATUS_OK
Rmdir "\clients\client1\a\b\c" NT_STATUS_OK
Rmdir "\clients\client1\a" NT_STATUS_DIRECTORY_NOT_EMPTY
NTCreateX "\clients\client1\a\b" 0x1 0x2 7 NT_STATUS_OK
Close 7 NT_STATUS_OK
"#,
        )
        .unwrap();
        for l in &lf.lines {
            c.execute(l).unwrap_or_else(|e| panic!("{e}"));
        }
        c
    };
    assert_eq!(c.counters()["deltree_leftovers_found"], 2);
    let mut c = c;
    for (text, line) in [
        (
            "QUERY_PATH_INFORMATION \"\\clients\\client1\\a\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND\n",
            "made again by Mkdir",
        ),
        ("QUERY_PATH_INFORMATION \"\\clients\\client1\\a\\b\" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND\n", "by NTCreateX"),
    ] {
        let lf = Loadfile::parse("t", text.as_bytes()).unwrap();
        let e = c.execute(&lf.lines[0]).unwrap_err();
        assert!(matches!(&e, FsClientError::Status { got, .. } if got == "success"), "{line}: {e}");
    }
}

#[test]
fn expected_failures_are_accepted_and_mkdir_is_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    run(
        tmp.path(),
        r#"Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x2 1 NT_STATUS_OK
NTCreateX "\clients\client1\nope" 0x40 0x1 2 NT_STATUS_OBJECT_NAME_NOT_FOUND
Unlink "\clients\client1\nope" 0x6 NT_STATUS_OBJECT_NAME_NOT_FOUND
Rename "\clients\client1\nope" "\clients\client1\x" NT_STATUS_OBJECT_NAME_NOT_FOUND
QUERY_PATH_INFORMATION "\clients\client1\a\b" 1004 NT_STATUS_OBJECT_PATH_NOT_FOUND
FIND_FIRST "\clients\client1\nodir\*" 260 1366 0 NT_STATUS_OBJECT_PATH_NOT_FOUND
Deltree "\clients\client1\nothing" NT_STATUS_OK
NTCreateX "\clients\client1" 0x0 0x1 3 NT_STATUS_OK
Close 3 NT_STATUS_OK
Close 1 NT_STATUS_OK
"#,
    )
    .unwrap();
}

/// The metadata of `path`.
fn meta(path: &Path) -> std::fs::Metadata {
    std::fs::symlink_metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn nt_create_opens_with_dbench_4s_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let own = tmp.path().join("clients/client0");
    run(
        tmp.path(),
        r#"Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x1 1 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x5 2 NT_STATUS_OK
WriteX 2 0 16 16 NT_STATUS_OK
Close 2 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x2 3 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x0 4 NT_STATUS_OK
NTCreateX "\clients\client1\new" 0x40 0x3 5 NT_STATUS_OBJECT_NAME_NOT_FOUND
NTCreateX "\clients\client1\new" 0x40 0x0 6 NT_STATUS_OBJECT_NAME_NOT_FOUND
NTCreateX "\clients\client1\d" 0x1 0x1 7 NT_STATUS_OK
NTCreateX "\clients\client1\d" 0x40 0x1 8 NT_STATUS_OK
NTCreateX "\clients\client1\d" 0x1 0x5 9 NT_STATUS_OK
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // FILE_OPEN of a directory made it (dbench makes it whatever the
    // disposition); FILE_CREATE of an existing file opened it (O_CREAT,
    // no O_EXCL) and, like FILE_SUPERSEDE, kept its data; FILE_OPEN_IF
    // and FILE_SUPERSEDE create nothing; a directory opened as a file was
    // opened again as a directory.
    assert!(own.join("d").is_dir());
    assert_eq!(meta(&own.join("f")).len(), 16);
    assert!(!own.join("new").exists());
    run(
        tmp.path(),
        r#"Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x2 2 NT_STATUS_OK
WriteX 2 0 16 16 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x4 3 NT_STATUS_OK
NTCreateX "\clients\client1\missing" 0x40 0x4 4 NT_STATUS_OK
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // FILE_OVERWRITE truncates and, in dbench, creates a missing file too
    // (O_CREAT|O_TRUNC, as for FILE_OVERWRITE_IF).
    assert_eq!(meta(&own.join("f")).len(), 0);
    assert!(own.join("missing").is_file());
}

#[test]
fn set_file_information_sets_times_through_the_path_at_any_level() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let own = tmp.path().join("clients/client0");
    let lf = Loadfile::parse(
        "t",
        br#"Mkdir "\clients" NT_STATUS_OK
Mkdir "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x2 1 NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x1 2 NT_STATUS_OK
SET_FILE_INFORMATION 1 1005 NT_STATUS_OK
SET_FILE_INFORMATION 2 1004 NT_STATUS_OK
SET_FILE_INFORMATION 1 1004 NT_STATUS_OK
"#,
    )
    .unwrap();
    let mut c = FsClient::open(tmp.path(), 0).unwrap();
    for l in &lf.lines[..4] {
        c.execute(l).unwrap();
    }
    let (f0, d0) = (meta(&own.join("f")), meta(&own));
    c.execute(&lf.lines[4]).unwrap();
    c.execute(&lf.lines[5]).unwrap();
    let (f1, d1) = (meta(&own.join("f")), meta(&own));
    // dbench: utime(path, {atime - 10, mtime - 12}), in whole seconds.
    assert_eq!((f1.atime(), f1.atime_nsec()), (f0.atime() - 10, 0), "level 1005 sets the times too");
    assert_eq!((f1.mtime(), f1.mtime_nsec()), (f0.mtime() - 12, 0));
    assert_eq!((d1.atime(), d1.mtime()), (d0.atime() - 10, d0.mtime() - 12), "a directory handle too");
    // By path: once the name is gone, the call fails.
    std::fs::rename(own.join("f"), own.join("g")).unwrap();
    let e = c.execute(&lf.lines[6]).unwrap_err();
    assert!(matches!(&e, FsClientError::Status { line: 7, got, .. } if got.contains("ENOENT")), "{e}");
}

#[test]
fn query_fs_information_asks_about_the_replay_directory_by_its_path() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let lf = Loadfile::parse("t", b"QUERY_FS_INFORMATION 259 NT_STATUS_OK\n").unwrap();
    let mut c = FsClient::open(&root, 0).unwrap();
    c.execute(&lf.lines[0]).unwrap();
    // dbench calls statvfs(directory): a path walk, which fails once the
    // path is gone (a descriptor's fstatvfs would not).
    std::fs::rename(&root, tmp.path().join("moved")).unwrap();
    let e = c.execute(&lf.lines[0]).unwrap_err();
    assert!(matches!(&e, FsClientError::Status { line: 1, got, .. } if got.contains("ENOENT")), "{e}");
}

#[test]
fn a_client_stays_in_its_directory() {
    // Planted before the client starts: its directory holds a link to a
    // directory outside the replay directory, where client.txt's first
    // directory goes.
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("WORD")).unwrap();
    std::fs::write(outside.path().join("WORD/keep.doc"), b"keep").unwrap();
    let listing = |dir: &Path| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = walkdir::WalkDir::new(dir)
            .into_iter()
            .map(|e| e.unwrap())
            .map(|e| (e.path().display().to_string(), e.metadata().unwrap().len()))
            .collect();
        v.sort();
        v
    };
    let before = listing(outside.path());
    let root = tmp.path();
    std::fs::create_dir_all(root.join("clients/client0")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("clients/client0/~dmtmp")).unwrap();
    let text = std::fs::read_to_string(CLIENT_TXT).unwrap_or_else(|e| panic!("{CLIENT_TXT}: {e}"));
    // Setup, fillers, the WORD directory and its first documents.
    let slice: String = text.lines().take(2_000).flat_map(|l| [l, "\n"]).collect();
    let lf = Loadfile::parse("slice", slice.as_bytes()).unwrap();
    let mut c = FsClient::open(root, 0).unwrap();
    for l in &lf.lines {
        c.execute(l).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(meta(&root.join("clients/client0/~dmtmp")).is_dir(), "the link went; the replay made a directory");
    assert!(root.join("clients/client0/~dmtmp/WORD").read_dir().unwrap().count() > 0);
    assert_eq!(listing(outside.path()), before, "nothing outside changed");
    // A `..` out of the client's directory is refused when the loadfile
    // is read, naming the line.
    let e = Loadfile::parse(
        "climb",
        b"Mkdir \"\\clients\" NT_STATUS_OK\nDeltree \"\\clients\\client1\\~dmtmp\\..\\..\\client2\" NT_STATUS_OK\n",
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("line 2") && msg.contains("climbs out of the client's directory"), "{msg}");
}

const CLIENT_TXT: &str = "/usr/share/dbench/client.txt";

#[test]
fn client_txt_replays_twice_with_the_directories_deltree_leaves() {
    let text = std::fs::read(CLIENT_TXT).unwrap_or_else(|e| panic!("{CLIENT_TXT}: {e}"));
    let lf = Loadfile::parse(CLIENT_TXT, &text).unwrap();
    // On a tmpfs when there is one: client.txt flushes often.
    let shm = Path::new("/dev/shm");
    let tmp = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
    let mut c = FsClient::open(tmp.path(), 0).unwrap();
    for _pass in 0..2 {
        c.close_all();
        for l in &lf.lines {
            c.execute(l).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let counters = c.counters();
    // The second pass looks for \clients\client1\~dmtmp before making it.
    assert_eq!(counters["deltree_leftovers_found"], 1, "{counters:?}");
    assert_eq!(counters["find_count_mismatches"], 0, "{counters:?}");
    let own = tmp.path().join("clients/client0");
    let files = walkdir::WalkDir::new(&own).into_iter().filter(|e| !e.as_ref().unwrap().file_type().is_dir()).count();
    assert_eq!(files, 0, "the closing Deltree removed every file");
    assert!(own.join("~dmtmp/WORD").is_dir(), "and left the directories");
}

/// Each line's system calls, as the kernel saw them (consecutive
/// `getdents` calls, which depend on libc's buffer, count as one).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn calls_of(c: &mut FsClient, text: &str) -> Vec<(Vec<String>, Vec<crate::workloads::nbench::seen_syscalls::Call>)> {
    let lf = Loadfile::parse("t", text.as_bytes()).unwrap();
    lf.lines
        .iter()
        .map(|l| {
            let (r, calls) = crate::workloads::nbench::seen_syscalls::seen_syscalls(|| c.execute(l));
            r.unwrap_or_else(|e| panic!("{e}"));
            let mut shown: Vec<String> = calls.iter().map(ToString::to_string).collect();
            shown.dedup_by(|a, b| a == "getdents" && b == "getdents");
            (shown, calls)
        })
        .collect()
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn each_operation_makes_dbench_4s_system_calls() {
    use std::os::fd::AsRawFd;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let mut c = FsClient::open(root, 0).unwrap();
    let root_fd = c.root.as_raw_fd() as u64;
    calls_of(
        &mut c,
        r#"Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 1 NT_STATUS_OK
NTCreateX "\clients\client1\f" 0x40 0x2 2 NT_STATUS_OK
WriteX 2 0 4096 4096 NT_STATUS_OK
Close 2 NT_STATUS_OK
Close 1 NT_STATUS_OK
Mkdir "\clients\client1\d" NT_STATUS_OK
"#,
    );
    let steps = calls_of(
        &mut c,
        r#"NTCreateX "\clients\client1\f" 0x40 0x1 5 NT_STATUS_OK
NTCreateX "\clients\client1\g" 0x40 0x2 6 NT_STATUS_OK
NTCreateX "\clients\client1\d" 0x1 0x1 7 NT_STATUS_OK
SET_FILE_INFORMATION 5 1005 NT_STATUS_OK
QUERY_FS_INFORMATION 259 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\f" 1004 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\nope" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
FIND_FIRST "\clients\client1\*" 260 1366 5 NT_STATUS_OK
QUERY_FILE_INFORMATION 5 1004 NT_STATUS_OK
LockX 5 10 1 NT_STATUS_OK
UnlockX 5 10 1 NT_STATUS_OK
ReadX 5 0 100 100 NT_STATUS_OK
Flush 5 NT_STATUS_OK
Close 5 NT_STATUS_OK
Unlink "\clients\client1\g" 0x6 NT_STATUS_OK
"#,
    );
    let root_path = root.display().to_string();
    // What Debian's dbench 4.0 does for the same lines (strace), but for
    // its paths, which are absolute, and its utime, which follows links.
    // A directory is listed the way glibc's opendir/readdir/closedir do.
    let listing = ["open clients/client0", "fstat", "getdents", "close"];
    let want: [&[&str]; 15] = [
        &["stat clients/client0/f", "open clients/client0/f", "fstat"],
        &[&["stat clients/client0/g"], &listing[..], &["open clients/client0/g", "fstat"]].concat(),
        &["stat clients/client0/d", "mkdir clients/client0/d", "open clients/client0/d", "fstat"],
        &["fstat", "utime clients/client0/f"],
        &[&format!("statfs {root_path}")],
        &["stat clients/client0/f"],
        &[&["stat clients/client0/nope"], &listing[..]].concat(),
        &[&["stat clients/client0/*"], &listing[..], &listing[..]].concat(),
        &["fstat"],
        &["fcntl"],
        &["fcntl"],
        &["pread"],
        &["fsync"],
        &["close"],
        &["stat clients/client0/g", "unlink clients/client0/g"],
    ];
    for (i, ((shown, _), want)) in steps.iter().zip(want).enumerate() {
        assert_eq!(shown, want, "line {}", i + 1);
    }
    // The opens: O_RDWR with no O_CREAT for FILE_OPEN, O_CREAT and no
    // O_EXCL for FILE_CREATE, a directory read-only; times set relative
    // to the replay directory without following a link; locks wait.
    let open_flags = |step: usize, nth: usize| {
        steps[step].1.iter().filter(|c| c.kind == "open").nth(nth).map(|c| c.args[2] as i32).unwrap()
    };
    let create = libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;
    assert_eq!(open_flags(0, 0) & (libc::O_ACCMODE | create), libc::O_RDWR);
    assert_eq!(open_flags(1, 1) & (libc::O_ACCMODE | create), libc::O_RDWR | libc::O_CREAT);
    assert_eq!(open_flags(2, 0) & (libc::O_ACCMODE | libc::O_DIRECTORY), libc::O_RDONLY | libc::O_DIRECTORY);
    let utime = &steps[3].1[1];
    assert_eq!((utime.args[0], utime.args[3] as i32), (root_fd, libc::AT_SYMLINK_NOFOLLOW));
    for step in [9, 10] {
        assert_eq!(steps[step].1[0].args[1] as i32, libc::F_SETLKW, "LockX/UnlockX wait, as dbench's");
    }
}

#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[test]
fn deltree_makes_dbench_4s_system_calls() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = FsClient::open(tmp.path(), 0).unwrap();
    let own = tmp.path().join("clients/client0");
    std::fs::create_dir_all(own.join("d/e")).unwrap();
    for f in ["f", "d/g", "d/e/h"] {
        std::fs::write(own.join(f), b"x").unwrap();
    }
    let steps = calls_of(&mut c, "Deltree \"\\clients\\client1\" NT_STATUS_OK\n");
    let (shown, calls) = &steps[0];
    // Entries come in the directory's order; what matters is which calls.
    let with = |kind: &str| -> Vec<String> {
        let mut v: Vec<String> =
            calls.iter().filter(|c| c.kind == kind).map(|c| c.path.clone().unwrap_or_default()).collect();
        v.sort();
        v
    };
    let p = |s: &[&str]| -> Vec<String> { s.iter().map(|x| format!("clients/client0{x}")).collect() };
    assert_eq!(with("open"), p(&["", "/d", "/d/e"]), "{shown:?}");
    assert_eq!(with("stat"), p(&["/d", "/d/e", "/d/e/h", "/d/g", "/f"]), "{shown:?}");
    assert_eq!(with("unlink"), p(&["/d/e/h", "/d/g", "/f"]), "{shown:?}");
    assert_eq!(with("rmdir"), Vec::<String>::new(), "directories stay: {shown:?}");
    assert_eq!(with("close").len(), 3, "{shown:?}");
    assert_eq!(with("fstat").len(), 3, "each directory checked once it is open, as opendir does: {shown:?}");
}
