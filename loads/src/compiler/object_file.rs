//! The object-file and linked-image formats of the build workload, defined
//! little-endian on every arch so a tree built on a big-endian guest is
//! byte-identical to one built on the host. Owns encoding and checked
//! decoding; must not resolve symbols (the linker does).
//!
//! ```text
//! object := magic "BBKOBJ\0\x01"
//!           u32 code_len, u32 data_len, u32 nsyms, u32 nrelocs
//!           nsyms   × { u8 kind, u8 exported, u16 name_len, u32 offset, name }
//!           nrelocs × { u32 offset, u8 kind, u8 0, u16 name_len, name }
//!           code, data
//!           u32 crc32 of everything before it
//! ```
//! A linked image uses magic "BBKIMG\0\x01", has no relocations, and its
//! symbol offsets are absolute addresses.

/// Magic of an object file.
pub const OBJECT_MAGIC: &[u8; 8] = b"BBKOBJ\0\x01";
/// Magic of a linked image.
pub const IMAGE_MAGIC: &[u8; 8] = b"BBKIMG\0\x01";

/// Errors decoding an object or image.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    /// Wrong magic bytes.
    #[error("not an object file (bad magic)")]
    BadMagic,
    /// The data ends early or a length field points past it.
    #[error("truncated at byte {at} (reading {what})")]
    Truncated {
        /// Offset where data ran out.
        at: usize,
        /// What was being read.
        what: &'static str,
    },
    /// The checksum does not match.
    #[error("checksum mismatch (file says {stored:08x}, content is {computed:08x})")]
    Checksum {
        /// Stored CRC.
        stored: u32,
        /// Computed CRC.
        computed: u32,
    },
    /// A field with a value the format does not have.
    #[error("bad {what} value {value}")]
    BadField {
        /// The field.
        what: &'static str,
        /// Its value.
        value: u32,
    },
    /// A section is larger than the format's 32-bit fields allow.
    #[error("{what} too large for the format ({len} bytes)")]
    TooLarge {
        /// The section.
        what: &'static str,
        /// Its length.
        len: usize,
    },
}

/// What a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SymbolKind {
    /// Code.
    Function,
    /// Data.
    Data,
}

/// A symbol definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Name.
    pub name: String,
    /// Function or data.
    pub kind: SymbolKind,
    /// Visible to other objects.
    pub exported: bool,
    /// Offset in its section (an absolute address in an image).
    pub offset: u32,
}

/// What a relocation patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelocKind {
    /// A call target (code address).
    Call,
    /// A data address.
    Data,
}

/// A place in the code that needs a symbol's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloc {
    /// Offset of the 32-bit little-endian field in the code.
    pub offset: u32,
    /// Kind.
    pub kind: RelocKind,
    /// Symbol.
    pub name: String,
}

/// An object file or a linked image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Object {
    /// Code bytes.
    pub code: Vec<u8>,
    /// Data bytes (8-byte little-endian words).
    pub data: Vec<u8>,
    /// Symbols.
    pub symbols: Vec<Symbol>,
    /// Relocations (empty in an image).
    pub relocs: Vec<Reloc>,
}

fn len32(what: &'static str, len: usize) -> Result<u32, ObjectError> {
    u32::try_from(len).map_err(|_| ObjectError::TooLarge { what, len })
}

fn put_name(out: &mut Vec<u8>, name: &str) -> Result<(), ObjectError> {
    let n = u16::try_from(name.len()).map_err(|_| ObjectError::TooLarge { what: "symbol name", len: name.len() })?;
    out.extend_from_slice(&n.to_le_bytes());
    Ok(())
}

impl Object {
    /// Encodes with `magic` (object or image) into `out`.
    pub fn encode_into(&self, magic: &[u8; 8], out: &mut Vec<u8>) -> Result<(), ObjectError> {
        let start = out.len();
        out.extend_from_slice(magic);
        for v in [
            len32("code", self.code.len())?,
            len32("data", self.data.len())?,
            len32("symbol table", self.symbols.len())?,
            len32("relocation table", self.relocs.len())?,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for s in &self.symbols {
            out.push(match s.kind {
                SymbolKind::Function => 0,
                SymbolKind::Data => 1,
            });
            out.push(s.exported as u8);
            put_name(out, &s.name)?;
            out.extend_from_slice(&s.offset.to_le_bytes());
            out.extend_from_slice(s.name.as_bytes());
        }
        for r in &self.relocs {
            out.extend_from_slice(&r.offset.to_le_bytes());
            out.push(match r.kind {
                RelocKind::Call => 0,
                RelocKind::Data => 1,
            });
            out.push(0);
            put_name(out, &r.name)?;
            out.extend_from_slice(r.name.as_bytes());
        }
        out.extend_from_slice(&self.code);
        out.extend_from_slice(&self.data);
        let crc = crc32fast::hash(out.get(start..).unwrap_or_default());
        out.extend_from_slice(&crc.to_le_bytes());
        Ok(())
    }

    /// Decodes and checks bytes written by [`Object::encode_into`] with
    /// `magic`.
    pub fn decode(bytes: &[u8], magic: &[u8; 8]) -> Result<Object, ObjectError> {
        let body_len = bytes.len().checked_sub(4).ok_or(ObjectError::Truncated { at: 0, what: "checksum" })?;
        let (body, tail) = bytes.split_at(body_len);
        let stored =
            u32::from_le_bytes(tail.try_into().map_err(|_| ObjectError::Truncated { at: 0, what: "checksum" })?);
        if body.get(..8) != Some(magic.as_slice()) {
            return Err(ObjectError::BadMagic);
        }
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(ObjectError::Checksum { stored, computed });
        }
        let mut r = Reader { b: body, at: 8 };
        let code_len = r.u32("code length")? as usize;
        let data_len = r.u32("data length")? as usize;
        let nsyms = r.u32("symbol count")?;
        let nrelocs = r.u32("relocation count")?;
        let mut o = Object::default();
        for _ in 0..nsyms {
            let kind = match r.u8("symbol kind")? {
                0 => SymbolKind::Function,
                1 => SymbolKind::Data,
                v => return Err(ObjectError::BadField { what: "symbol kind", value: v.into() }),
            };
            let exported = r.u8("symbol binding")? != 0;
            let nlen = r.u16("symbol name length")? as usize;
            let offset = r.u32("symbol offset")?;
            let name = r.string(nlen, "symbol name")?;
            o.symbols.push(Symbol { name, kind, exported, offset });
        }
        for _ in 0..nrelocs {
            let offset = r.u32("relocation offset")?;
            let kind = match r.u8("relocation kind")? {
                0 => RelocKind::Call,
                1 => RelocKind::Data,
                v => return Err(ObjectError::BadField { what: "relocation kind", value: v.into() }),
            };
            r.u8("relocation padding")?;
            let nlen = r.u16("relocation name length")? as usize;
            let name = r.string(nlen, "relocation name")?;
            if offset as usize + 4 > code_len {
                return Err(ObjectError::BadField { what: "relocation offset", value: offset });
            }
            o.relocs.push(Reloc { offset, kind, name });
        }
        o.code = r.bytes(code_len, "code")?.to_vec();
        o.data = r.bytes(data_len, "data")?.to_vec();
        if r.at != body.len() {
            return Err(ObjectError::BadField { what: "trailing bytes", value: len32("trailer", body.len() - r.at)? });
        }
        Ok(o)
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], ObjectError> {
        let end = self.at.checked_add(n).ok_or(ObjectError::Truncated { at: self.at, what })?;
        let s = self.b.get(self.at..end).ok_or(ObjectError::Truncated { at: self.at, what })?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, ObjectError> {
        Ok(self.bytes(1, what)?.first().copied().unwrap_or(0))
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, ObjectError> {
        let at = self.at;
        let s = self.bytes(2, what)?;
        Ok(u16::from_le_bytes(s.try_into().map_err(|_| ObjectError::Truncated { at, what })?))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, ObjectError> {
        let at = self.at;
        let s = self.bytes(4, what)?;
        Ok(u32::from_le_bytes(s.try_into().map_err(|_| ObjectError::Truncated { at, what })?))
    }
    fn string(&mut self, n: usize, what: &'static str) -> Result<String, ObjectError> {
        let at = self.at;
        let s = self.bytes(n, what)?;
        String::from_utf8(s.to_vec()).map_err(|_| ObjectError::BadField { what, value: at as u32 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Object {
        Object {
            code: vec![1, 2, 3, 4, 5, 6, 7, 8],
            data: 7i64.to_le_bytes().to_vec(),
            symbols: vec![
                Symbol { name: "f".into(), kind: SymbolKind::Function, exported: true, offset: 0 },
                Symbol { name: "g".into(), kind: SymbolKind::Data, exported: false, offset: 0 },
            ],
            relocs: vec![Reloc { offset: 4, kind: RelocKind::Data, name: "g".into() }],
        }
    }

    #[test]
    fn round_trips_and_is_little_endian() {
        let mut b = Vec::new();
        sample().encode_into(OBJECT_MAGIC, &mut b).unwrap();
        // code_len right after the magic, little-endian on every host.
        assert_eq!(&b[8..12], &[8, 0, 0, 0]);
        assert_eq!(Object::decode(&b, OBJECT_MAGIC).unwrap(), sample());
        assert_eq!(Object::decode(&b, IMAGE_MAGIC).unwrap_err(), ObjectError::BadMagic);
    }

    #[test]
    fn damage_is_detected() {
        let mut b = Vec::new();
        sample().encode_into(OBJECT_MAGIC, &mut b).unwrap();
        let mut bad = b.clone();
        bad[20] ^= 1;
        assert!(matches!(Object::decode(&bad, OBJECT_MAGIC), Err(ObjectError::Checksum { .. })));
        assert!(matches!(Object::decode(&b[..3], OBJECT_MAGIC), Err(ObjectError::Truncated { .. })));
        assert!(matches!(Object::decode(&b[4..], OBJECT_MAGIC), Err(ObjectError::BadMagic)));
        // A relocation pointing outside the code, with a valid checksum.
        let mut o = sample();
        o.relocs[0].offset = 6;
        let mut b2 = Vec::new();
        o.encode_into(OBJECT_MAGIC, &mut b2).unwrap();
        assert!(matches!(
            Object::decode(&b2, OBJECT_MAGIC),
            Err(ObjectError::BadField { what: "relocation offset", .. })
        ));
    }
}
