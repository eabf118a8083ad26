//! Tests of the v2 framing: round trips, and every way a line can be lost
//! or damaged on its way to the host.

use super::*;

fn sample(len: usize) -> String {
    let mut s = String::from("{\"k\":\"");
    let mut i = 0;
    while s.len() < len {
        s.push(char::from(b'a' + (i % 26) as u8));
        if i % 97 == 0 {
            s.push('é');
        }
        i += 1;
    }
    s.push_str("\"}");
    s
}

fn decode(lines: &[String]) -> Decoder {
    let mut d = Decoder::new();
    for l in lines {
        d.feed_line(l);
    }
    d
}

fn incomplete(err: StreamError) -> (Option<String>, u32, Vec<u32>, Vec<u32>) {
    match err {
        StreamError::Incomplete { id, total, missing, corrupt, .. } => (id, total, missing, corrupt),
        other => panic!("expected incomplete, got {other:?}"),
    }
}

/// Rewrites the field `index` (0-based, after the marker) of a line.
fn with_field(line: &str, index: usize, value: &str) -> String {
    let mut fields: Vec<&str> = line.splitn(8, ' ').collect();
    fields[index + 1] = value;
    fields.join(" ")
}

#[test]
fn round_trip_with_printk_noise() {
    let doc = sample(3000);
    let lines = encode(StreamKind::Result, "run1", &doc);
    assert_eq!(lines.len(), 1 + doc.len().div_ceil(CHUNK_BYTES));
    let mut text = String::from("[    0.1] booting\n");
    for (i, l) in lines.iter().enumerate() {
        if i == 2 {
            text.push_str("[    1.2] random: crng init done\n");
            text.push_str("[    1.3] virtio: ");
        }
        text.push_str(l);
        text.push('\n');
    }
    let mut d = Decoder::new();
    d.feed_text(&text);
    assert_eq!(d.last_document().unwrap(), doc);
    assert!(d.workload_documents().is_empty());
}

#[test]
fn lines_stay_short_and_chunks_end_at_char_boundaries() {
    let doc = "é€😀x".repeat(2000);
    let lines = encode(StreamKind::Workload, "0b9e7c39-1d5a-4c8e-9f0e-3d2f6a1b7c44", &doc);
    for (i, l) in lines.iter().enumerate().skip(1) {
        let Some(Line::Data { payload, intact: true, .. }) = parse_line(l) else { panic!("{l}") };
        let last = i == lines.len() - 1;
        assert!(payload.len() <= CHUNK_BYTES && (last || payload.len() > CHUNK_BYTES - 4), "{}", payload.len());
        assert!(l.len() < 512 - 2, "{} bytes", l.len());
    }
    assert_eq!(decode(&lines).workload_documents(), vec![doc]);
    // A chunk smaller than a char still makes progress.
    assert_eq!(split_chunks("é€", 1), vec!["é", "€"]);
    assert_eq!(split_chunks("", 4), vec![""]);
}

#[test]
fn reports_exactly_what_is_missing_and_damaged() {
    let doc = sample(2000);
    let lines = encode(StreamKind::Result, "r", &doc);
    assert_eq!(lines.len(), 6, "header and 5 chunks");
    let mut d = Decoder::new();
    for (i, l) in lines.iter().enumerate() {
        match i {
            2 => continue,                                     // chunk 2 lost
            3 => d.feed_line(&format!("{l}[    9.9] printk")), // chunk 3 damaged
            _ => d.feed_line(l),
        }
    }
    let err = d.last_document().unwrap_err();
    let tag = &lines[1].split(' ').nth(2).unwrap().to_string();
    assert_eq!(
        err.to_string(),
        format!("result stream {tag} of boot r is incomplete: 1 of 5 chunks missing [2], 1 damaged [3]")
    );
    assert_eq!(incomplete(err), (Some("r".into()), 5, vec![2], vec![3]));
    // A second channel with the same stream repairs it.
    d.feed_text(&lines.join("\n"));
    assert_eq!(d.last_document().unwrap(), doc);
}

#[test]
fn truncated_stream_names_the_missing_tail() {
    let lines = encode(StreamKind::Result, "t", &sample(2000));
    // Cut in the middle of chunk 4: 4 is damaged, 5 never came.
    let mut d = decode(&lines[..4]);
    d.feed_line(&lines[4][..100]);
    assert_eq!(incomplete(d.last_document().unwrap_err()), (Some("t".into()), 5, vec![5], vec![4]));
    // Without the header the data lines still know the total.
    let d = decode(&lines[1..3]);
    assert_eq!(incomplete(d.last_document().unwrap_err()), (None, 5, vec![3, 4, 5], vec![]));
}

#[test]
fn lost_or_damaged_header_is_rebuilt_from_the_data_lines() {
    let doc = sample(1500);
    let lines = encode(StreamKind::Result, "boot", &doc);
    assert_eq!(decode(&lines[1..]).last_document().unwrap(), doc);
    // A printk in the middle of the header: its tail lands on the next line.
    let (a, b) = lines[0].split_at(40);
    let mut damaged = vec![format!("{a}[    3.3] ata1: link up"), b.to_string()];
    damaged.extend_from_slice(&lines[1..]);
    let d = decode(&damaged);
    assert_eq!(d.last_document().unwrap(), doc);
    // And one chunk lost too: the error names the stream by its tag.
    let d = decode(&damaged[..damaged.len() - 1]);
    let err = d.last_document().unwrap_err();
    assert!(err.to_string().starts_with("result stream "), "{err}");
    assert!(err.to_string().contains("(no intact header) is incomplete: 1 of 4 chunks missing [4]"), "{err}");
}

#[test]
fn a_damaged_header_field_is_caught_by_its_crc() {
    let doc = sample(1500);
    let lines = encode(StreamKind::Result, "boot", &doc);
    for (field, value) in [(1, "W"), (2, "3"), (3, "1499"), (6, "other-boot")] {
        let bad = with_field(&lines[0], field, value);
        assert_eq!(
            parse_line(&bad),
            Some(Line::Damaged { kind: StreamKind::from_letter(if field == 1 { value } else { "R" }) }),
            "{bad}"
        );
        let mut all = vec![bad];
        all.extend_from_slice(&lines[1..]);
        // Rebuilt from the data lines; the damaged header's id is not used.
        let d = decode(&all);
        assert_eq!(d.last_document().unwrap(), doc);
        assert!(d.workload_documents().is_empty());
    }
}

#[test]
fn a_damaged_chunk_header_field_is_rejected_not_misfiled() {
    let doc = sample(2000);
    let lines = encode(StreamKind::Result, "b", &doc);
    let other = encode(StreamKind::Result, "b", &sample(2100));
    let other_tag = other[1].split(' ').nth(2).unwrap();
    // Chunk 2's line with its seq, total, tag or kind changed: the CRC
    // fails, so the payload is not put where the new field says.
    for bad in [
        with_field(&lines[2], 2, "3/5"),
        with_field(&lines[2], 2, "2/6"),
        with_field(&lines[2], 1, other_tag),
        with_field(&lines[2], 0, "W"),
    ] {
        assert!(matches!(parse_line(&bad), Some(Line::Data { intact: false, .. })), "{bad}");
        let mut d = decode(&[lines[0].clone(), lines[1].clone(), bad.clone()]);
        d.feed_line(&lines[4]);
        d.feed_line(&lines[5]);
        let (_, total, missing, corrupt) = incomplete(d.last_document().unwrap_err());
        assert_eq!(total, 5);
        // The altered line names itself wherever it claims to be, but its
        // payload fills nothing: 2 and 3 are never complete.
        assert!(missing.contains(&2) || corrupt.contains(&2), "{bad}: {missing:?} {corrupt:?}");
        assert!(missing.contains(&3) || corrupt.contains(&3), "{bad}: {missing:?} {corrupt:?}");
        assert!(d.workload_documents().is_empty() && d.workload_stream_errors().len() <= 1);
    }
}

#[test]
fn intact_chunks_that_do_not_match_the_hash_are_rejected() {
    let doc = sample(1000);
    let lines = encode(StreamKind::Result, "h", &doc);
    // A guest bug: chunks written under a tag that is not the document's.
    let forged: Vec<String> = lines[1..]
        .iter()
        .map(|l| {
            let Some(Line::Data { seq, total, payload, .. }) = parse_line(l) else { panic!() };
            let st = format!("{seq}/{total}");
            let crc = crc_of(&["R", "00000000", &st, payload]);
            format!("{MARKER} R 00000000 {st} {crc:08x} {payload}")
        })
        .collect();
    let err = decode(&forged).last_document().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "result stream 00000000 (no intact header): reassembled {} bytes do not match the tag its chunks carry",
            doc.len()
        )
    );
    // A header whose sha256 shares the tag but not the rest.
    let sha = format!("00000000{}", "f".repeat(56));
    let n = forged.len().to_string();
    let len = doc.len().to_string();
    let crc = crc_of(&["HEAD", "R", &n, &len, &sha, "h"]);
    let mut with_header = vec![format!("{MARKER} HEAD R {n} {len} {sha} {crc:08x} h")];
    with_header.extend(forged);
    assert!(matches!(
        decode(&with_header).last_document(),
        Err(StreamError::HashMismatch { want_bytes: Some(_), id: Some(_), .. })
    ));
}

#[test]
fn intact_chunks_announcing_another_total_are_not_part_of_the_stream() {
    let doc = sample(1000);
    let lines = encode(StreamKind::Result, "c", &doc);
    let tag = lines[1].split(' ').nth(2).unwrap();
    // Intact lines under the same tag from a stream of 5 chunks (a tag
    // collision), arriving before the real ones and among them.
    let other = |seq: u32| {
        let st = format!("{seq}/5");
        let crc = crc_of(&["R", tag, &st, "x"]);
        format!("{MARKER} R {tag} {st} {crc:08x} x")
    };
    assert_eq!(lines.len(), 4);
    let all = [&other(1), &other(3), &lines[0], &lines[1], &other(2), &lines[2], &lines[3]].map(String::clone);
    assert_eq!(decode(&all).last_document().unwrap(), doc);
    // Without the header, the first total seen is the stream's.
    let mut headless = lines[1..].to_vec();
    headless.extend([other(1), other(2)]);
    assert_eq!(decode(&headless).last_document().unwrap(), doc);
    let (_, total, missing, _) = incomplete(decode(&all[..2]).last_document().unwrap_err());
    assert_eq!((total, missing), (5, vec![2, 4, 5]));
}

#[test]
fn workload_streams_are_separate_ordered_and_deduplicated() {
    let fork = sample(1200);
    let hack = sample(600).replace('k', "h");
    let result = sample(2500);
    let mut console = Vec::new();
    console.extend(encode(StreamKind::Workload, "b", &fork));
    console.extend(encode(StreamKind::Workload, "b", &hack));
    console.extend(encode(StreamKind::Result, "b", &result));
    // The port carries the same streams again.
    let mut d = decode(&console);
    d.feed_text(&console.join("\n"));
    assert_eq!(d.workload_documents(), vec![fork.clone(), hack.clone()]);
    assert_eq!(d.workload_stream_errors(), vec![]);
    assert_eq!(d.last_document().unwrap(), result);

    // A damaged workload stream is reported and does not hide the others.
    let hack_lines = encode(StreamKind::Workload, "b", &hack);
    let mut d = decode(&encode(StreamKind::Workload, "b", &fork));
    d.feed_line(&hack_lines[0]);
    d.feed_line(&format!("{}garbage", hack_lines[1]));
    d.feed_line(&format!("{}garbage", encode(StreamKind::Workload, "b", "{}")[1]));
    assert_eq!(d.workload_documents(), vec![fork]);
    let errors = d.workload_stream_errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        matches!(&errors[0], StreamError::Incomplete { corrupt, missing, .. } if *corrupt == [1] && *missing == [2])
    );
    assert_eq!(errors[1], StreamError::Unreadable { kind: StreamKind::Workload, damaged: 1 });
    assert_eq!(errors[1].to_string(), "1 damaged workload stream lines match no workload stream seen intact");
    // Workload streams are not the result.
    assert_eq!(d.last_document(), Err(StreamError::NoStream));
}

#[test]
fn last_document_prefers_the_last_intact_result_stream() {
    let first = encode(StreamKind::Result, "b", "{\"n\":1}");
    let second = encode(StreamKind::Result, "b", "{\"n\":2}");
    let third = encode(StreamKind::Result, "b", "{\"n\":3}");
    let mut d = decode(&first);
    d.feed_line(&second[1]);
    d.feed_line(&third[0]);
    assert_eq!(d.last_document().unwrap(), "{\"n\":2}");
    let d = decode(&[third[0].clone()]);
    assert_eq!(incomplete(d.last_document().unwrap_err()), (Some("b".into()), 1, vec![1], vec![]));
}

#[test]
fn no_stream_unreadable_stream_and_old_lines() {
    let mut d = Decoder::new();
    d.feed_line("@@BOOTBENCH BEGIN old chunks=1 bytes=2 sha256=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
    d.feed_line("@@BOOTBENCH DATA old 1/1 00000000 {}");
    d.feed_line("@@BOOTBENCH END old");
    assert_eq!(d.last_document(), Err(StreamError::NoStream));
    assert_eq!(
        StreamError::NoStream.to_string(),
        "no result stream found (no '@@BOOTBENCH HEAD R' or '@@BOOTBENCH R' line)"
    );
    let lines = encode(StreamKind::Result, "u", &sample(1000));
    d.feed_line(&lines[1][..60]);
    d.feed_line(&format!("{} [ 1.0] x", lines[2]));
    d.feed_line(&lines[0][..30]);
    assert_eq!(d.last_document(), Err(StreamError::Unreadable { kind: StreamKind::Result, damaged: 3 }));
}

#[test]
fn events_carry_a_crc_and_damaged_ones_are_ignored() {
    let hello = event(EVENT_HELLO, "version=1 arch=x86_64");
    assert_eq!(parse_line(&hello), Some(Line::Event { name: "hello", text: "version=1 arch=x86_64" }));
    let empty = event(EVENT_POWEROFF, "");
    assert_eq!(parse_line(&empty), Some(Line::Event { name: "poweroff", text: "" }));
    // A changed byte, or a printk cutting the line before its CRC.
    let changed = hello.replace("version=1", "version=7");
    let cut = format!("{}[    2.0] usb 1-1: new device", &hello[..30]);
    let wrong_name = hello.replacen("hello", "hellp", 1);
    for bad in [&changed, &cut, &wrong_name] {
        assert_eq!(parse_line(bad), Some(Line::Damaged { kind: None }), "{bad}");
    }
    // The older format without a CRC: accepted, except for names the init
    // always checksums.
    assert_eq!(
        parse_line("@@BOOTBENCH EVENT trivial-init boottime=1.25"),
        Some(Line::Event { name: "trivial-init", text: "boottime=1.25" })
    );
    assert_eq!(parse_line("@@BOOTBENCH EVENT upload verdict=stored"), Some(Line::Damaged { kind: None }));
    let mut d = Decoder::new();
    for l in [&hello, &changed, &cut, &empty] {
        d.feed_line(l);
    }
    assert_eq!(d.events(), &[("hello".into(), "version=1 arch=x86_64".into()), ("poweroff".into(), String::new())]);
    assert_eq!(d.damaged_events(), &[changed.clone(), cut.clone()]);
}

#[test]
fn empty_document_round_trips() {
    let d = decode(&encode(StreamKind::Result, "e", ""));
    assert_eq!(d.last_document().unwrap(), "");
}

#[test]
fn a_forged_total_cannot_make_the_decoder_list_billions_of_chunks() {
    let doc = sample(1000);
    let lines = encode(StreamKind::Result, "d", &doc);
    let tag = lines[1].split(' ').nth(2).unwrap().to_string();
    let sha = format!("{tag}{}", "0".repeat(56));
    let len = doc.len().to_string();
    let header = |total: u32| {
        let n = total.to_string();
        let crc = crc_of(&["HEAD", "R", &n, &len, &sha, "h"]);
        format!("{MARKER} HEAD R {n} {len} {sha} {crc:08x} h")
    };
    let chunk = |total: u32| {
        let st = format!("1/{total}");
        let crc = crc_of(&["R", &tag, &st, "x"]);
        format!("{MARKER} R {tag} {st} {crc:08x} x")
    };
    // Checksums right, totals past the bound: damaged lines, not streams.
    for line in [header(u32::MAX), header(MAX_CHUNKS + 1), chunk(u32::MAX), chunk(MAX_CHUNKS + 1)] {
        assert!(matches!(parse_line(&line), Some(Line::Damaged { .. })), "{line}");
    }
    // At the bound: a stream with one chunk of 2^18, reported in runs.
    let err = decode(&[header(MAX_CHUNKS), chunk(MAX_CHUNKS)]).last_document().unwrap_err();
    let (_, total, missing, _) = incomplete(err.clone());
    assert_eq!((total, missing.len()), (MAX_CHUNKS, MAX_CHUNKS as usize - 1));
    let msg = err.to_string();
    assert!(msg.contains(&format!("chunks missing [2-{MAX_CHUNKS}], 0 damaged []")), "{msg}");
    assert!(msg.len() < 200, "{msg}");
}
