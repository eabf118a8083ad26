//! Code emission: allocated IR to the byte code of an object file, with a
//! symbol for every function and global and a relocation for every call
//! and global access. Branch targets are function-relative, so only
//! symbol references need the linker. Owns the instruction encoding
//! (little-endian); must not allocate registers or optimise.

use super::ir::{Function, Inst, Terminator, UnaryOp};
use super::lower::DataDef;
use super::object_file::{Object, Reloc, RelocKind, Symbol, SymbolKind};
use super::regalloc::Allocation;

/// Functions start at multiples of this many bytes.
pub const FUNCTION_ALIGN: usize = 16;

/// Opcodes of the encoding.
mod opcode {
    pub const PROLOGUE: u8 = 0xf0;
    pub const CONST: u8 = 0x01;
    pub const COPY: u8 = 0x02;
    pub const BIN: u8 = 0x10;
    pub const UNARY: u8 = 0x30;
    pub const CALL: u8 = 0x40;
    pub const LOAD: u8 = 0x41;
    pub const STORE: u8 = 0x42;
    pub const JUMP: u8 = 0x50;
    pub const BRANCH: u8 = 0x51;
    pub const RET: u8 = 0x52;
}

/// Errors of code emission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodegenError {
    /// Code grew past what 32-bit offsets address.
    #[error("function {function}: code offset past 4 GiB")]
    TooLarge {
        /// The function being emitted.
        function: String,
    },
    /// More call arguments than the encoding holds.
    #[error("function {function}: call of {callee} with {count} arguments (at most 255)")]
    TooManyArgs {
        /// Caller.
        function: String,
        /// Callee.
        callee: String,
        /// Arguments.
        count: usize,
    },
}

fn off32(v: usize, function: &str) -> Result<u32, CodegenError> {
    u32::try_from(v).map_err(|_| CodegenError::TooLarge { function: function.to_string() })
}

/// Appends `f` to `obj`'s code, with its symbol and relocations.
pub fn emit_function(obj: &mut Object, f: &Function, alloc: &Allocation) -> Result<(), CodegenError> {
    let loc = |v: u32| alloc.locs.get(v as usize).map(|l| l.encode()).unwrap_or(0);
    let code = &mut obj.code;
    while !code.len().is_multiple_of(FUNCTION_ALIGN) {
        code.push(0);
    }
    let base = code.len();
    obj.symbols.push(Symbol {
        name: f.name.clone(),
        kind: SymbolKind::Function,
        exported: f.exported,
        offset: off32(base, &f.name)?,
    });
    code.push(opcode::PROLOGUE);
    code.extend_from_slice(&alloc.frame_slots.to_le_bytes());
    code.push(u8::try_from(f.params.len()).unwrap_or(u8::MAX));
    for &p in &f.params {
        code.extend_from_slice(&loc(p).to_le_bytes());
    }
    let mut block_at = vec![0u32; f.blocks.len()];
    // (position of a 4-byte field, target block) to patch after layout.
    let mut fixups: Vec<(usize, usize)> = Vec::new();
    for (b, blk) in f.blocks.iter().enumerate() {
        if let Some(x) = block_at.get_mut(b) {
            *x = off32(code.len() - base, &f.name)?;
        }
        for inst in &blk.insts {
            match inst {
                Inst::Const { dst, value } => {
                    code.push(opcode::CONST);
                    code.extend_from_slice(&loc(*dst).to_le_bytes());
                    code.extend_from_slice(&value.to_le_bytes());
                }
                Inst::Copy { dst, src } => {
                    // A copy between equal locations is a no-op: emit nothing.
                    if loc(*dst) != loc(*src) {
                        code.push(opcode::COPY);
                        code.extend_from_slice(&loc(*dst).to_le_bytes());
                        code.extend_from_slice(&loc(*src).to_le_bytes());
                    }
                }
                Inst::Bin { op, dst, a, b } => {
                    code.push(opcode::BIN + op.code());
                    for v in [*dst, *a, *b] {
                        code.extend_from_slice(&loc(v).to_le_bytes());
                    }
                }
                Inst::Unary { op, dst, a } => {
                    code.push(
                        opcode::UNARY
                            + match op {
                                UnaryOp::Neg => 0,
                                UnaryOp::Not => 1,
                                UnaryOp::BitNot => 2,
                            },
                    );
                    code.extend_from_slice(&loc(*dst).to_le_bytes());
                    code.extend_from_slice(&loc(*a).to_le_bytes());
                }
                Inst::Call { dst, callee, args } => {
                    let n = u8::try_from(args.len()).map_err(|_| CodegenError::TooManyArgs {
                        function: f.name.clone(),
                        callee: callee.clone(),
                        count: args.len(),
                    })?;
                    code.push(opcode::CALL);
                    code.push(n);
                    for &a in args {
                        code.extend_from_slice(&loc(a).to_le_bytes());
                    }
                    code.extend_from_slice(&loc(*dst).to_le_bytes());
                    obj.relocs.push(Reloc {
                        offset: off32(code.len(), &f.name)?,
                        kind: RelocKind::Call,
                        name: callee.clone(),
                    });
                    code.extend_from_slice(&[0; 4]);
                }
                Inst::Load { dst, global } => {
                    code.push(opcode::LOAD);
                    code.extend_from_slice(&loc(*dst).to_le_bytes());
                    obj.relocs.push(Reloc {
                        offset: off32(code.len(), &f.name)?,
                        kind: RelocKind::Data,
                        name: global.clone(),
                    });
                    code.extend_from_slice(&[0; 4]);
                }
                Inst::Store { global, src } => {
                    code.push(opcode::STORE);
                    code.extend_from_slice(&loc(*src).to_le_bytes());
                    obj.relocs.push(Reloc {
                        offset: off32(code.len(), &f.name)?,
                        kind: RelocKind::Data,
                        name: global.clone(),
                    });
                    code.extend_from_slice(&[0; 4]);
                }
            }
        }
        match &blk.term {
            Terminator::Jump(t) => {
                // Falling through to the next block needs no jump.
                if *t != b + 1 {
                    code.push(opcode::JUMP);
                    fixups.push((code.len(), *t));
                    code.extend_from_slice(&[0; 4]);
                }
            }
            Terminator::Branch { cond, then, els } => {
                code.push(opcode::BRANCH);
                code.extend_from_slice(&loc(*cond).to_le_bytes());
                fixups.push((code.len(), *then));
                code.extend_from_slice(&[0; 4]);
                fixups.push((code.len(), *els));
                code.extend_from_slice(&[0; 4]);
            }
            Terminator::Return(v) => {
                code.push(opcode::RET);
                code.extend_from_slice(&loc(*v).to_le_bytes());
            }
        }
    }
    for (at, target) in fixups {
        let t = block_at.get(target).copied().unwrap_or(0).to_le_bytes();
        if let Some(dst) = code.get_mut(at..at + 4) {
            dst.copy_from_slice(&t);
        }
    }
    Ok(())
}

/// Appends the unit's globals to `obj`'s data section.
pub fn emit_data(obj: &mut Object, data: &[DataDef]) -> Result<(), CodegenError> {
    for d in data {
        let offset = off32(obj.data.len(), &d.name)?;
        obj.symbols.push(Symbol { name: d.name.clone(), kind: SymbolKind::Data, exported: d.exported, offset });
        obj.data.extend_from_slice(&d.init.to_le_bytes());
    }
    Ok(())
}
