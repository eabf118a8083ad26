//! A client's reading of its loadfile, pass after pass, as dbench reads
//! it: the file is opened once, read through a 4 KiB buffer (stdio's
//! `fgets` over `read(2)`), and each line is parsed as it comes, so the
//! parsing and the reads are part of every pass's work, as they are of
//! dbench's. The built-in loadfile is read from memory (no `read(2)`; it
//! is not compared with Debian's dbench). The text was parsed and its
//! sha256 checked before the run; a pass that reads another length, or a
//! line that no longer parses, is an error naming the change. A change of
//! the same length whose lines still parse is not detected.

use super::operations::{Line, Loadfile, Origin};
use super::syntax::{parse_raw_line, LoadfileError};
use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Seek};
use std::sync::Arc;

/// stdio's buffer size for a file on the file systems dbench runs on.
const STDIO_BUFFER: usize = 4096;

enum Input {
    File(BufReader<File>, std::path::PathBuf),
    Text(Cursor<Arc<[u8]>>),
}

/// Reads a loadfile's lines, one pass at a time.
pub struct LineReader {
    name: String,
    input: Input,
    raw: Vec<u8>,
    number: u32,
    read: u64,
    checked: u64,
}

impl LineReader {
    /// Opens `lf`'s text where it came from.
    pub fn open(lf: &Loadfile) -> Result<LineReader, LoadfileError> {
        let input = match &lf.origin {
            Origin::File(path) => {
                let file = File::open(path).map_err(|source| LoadfileError::Read { path: path.clone(), source })?;
                Input::File(BufReader::with_capacity(STDIO_BUFFER, file), path.clone())
            }
            Origin::Text(text) => Input::Text(Cursor::new(Arc::clone(text))),
        };
        Ok(LineReader { name: lf.name.clone(), input, raw: Vec::new(), number: 0, read: 0, checked: lf.text_len })
    }

    /// The loadfile's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Goes back to the first line (dbench's `rewind`).
    pub fn rewind(&mut self) -> Result<(), LoadfileError> {
        self.number = 0;
        self.read = 0;
        match &mut self.input {
            Input::File(r, path) => r.rewind().map_err(|source| LoadfileError::Read { path: path.clone(), source }),
            Input::Text(c) => {
                c.set_position(0);
                Ok(())
            }
        }
    }

    /// The next operation line, parsed; `None` at the end of the pass.
    pub fn next_line(&mut self) -> Result<Option<Line>, LoadfileError> {
        loop {
            self.raw.clear();
            let n = match &mut self.input {
                Input::File(r, path) => r
                    .read_until(b'\n', &mut self.raw)
                    .map_err(|source| LoadfileError::Read { path: path.clone(), source })?,
                Input::Text(c) => c.read_until(b'\n', &mut self.raw).unwrap_or(0),
            };
            self.read += n as u64;
            if n == 0 {
                if self.read != self.checked {
                    return Err(LoadfileError::Changed {
                        name: self.name.clone(),
                        read: self.read,
                        checked: self.checked,
                    });
                }
                return Ok(None);
            }
            if self.raw.last() == Some(&b'\n') {
                self.raw.pop();
            }
            self.number = self.number.saturating_add(1);
            let parsed = parse_raw_line(&self.name, self.number, &self.raw).map_err(|e| {
                LoadfileError::ChangedLine { name: self.name.clone(), line: self.number, source: Box::new(e) }
            })?;
            if let Some(line) = parsed {
                return Ok(Some(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(r: &mut LineReader) -> Vec<Line> {
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push(l);
        }
        out
    }

    /// Reads a pass from the start; its error, which there must be.
    fn error_of_a_pass(r: &mut LineReader) -> String {
        r.rewind().unwrap();
        loop {
            match r.next_line() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the pass read to its end without an error"),
                Err(e) => return e.to_string(),
            }
        }
    }

    const TEXT: &[u8] =
        b"# a comment\nNTCreateX \"\\clients\\client1\\a\" 0x0 0x2 1 NT_STATUS_OK\n\nReadX 1 0 10 10 NT_STATUS_OK\nClose 1 NT_STATUS_OK";

    #[test]
    fn every_pass_reads_the_lines_the_run_checked() {
        let lf = Loadfile::parse("t", TEXT).unwrap();
        let mut r = LineReader::open(&lf).unwrap();
        for _ in 0..3 {
            r.rewind().unwrap();
            assert_eq!(all(&mut r), lf.lines);
        }
    }

    #[test]
    fn a_file_is_read_again_from_its_path_and_a_change_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.txt");
        std::fs::write(&path, TEXT).unwrap();
        let lf = Loadfile::read(&path).unwrap();
        let mut r = LineReader::open(&lf).unwrap();
        r.rewind().unwrap();
        assert_eq!(all(&mut r), lf.lines);
        let mut longer = TEXT.to_vec();
        longer.extend_from_slice(b"\nClose 1 NT_STATUS_OK\n");
        std::fs::write(&path, &longer).unwrap();
        let e = error_of_a_pass(&mut r);
        assert!(e.contains("changed during the run") && e.contains(&path.display().to_string()), "{e}");
        // The same length, but a line that no longer parses.
        let broken: Vec<u8> = TEXT.iter().map(|&b| if b == b'R' { b'Q' } else { b }).collect();
        std::fs::write(&path, &broken).unwrap();
        let e = error_of_a_pass(&mut r);
        assert!(e.contains("changed during the run: line 4 no longer parses"), "{e}");
    }
}
