//! Initramfs compression: the choice of format and a streaming encoder with
//! fixed settings. Every setting that could vary between runs or machines
//! (gzip mtime, file name and OS byte; zstd level and threads) is pinned, so
//! compressed images are as reproducible as the archive inside them.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

/// gzip level. 9, as the kernel's own `usr/Makefile` uses for initramfs.
const GZIP_LEVEL: u32 = 9;
/// zstd level. 19 is the highest non-"ultra" level, so decompression needs no
/// window larger than 8 MiB, which every kernel's unzstd accepts.
const ZSTD_LEVEL: i32 = 19;
/// The gzip header's OS byte: 3 is Unix, what `gzip -n` writes on Linux.
const GZIP_OS_UNIX: u8 = 3;

/// How the archive is compressed. The kernel under test must have the
/// matching `CONFIG_RD_*` option (gzip is in nearly every config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    /// A plain newc archive.
    None,
    /// gzip at level 9, with no mtime and no file name in the header.
    Gzip,
    /// zstd at level 19, single-threaded, with a content checksum.
    Zstd,
}

impl Compression {
    /// Every format, in the order they are listed in messages.
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Gzip, Compression::Zstd];

    /// The name used on the command line and in [`fmt::Display`].
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// The conventional file-name suffix, e.g. `.gz`; empty for [`Compression::None`].
    pub fn extension(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A compression name that is not one of `none`, `gzip`, `zstd`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compression '{given}' (expected one of: none, gzip, zstd)")]
pub struct ParseCompressionError {
    /// The name as given.
    pub given: String,
}

impl FromStr for Compression {
    type Err = ParseCompressionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Compression::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| ParseCompressionError { given: s.to_owned() })
    }
}

/// A writer that compresses (or not) into `W`. [`Encoder::finish`] must be
/// called: dropping it loses the end of the stream.
pub(crate) enum Encoder<W: Write> {
    None(W),
    Gzip(flate2::write::GzEncoder<W>),
    Zstd(zstd::Encoder<'static, W>),
}

impl<W: Write> Encoder<W> {
    pub(crate) fn new(out: W, compression: Compression) -> io::Result<Self> {
        Ok(match compression {
            Compression::None => Encoder::None(out),
            Compression::Gzip => Encoder::Gzip(
                flate2::GzBuilder::new()
                    .mtime(0)
                    .operating_system(GZIP_OS_UNIX)
                    .write(out, flate2::Compression::new(GZIP_LEVEL)),
            ),
            Compression::Zstd => {
                let mut enc = zstd::Encoder::new(out, ZSTD_LEVEL)?;
                enc.include_checksum(true)?;
                Encoder::Zstd(enc)
            }
        })
    }

    /// Ends the compressed stream and returns the inner writer, flushed.
    pub(crate) fn finish(self) -> io::Result<W> {
        let mut out = match self {
            Encoder::None(w) => w,
            Encoder::Gzip(enc) => enc.finish()?,
            Encoder::Zstd(enc) => enc.finish()?,
        };
        out.flush()?;
        Ok(out)
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::None(w) => w.write(buf),
            Encoder::Gzip(enc) => enc.write(buf),
            Encoder::Zstd(enc) => enc.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::None(w) => w.flush(),
            Encoder::Gzip(enc) => enc.flush(),
            Encoder::Zstd(enc) => enc.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn names_round_trip() {
        for c in Compression::ALL {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
        }
    }

    #[test]
    fn unknown_name_is_a_clear_error() {
        let err = "xz".parse::<Compression>().unwrap_err();
        assert_eq!(err.given, "xz");
        assert_eq!(err.to_string(), "unknown compression 'xz' (expected one of: none, gzip, zstd)");
        // Case matters: the CLI documents lower-case names.
        assert!("GZIP".parse::<Compression>().is_err());
    }

    fn compress(data: &[u8], c: Compression) -> Vec<u8> {
        let mut enc = Encoder::new(Vec::new(), c).unwrap();
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn gzip_header_is_fixed() {
        let gz = compress(b"hello", Compression::Gzip);
        // Magic, deflate, no flags (no name), zero mtime, max-compression XFL, Unix.
        assert_eq!(&gz[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 3]);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, b"hello");
    }

    #[test]
    fn zstd_round_trip_and_determinism() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let a = compress(&data, Compression::Zstd);
        assert_eq!(a, compress(&data, Compression::Zstd));
        assert_eq!(zstd::decode_all(&a[..]).unwrap(), data);
        assert!(a.len() < data.len() / 10);
    }
}
