//! Tests of the filesystem client: each operation against a real directory,
//! status checks, and refusing symbolic links.

use super::super::loadfile::Loadfile;
use super::*;

fn run(dir: &Path, text: &str) -> Result<FsClient, FsClientError> {
    let lf = Loadfile::parse("t", text.as_bytes()).unwrap();
    let mut c = FsClient::open(dir, 0, lf.max_io_size())?;
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
    let mut c = FsClient::open(&root, 0, 16).unwrap();
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
    let e = FsClient::open(&root2, 0, 16).err().unwrap();
    assert!(matches!(e, FsClientError::Setup { .. }), "{e}");
    assert!(outside.path().join("client0").is_dir());
}

#[test]
fn deltree_never_follows_links_out() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), b"keep").unwrap();
    let root = tmp.path();
    let mut c = FsClient::open(root, 0, 16).unwrap();
    std::fs::create_dir_all(root.join("clients/client0/sub")).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("clients/client0/sub/out")).unwrap();
    let lf = Loadfile::parse("t", b"Deltree \"\\clients\\client1\" NT_STATUS_OK\n").unwrap();
    c.execute(&lf.lines[0]).unwrap();
    assert!(!root.join("clients/client0").exists());
    assert!(outside.path().join("secret").exists());
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
NTCreateX "\clients\client1\f" 0x40 0x2 2 NT_STATUS_OBJECT_NAME_COLLISION
Unlink "\clients\client1\nope" 0x6 NT_STATUS_OBJECT_NAME_NOT_FOUND
Rename "\clients\client1\nope" "\clients\client1\x" NT_STATUS_OBJECT_NAME_NOT_FOUND
QUERY_PATH_INFORMATION "\clients\client1\a\b" 1004 NT_STATUS_OBJECT_PATH_NOT_FOUND
FIND_FIRST "\clients\client1\nodir\*" 260 1366 0 NT_STATUS_OBJECT_PATH_NOT_FOUND
Deltree "\clients\client1\nothing" NT_STATUS_OK
NTCreateX "\clients\client1" 0x0 0x1 3 NT_STATUS_OK
NTCreateX "\clients\client1" 0x40 0x1 4 NT_STATUS_FILE_IS_A_DIRECTORY
Close 3 NT_STATUS_OK
Close 1 NT_STATUS_OK
"#,
    )
    .unwrap();
}
