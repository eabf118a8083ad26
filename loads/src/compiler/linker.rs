//! The linker applet's work: read every object, build the global symbol
//! table (a duplicate definition is an error naming both objects), lay the
//! code and data sections out, resolve every relocation (this object's own
//! symbols first, as static symbols shadow globals), and write an image
//! with a sorted symbol map. Owns symbol resolution; must not compile.

use super::object_file::{Object, ObjectError, RelocKind, Symbol, SymbolKind, IMAGE_MAGIC, OBJECT_MAGIC};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the image's code starts (a kernel-like load address).
pub const LOAD_ADDRESS: u32 = 0x0010_0000;
/// Section alignment in the image.
const SECTION_ALIGN: u32 = 4096;

/// Errors of linking.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// An object cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The object.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An object is malformed.
    #[error("{path} is not a valid object")]
    Decode {
        /// The object.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: ObjectError,
    },
    /// Two objects define the same global symbol.
    #[error("multiple definition of '{name}': {first} and {second}")]
    Duplicate {
        /// The symbol.
        name: String,
        /// First definer.
        first: PathBuf,
        /// Second definer.
        second: PathBuf,
    },
    /// References to symbols nothing defines.
    #[error("{count} undefined references, first: '{name}' in {path}")]
    Undefined {
        /// How many.
        count: usize,
        /// The first symbol.
        name: String,
        /// The object referencing it.
        path: PathBuf,
    },
    /// A call relocation names data or the reverse.
    #[error("{path}: '{name}' is referenced as {want:?} but defined as {have:?}")]
    KindMismatch {
        /// The object.
        path: PathBuf,
        /// The symbol.
        name: String,
        /// Reference kind.
        want: RelocKind,
        /// Definition kind.
        have: SymbolKind,
    },
    /// The entry symbol is missing.
    #[error("entry symbol '{0}' not defined")]
    NoEntry(String),
    /// The image would not fit the 32-bit address space of the format.
    #[error("image too large for 32-bit addresses")]
    TooLarge,
    /// Nothing to link.
    #[error("no input objects")]
    NoInput,
    /// Writing the output failed.
    #[error("cannot write {path}")]
    Write {
        /// The output.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Encoding the image failed.
    #[error("cannot encode the image")]
    Encode(#[source] ObjectError),
}

/// What a link did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Objects read.
    pub objects: u32,
    /// Global symbols.
    pub globals: u32,
    /// Relocations applied.
    pub relocations: u32,
    /// Image size in bytes.
    pub image_bytes: u64,
}

fn align(v: u32, a: u32) -> Option<u32> {
    v.checked_add(a - 1).map(|x| x & !(a - 1))
}

/// Links `inputs` into `output`; when `entry` is given it must be defined.
pub fn link(inputs: &[PathBuf], output: &Path, entry: Option<&str>) -> Result<LinkStats, LinkError> {
    if inputs.is_empty() {
        return Err(LinkError::NoInput);
    }
    let mut objects = Vec::with_capacity(inputs.len());
    for p in inputs {
        let bytes = std::fs::read(p).map_err(|source| LinkError::Read { path: p.clone(), source })?;
        let o = Object::decode(&bytes, OBJECT_MAGIC).map_err(|source| LinkError::Decode { path: p.clone(), source })?;
        objects.push(o);
    }
    // Layout: all code, then all data, each object's part aligned.
    let mut code_base = Vec::with_capacity(objects.len());
    let mut at = LOAD_ADDRESS;
    for o in &objects {
        code_base.push(at);
        let len = u32::try_from(o.code.len()).map_err(|_| LinkError::TooLarge)?;
        at = at.checked_add(len).and_then(|v| align(v, 16)).ok_or(LinkError::TooLarge)?;
    }
    at = align(at, SECTION_ALIGN).ok_or(LinkError::TooLarge)?;
    let data_start = at;
    let mut data_base = Vec::with_capacity(objects.len());
    for o in &objects {
        data_base.push(at);
        let len = u32::try_from(o.data.len()).map_err(|_| LinkError::TooLarge)?;
        at = at.checked_add(len).and_then(|v| align(v, 8)).ok_or(LinkError::TooLarge)?;
    }
    let address = |i: usize, s: &Symbol| -> Option<u32> {
        let base = match s.kind {
            SymbolKind::Function => code_base.get(i)?,
            SymbolKind::Data => data_base.get(i)?,
        };
        base.checked_add(s.offset)
    };
    let mut globals: HashMap<&str, (usize, &Symbol)> = HashMap::new();
    for (i, o) in objects.iter().enumerate() {
        for s in o.symbols.iter().filter(|s| s.exported) {
            if let Some((first, _)) = globals.insert(&s.name, (i, s)) {
                return Err(LinkError::Duplicate {
                    name: s.name.clone(),
                    first: inputs.get(first).cloned().unwrap_or_default(),
                    second: inputs.get(i).cloned().unwrap_or_default(),
                });
            }
        }
    }
    let mut stats = LinkStats { objects: objects.len() as u32, globals: globals.len() as u32, ..Default::default() };
    let mut image = Object::default();
    let mut undefined: Vec<(String, usize)> = Vec::new();
    for (i, o) in objects.iter().enumerate() {
        let locals: HashMap<&str, &Symbol> = o.symbols.iter().map(|s| (s.name.as_str(), s)).collect();
        let mut code = o.code.clone();
        for r in &o.relocs {
            let (owner, sym) = match locals.get(r.name.as_str()) {
                Some(s) => (i, *s),
                None => match globals.get(r.name.as_str()) {
                    Some((j, s)) => (*j, *s),
                    None => {
                        undefined.push((r.name.clone(), i));
                        continue;
                    }
                },
            };
            let ok = matches!(
                (r.kind, sym.kind),
                (RelocKind::Call, SymbolKind::Function) | (RelocKind::Data, SymbolKind::Data)
            );
            if !ok {
                return Err(LinkError::KindMismatch {
                    path: inputs.get(i).cloned().unwrap_or_default(),
                    name: r.name.clone(),
                    want: r.kind,
                    have: sym.kind,
                });
            }
            let addr = address(owner, sym).ok_or(LinkError::TooLarge)?;
            let at = r.offset as usize;
            if let Some(field) = code.get_mut(at..at + 4) {
                field.copy_from_slice(&addr.to_le_bytes());
            }
            stats.relocations += 1;
        }
        let pad = code_base.get(i).copied().unwrap_or(0) - LOAD_ADDRESS - image.code.len() as u32;
        image.code.extend(std::iter::repeat_n(0u8, pad as usize));
        image.code.extend_from_slice(&code);
        for s in &o.symbols {
            let addr = address(i, s).ok_or(LinkError::TooLarge)?;
            image.symbols.push(Symbol { offset: addr, ..s.clone() });
        }
    }
    if let Some((name, i)) = undefined.first() {
        return Err(LinkError::Undefined {
            count: undefined.len(),
            name: name.clone(),
            path: inputs.get(*i).cloned().unwrap_or_default(),
        });
    }
    if let Some(e) = entry {
        if !globals.contains_key(e) {
            return Err(LinkError::NoEntry(e.to_string()));
        }
    }
    for (i, o) in objects.iter().enumerate() {
        let pad = data_base.get(i).copied().unwrap_or(data_start) - data_start - image.data.len() as u32;
        image.data.extend(std::iter::repeat_n(0u8, pad as usize));
        image.data.extend_from_slice(&o.data);
    }
    // The symbol map sorted by address then name, like System.map.
    image.symbols.sort_by(|a, b| (a.offset, &a.name).cmp(&(b.offset, &b.name)));
    let mut out = Vec::with_capacity(image.code.len() + image.data.len() + image.symbols.len() * 32 + 64);
    image.encode_into(IMAGE_MAGIC, &mut out).map_err(LinkError::Encode)?;
    stats.image_bytes = out.len() as u64;
    std::fs::write(output, &out).map_err(|source| LinkError::Write { path: output.to_path_buf(), source })?;
    Ok(stats)
}
