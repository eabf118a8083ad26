//! Tests of the loadfile parser and its data model.

use super::*;
use std::path::Path;

fn parse(text: &str) -> Result<Loadfile, LoadfileError> {
    Loadfile::parse("t", text.as_bytes())
}

#[test]
fn parses_every_operation_of_client_txt_shape() {
    let lf = parse(
        r#"Deltree "\clients\client1" NT_STATUS_OK
Mkdir "\clients" NT_STATUS_OK
NTCreateX "\clients\client1\~dmtmp" 0x1 0x2 9937 NT_STATUS_OK
Close 9937 NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients\client1\~dmtmp" 1004 NT_STATUS_OBJECT_NAME_NOT_FOUND
FIND_FIRST "\clients\client1\~dmtmp\<.JNK" 260 1366 0 NT_STATUS_NO_SUCH_FILE
QUERY_FS_INFORMATION 1 NT_STATUS_OK
WriteX 9938 65534 1 1 NT_STATUS_OK
ReadX 9938 0 4096 4096 NT_STATUS_OK
QUERY_FILE_INFORMATION 9938 258 NT_STATUS_OK
SET_FILE_INFORMATION 9938 1004 NT_STATUS_OK
LockX 10430 2147483538 1 NT_STATUS_OK
UnlockX 10430 2147483538 1 NT_STATUS_OK
Flush 9938 NT_STATUS_OK
Rename "\clients\client1\a" "\clients\client1\b" NT_STATUS_OK
Unlink "\clients\client1\b" 0x6 NT_STATUS_OK

# a comment
Rmdir "\clients\client1\d" 0xC0000034
Sleep 100 NT_STATUS_OK
"#,
    )
    .unwrap();
    assert_eq!(lf.lines.len(), 18);
    assert_eq!(lf.lines[0].number, 1);
    assert_eq!(lf.lines[16].number, 19, "comments and blank lines still count");
    assert_eq!(
        lf.lines[2].op,
        Op::NtCreateX {
            path: SmbPath::parse(r"\clients\client1\~dmtmp").unwrap(),
            create_options: 1,
            disposition: 2,
            handle: 9937
        }
    );
    assert_eq!(lf.lines[4].status, NtStatus::Error("NT_STATUS_OBJECT_NAME_NOT_FOUND".into()));
    assert_eq!(lf.lines[5].op.kind(), OpKind::Find);
    assert_eq!(lf.lines[11].op, Op::LockX { handle: 10430, offset: 2_147_483_538, size: 1 });
    assert_eq!(lf.lines[16].status, NtStatus::Error("0xC0000034".into()));
    assert_eq!(lf.max_io_size(), 4096);
    assert_eq!(lf.payload_bytes_per_pass(), 4097);
    assert_eq!(lf.op_counts()[OpKind::Find.index()], 1);
    assert_eq!(lf.sha256.len(), 64);
}

#[test]
fn timestamps_crlf_and_display_names() {
    let lf =
        parse("0.250 Qpathinfo \"\\a\\b\" 1004 NT_STATUS_OK\r\nfind \"\\a\\*\" 260 10 3 NT_STATUS_OK\r\n").unwrap();
    assert_eq!(lf.lines[0].at_s, Some(0.25));
    assert_eq!(lf.lines[0].op.kind(), OpKind::Qpathinfo);
    assert_eq!(lf.lines[1].op.kind(), OpKind::Find);
    assert_eq!(lf.lines[1].at_s, None);
}

#[test]
fn unknown_operation_names_line_and_op() {
    let e = parse("Close 1 NT_STATUS_OK\nFrobnicate \"\\a\" NT_STATUS_OK\n").unwrap_err();
    assert!(matches!(&e, LoadfileError::UnknownOp { line: 2, op, .. } if op == "Frobnicate"), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("line 2") && msg.contains("Frobnicate") && msg.contains("NTCreateX"), "{msg}");
}

#[test]
fn malformed_lines_are_errors_naming_the_line() {
    let cases = [
        ("Close NT_STATUS_OK", "takes HANDLE"),
        ("Close 12x NT_STATUS_OK", "not a number"),
        ("ReadX 1 -5 10 10 NT_STATUS_OK", "out of range"),
        ("ReadX 1 0 999999999 10 NT_STATUS_OK", "exceeds"),
        ("NTCreateX \"\\a 0x40 0x1 5 NT_STATUS_OK", "unterminated"),
        ("NTCreateX \"a\\b\" 0x40 0x1 5 NT_STATUS_OK", "absolute"),
        ("Unlink \"\\\" NT_STATUS_OK", "replay directory itself"),
        ("FIND_FIRST \"\\a*\\b\" 260 1 0 NT_STATUS_OK", "outside its last component"),
        ("1.x Close 1 NT_STATUS_OK", "timestamp"),
        ("Close", "NT status"),
        ("NTCreateX \"\\clients\\client1\\a\" 0x40 0x6 5 NT_STATUS_OK", "disposition 6 is not one of 0..5"),
    ];
    for (text, want) in cases {
        let e = parse(&format!("# header\n{text}\n")).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("line 2") && msg.contains(want), "{text}: {msg}");
    }
}

#[test]
fn status_parsing() {
    assert_eq!(NtStatus::parse("NT_STATUS_OK"), Some(NtStatus::Ok));
    assert_eq!(NtStatus::parse("0x00000000"), Some(NtStatus::Ok));
    assert_eq!(NtStatus::parse("NT_STATUS_NO_SUCH_FILE"), Some(NtStatus::Error("NT_STATUS_NO_SUCH_FILE".into())));
    assert_eq!(NtStatus::parse("0xC000000F"), Some(NtStatus::Error("0xC000000F".into())));
    for bad in ["OK", "NT_STATUS_", "NT_STATUS_ok", "0x", "0xZZ", "STATUS_OK", "0x1FFFFFFFF"] {
        assert_eq!(NtStatus::parse(bad), None, "{bad}");
    }
    let e = parse("Close 1 STATUS_OK\n").unwrap_err();
    assert!(matches!(e, LoadfileError::BadStatus { line: 1, .. }), "{e}");
    assert!(NtStatus::parse("NT_STATUS_OK").unwrap().is_ok());
    assert_eq!(NtStatus::parse("NT_STATUS_NO_SUCH_FILE").unwrap().to_string(), "NT_STATUS_NO_SUCH_FILE");
}

#[test]
fn escape_attempts_are_refused_with_the_line() {
    for path in [r"\..\etc\passwd", r"\clients\..\..\x", r"\a\b\..\..\..", r"/../x"] {
        let e = parse(&format!("Close 1 NT_STATUS_OK\nUnlink \"{path}\" 0x6 NT_STATUS_OK\n")).unwrap_err();
        assert!(matches!(&e, LoadfileError::Escape { line: 2, .. }), "{path}: {e}");
        assert!(e.to_string().contains("climbs above the replay directory"), "{e}");
    }
    let e = parse("Rename \"\\clients\\client1\\a\" \"\\a\\..\\..\\b\" NT_STATUS_OK\n").unwrap_err();
    assert!(matches!(e, LoadfileError::Escape { line: 1, .. }), "{e}");
}

#[test]
fn a_client_cannot_climb_out_of_its_directory_or_name_another() {
    // Each of these would reach another client's tree: `client1` is
    // client 1's own name, so for client 0 `\clients\client1\..\client2`
    // is client 2's directory, and the replay finds names
    // case-insensitively.
    let cases = [
        (r"\clients\client1\..\client2\x", "climbs out of the client's directory"),
        (r"\clients\client1\a\..\..\client2", "climbs out of the client's directory"),
        (r"\clients\CLIENT1\..\CLIENT1\x", "climbs out of the client's directory"),
        (r"\x\client1\..\y", "climbs out of the client's directory"),
        (r"\clients\client2\x", "another client's directory"),
        (r"\clients\client0", "another client's directory"),
        (r"\CLIENTS\Client17\x", "another client's directory"),
        (r"\clients\a\..\client3\x", "another client's directory"),
    ];
    for (path, want) in cases {
        for line in
            [format!("QUERY_PATH_INFORMATION \"{path}\" 1004 NT_STATUS_OK"), format!("Deltree \"{path}\" NT_STATUS_OK")]
        {
            let e = parse(&format!("Close 1 NT_STATUS_OK\n{line}\n")).unwrap_err();
            let msg = e.to_string();
            assert!(matches!(&e, LoadfileError::Escape { line: 2, .. }), "{line}: {msg}");
            assert!(msg.contains(want) && msg.contains(path), "{line}: {msg}");
        }
    }
    // Names that only start like a client's stay usable inside the
    // client's directory.
    let lf = parse("Mkdir \"\\clients\\client1\\client2\" NT_STATUS_OK\nUnlink \"\\clients\\client1\\x\\..\\clients7\" 0 NT_STATUS_OK\nQUERY_PATH_INFORMATION \"\\clients\\clientele\" 1004 NT_STATUS_OK\n").unwrap();
    assert_eq!(lf.lines.len(), 3);
}

#[test]
fn outside_its_directory_a_client_may_only_look_make_and_open_directories() {
    // Allowed: what dbench's loadfiles do with `\clients`, which all
    // clients share, and looks anywhere.
    let lf = parse(
        r#"Mkdir "\clients" NT_STATUS_OK
QUERY_PATH_INFORMATION "\clients" 1004 NT_STATUS_OK
FIND_FIRST "\clients\*" 260 1366 3 NT_STATUS_OK
NTCreateX "\clients" 0x1 0x1 1 NT_STATUS_OK
NTCreateX "\other" 0x1 0x3 2 NT_STATUS_OK
Deltree "\clients\client1" NT_STATUS_OK
NTCreateX "\clients\client1" 0x1 0x2 3 NT_STATUS_OK
Rename "\clients\client1\a" "\clients\client1\b" NT_STATUS_OK
"#,
    )
    .unwrap();
    assert_eq!(lf.lines.len(), 8);
    let refused = [
        r#"Deltree "\clients" NT_STATUS_OK"#,
        r#"Rmdir "\clients" NT_STATUS_OK"#,
        r#"Unlink "\clients\shared" 0x6 NT_STATUS_OK"#,
        r#"Rename "\clients\client1\a" "\clients\a" NT_STATUS_OK"#,
        r#"Rename "\x" "\clients\client1\a" NT_STATUS_OK"#,
        r#"NTCreateX "\clients\shared" 0x40 0x1 1 NT_STATUS_OK"#,
        r#"NTCreateX "\clients\shared" 0x40 0x2 1 NT_STATUS_OK"#,
        r#"NTCreateX "\clients\shared" 0x40 0x5 1 NT_STATUS_OK"#,
        r#"NTCreateX "\clients" 0x1 0x2 1 NT_STATUS_OK"#,
        r#"NTCreateX "\clients" 0x1 0x0 1 NT_STATUS_OK"#,
        r#"Unlink "\Clients\client1\a" 0x6 NT_STATUS_OK"#,
    ];
    for line in refused {
        let e = parse(&format!("# header\n{line}\n")).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(&e, LoadfileError::OutsideClientDir { line: 2, .. }), "{line}: {msg}");
        let op = line.split(' ').next().unwrap();
        assert!(msg.contains(op) && msg.contains("outside the client's directory"), "{line}: {msg}");
    }
}

#[test]
fn paths_normalise_inside_the_directory() {
    let p = SmbPath::parse(r"\clients\client1\a\.\b\..\c").unwrap();
    assert_eq!(p.as_str(), "clients/client1/a/c");
    assert_eq!(p.to_string(), r"\clients\client1\a\c");
    assert_eq!(p.file_name(), "c");
    assert!(p.in_client_dir());
    let mut out = Vec::new();
    p.render("client7", &mut out);
    assert_eq!(out, b"clients/client7/a/c");
    assert_eq!(p.rendered_len("client7"), out.len());
    let mut out = Vec::new();
    SmbPath::parse(r"\clients\CLIENT1\client10").unwrap().render("client0", &mut out);
    assert_eq!(out, b"clients/client0/client10", "only whole components are the placeholder");
    assert!(SmbPath::parse(r"\clients\Client1").unwrap().in_client_dir());
    assert!(!SmbPath::parse(r"\clients").unwrap().in_client_dir());
    assert!(!SmbPath::parse(r"\CLIENTS\client1\x").unwrap().in_client_dir(), "not the directory prepared");
    assert!(!SmbPath::parse(r"\x\client1").unwrap().in_client_dir());
    assert_eq!(SmbPath::parse("a"), Err(PathProblem::NotAbsolute));
    assert_eq!(SmbPath::parse(r"\a\..\.."), Err(PathProblem::AboveRoot));
    assert_eq!(SmbPath::parse(r"\clients\client1\.."), Err(PathProblem::LeavesClient));
    assert_eq!(SmbPath::parse(r"\clients\client9"), Err(PathProblem::OtherClient));
    assert_eq!(SmbPath::parse(r"\a\.."), Err(PathProblem::Root));
    assert_eq!(SmbPath::parse("\\a\0"), Err(PathProblem::Nul));
}

#[test]
fn numbers_read_like_strtol_base_zero() {
    assert_eq!(c_integer("0x40"), Some(64));
    assert_eq!(c_integer("010"), Some(8));
    assert_eq!(c_integer("0"), Some(0));
    assert_eq!(c_integer("-1"), Some(-1));
    assert_eq!(c_integer("2147483538"), Some(2_147_483_538));
    for bad in ["", "-", "0x", "0x-1", "08", "1e3", "--1", "+-1", " 1"] {
        assert_eq!(c_integer(bad), None, "{bad}");
    }
}

#[test]
fn old_format_and_empty_files_are_refused() {
    let e = parse("SMBopenX 1 2 3\n").unwrap_err();
    assert!(matches!(e, LoadfileError::OldFormat { line: 1, .. }), "{e}");
    assert!(matches!(parse("# nothing\n\n").unwrap_err(), LoadfileError::Empty { .. }));
    let e = Loadfile::parse("bin", b"Close 1 NT_STATUS_OK\n\xff\n").unwrap_err();
    assert!(matches!(e, LoadfileError::NotText { line: 2, .. }), "{e}");
    let e = Loadfile::read(Path::new("/nonexistent/loadfile.txt")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/loadfile.txt"), "{e}");
}

#[test]
fn a_line_with_too_many_fields_is_refused_after_its_operation_is_known() {
    let extra = " 0".repeat(25);
    let e = parse(&format!("SMBopenX{extra}\n")).unwrap_err();
    assert!(matches!(e, LoadfileError::OldFormat { line: 1, .. }), "{e}");
    let e = parse(&format!("Close 1 NT_STATUS_OK\nFrobnicate{extra}\n")).unwrap_err();
    assert!(matches!(e, LoadfileError::UnknownOp { line: 2, .. }), "{e}");
    let e = parse(&format!("Close 1{extra} NT_STATUS_OK\n")).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("Close has more than 19 fields"), "{e}");
}

#[test]
fn a_quoted_field_may_hold_a_dos_dot() {
    let lf = parse("FIND_FIRST \"\\d\\a\"*\" 260 10 1 NT_STATUS_OK\n").unwrap();
    match &lf.lines[0].op {
        Op::FindFirst { pattern, .. } => assert_eq!(pattern.file_name(), "a\"*"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_space_a_client_keeps_is_the_furthest_write_of_each_file() {
    let lf = Loadfile::parse(
        "t",
        concat!(
            "NTCreateX \"\\clients\\client1\\a\" 0x40 0x2 1 NT_STATUS_OK\n",
            "WriteX 1 0 4096 4096 NT_STATUS_OK\n",
            "WriteX 1 8192 100 100 NT_STATUS_OK\n",
            "WriteX 1 0 10 10 NT_STATUS_OK\n",
            "Close 1 NT_STATUS_OK\n",
            "NTCreateX \"\\clients\\client1\\b\" 0x40 0x2 1 NT_STATUS_OK\n",
            "WriteX 1 0 50 50 NT_STATUS_OK\n",
            "Close 1 NT_STATUS_OK\n",
            "NTCreateX \"\\clients\\client1\\a\" 0x40 0x1 2 NT_STATUS_OK\n",
            "WriteX 2 0 20 20 NT_STATUS_OK\n",
        )
        .as_bytes(),
    )
    .unwrap();
    // a reaches byte 8292 (handle 1, then 2), b byte 50; rewrites add nothing.
    assert_eq!(lf.files_bytes_bound(), 8292 + 50);
    // A renamed file keeps its bytes under its new name while the old name
    // fills again; an unlinked one gives them back, unless a handle holds it.
    let lf = Loadfile::parse(
        "t",
        concat!(
            "NTCreateX \"\\clients\\client1\\a\" 0x40 0x2 1 NT_STATUS_OK\n",
            "WriteX 1 0 1000 1000 NT_STATUS_OK\n",
            "Close 1 NT_STATUS_OK\n",
            "Rename \"\\clients\\client1\\a\" \"\\clients\\client1\\b\" NT_STATUS_OK\n",
            "NTCreateX \"\\clients\\client1\\a\" 0x40 0x2 2 NT_STATUS_OK\n",
            "WriteX 2 0 1000 1000 NT_STATUS_OK\n",
            "Unlink \"\\clients\\client1\\a\" 0x20 NT_STATUS_OK\n",
            "Close 2 NT_STATUS_OK\n",
            "Unlink \"\\clients\\client1\\b\" 0x20 NT_STATUS_OK\n",
            "NTCreateX \"\\clients\\client1\\c\" 0x40 0x2 3 NT_STATUS_OBJECT_NAME_NOT_FOUND\n",
        )
        .as_bytes(),
    )
    .unwrap();
    assert_eq!(lf.files_bytes_bound(), 2000, "a and b at once");
}

#[test]
fn client_txt_keeps_less_than_the_room_a_dbench_load_client_gets() {
    let lf = Loadfile::read(Path::new(crate::known_loadfiles::CLIENT_TXT))
        .unwrap_or_else(|e| panic!("{e}: run scripts/setup to install Debian's dbench package"));
    let peak = lf.files_bytes_bound();
    assert!(peak > 20_000_000, "{peak}: client.txt writes about 24 MB of files");
    assert!(peak <= crate::known_loadfiles::DBENCH_CLIENT_ROOM_BYTES, "{peak}");
}
