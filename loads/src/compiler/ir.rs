//! The compiler's intermediate representation: functions made of basic
//! blocks of three-address instructions over virtual registers. Owns the
//! data types and their small queries; must not transform them (the
//! optimiser and register allocator do).

use super::parser::BinOp;

/// A virtual register.
pub type Vreg = u32;
/// Index of a block in its function.
pub type BlockId = usize;

/// Arithmetic and comparison operators of the IR (short-circuit operators
/// are lowered to control flow first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// wrapping `+`
    Add,
    /// wrapping `-`
    Sub,
    /// wrapping `*`
    Mul,
    /// `/` (0 when dividing by 0)
    Div,
    /// `%` (0 when dividing by 0)
    Rem,
    /// `&`
    And,
    /// `|`
    Or,
    /// `^`
    Xor,
    /// `<<` (count taken mod 64)
    Shl,
    /// `>>` arithmetic (count taken mod 64)
    Shr,
    /// `==` (1 or 0)
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl Op {
    /// The IR operator for a non-short-circuit source operator.
    pub fn from_binop(b: BinOp) -> Option<Op> {
        Some(match b {
            BinOp::Add => Op::Add,
            BinOp::Sub => Op::Sub,
            BinOp::Mul => Op::Mul,
            BinOp::Div => Op::Div,
            BinOp::Rem => Op::Rem,
            BinOp::And => Op::And,
            BinOp::Or => Op::Or,
            BinOp::Xor => Op::Xor,
            BinOp::Shl => Op::Shl,
            BinOp::Shr => Op::Shr,
            BinOp::Eq => Op::Eq,
            BinOp::Ne => Op::Ne,
            BinOp::Lt => Op::Lt,
            BinOp::Le => Op::Le,
            BinOp::Gt => Op::Gt,
            BinOp::Ge => Op::Ge,
            BinOp::LogAnd | BinOp::LogOr => return None,
        })
    }

    /// Evaluates the operator on constants (the language's semantics).
    pub fn eval(self, a: i64, b: i64) -> i64 {
        match self {
            Op::Add => a.wrapping_add(b),
            Op::Sub => a.wrapping_sub(b),
            Op::Mul => a.wrapping_mul(b),
            Op::Div => a.checked_div(b).unwrap_or(0),
            Op::Rem => a.checked_rem(b).unwrap_or(0),
            Op::And => a & b,
            Op::Or => a | b,
            Op::Xor => a ^ b,
            Op::Shl => a.wrapping_shl((b & 63) as u32),
            Op::Shr => a.wrapping_shr((b & 63) as u32),
            Op::Eq => (a == b) as i64,
            Op::Ne => (a != b) as i64,
            Op::Lt => (a < b) as i64,
            Op::Le => (a <= b) as i64,
            Op::Gt => (a > b) as i64,
            Op::Ge => (a >= b) as i64,
        }
    }

    /// True when `a op b == b op a`.
    pub fn commutes(self) -> bool {
        matches!(self, Op::Add | Op::Mul | Op::And | Op::Or | Op::Xor | Op::Eq | Op::Ne)
    }

    /// Stable opcode number used in object code.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Unary operators of the IR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// wrapping negation
    Neg,
    /// logical not (1 or 0)
    Not,
    /// bitwise not
    BitNot,
}

impl UnaryOp {
    /// Evaluates the operator on a constant.
    pub fn eval(self, a: i64) -> i64 {
        match self {
            UnaryOp::Neg => a.wrapping_neg(),
            UnaryOp::Not => (a == 0) as i64,
            UnaryOp::BitNot => !a,
        }
    }
}

/// One instruction.
#[derive(Debug, Clone, PartialEq)]
pub enum Inst {
    /// `dst = value`
    Const {
        /// Destination.
        dst: Vreg,
        /// The constant.
        value: i64,
    },
    /// `dst = src`
    Copy {
        /// Destination.
        dst: Vreg,
        /// Source.
        src: Vreg,
    },
    /// `dst = a op b`
    Bin {
        /// Operator.
        op: Op,
        /// Destination.
        dst: Vreg,
        /// Left operand.
        a: Vreg,
        /// Right operand.
        b: Vreg,
    },
    /// `dst = op a`
    Unary {
        /// Operator.
        op: UnaryOp,
        /// Destination.
        dst: Vreg,
        /// Operand.
        a: Vreg,
    },
    /// `dst = callee(args...)`
    Call {
        /// Destination.
        dst: Vreg,
        /// Function symbol.
        callee: String,
        /// Arguments.
        args: Vec<Vreg>,
    },
    /// `dst = global`
    Load {
        /// Destination.
        dst: Vreg,
        /// Data symbol.
        global: String,
    },
    /// `global = src`
    Store {
        /// Data symbol.
        global: String,
        /// Source.
        src: Vreg,
    },
}

impl Inst {
    /// The register this instruction writes, if any.
    pub fn def(&self) -> Option<Vreg> {
        match self {
            Inst::Const { dst, .. }
            | Inst::Copy { dst, .. }
            | Inst::Bin { dst, .. }
            | Inst::Unary { dst, .. }
            | Inst::Call { dst, .. }
            | Inst::Load { dst, .. } => Some(*dst),
            Inst::Store { .. } => None,
        }
    }

    /// Calls `f` on every register this instruction reads.
    pub fn for_each_use(&self, mut f: impl FnMut(Vreg)) {
        match self {
            Inst::Const { .. } | Inst::Load { .. } => {}
            Inst::Copy { src, .. } | Inst::Store { src, .. } => f(*src),
            Inst::Bin { a, b, .. } => {
                f(*a);
                f(*b);
            }
            Inst::Unary { a, .. } => f(*a),
            Inst::Call { args, .. } => args.iter().for_each(|&v| f(v)),
        }
    }

    /// Calls `f` on every register operand this instruction reads, for
    /// rewriting.
    pub fn map_uses(&mut self, mut f: impl FnMut(Vreg) -> Vreg) {
        match self {
            Inst::Const { .. } | Inst::Load { .. } => {}
            Inst::Copy { src, .. } | Inst::Store { src, .. } => *src = f(*src),
            Inst::Bin { a, b, .. } => {
                *a = f(*a);
                *b = f(*b);
            }
            Inst::Unary { a, .. } => *a = f(*a),
            Inst::Call { args, .. } => args.iter_mut().for_each(|v| *v = f(*v)),
        }
    }

    /// True when removing the instruction (if its result is unused) does
    /// not change behaviour.
    pub fn is_pure(&self) -> bool {
        !matches!(self, Inst::Call { .. } | Inst::Store { .. })
    }
}

/// How a block ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Terminator {
    /// Unconditional jump.
    Jump(BlockId),
    /// `if cond != 0 goto then else goto els`.
    Branch {
        /// Condition.
        cond: Vreg,
        /// Taken when non-zero.
        then: BlockId,
        /// Taken when zero.
        els: BlockId,
    },
    /// Return a value.
    Return(Vreg),
}

impl Terminator {
    /// Successor blocks.
    pub fn successors(&self) -> Vec<BlockId> {
        match self {
            Terminator::Jump(b) => vec![*b],
            Terminator::Branch { then, els, .. } => vec![*then, *els],
            Terminator::Return(_) => Vec::new(),
        }
    }

    /// The register this terminator reads, if any.
    pub fn used(&self) -> Option<Vreg> {
        match self {
            Terminator::Jump(_) => None,
            Terminator::Branch { cond, .. } => Some(*cond),
            Terminator::Return(v) => Some(*v),
        }
    }
}

/// A basic block.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Straight-line instructions.
    pub insts: Vec<Inst>,
    /// The control transfer that ends it.
    pub term: Terminator,
}

/// A function in IR form.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Symbol name.
    pub name: String,
    /// Visible to the linker.
    pub exported: bool,
    /// Registers holding the parameters on entry.
    pub params: Vec<Vreg>,
    /// Blocks; block 0 is the entry.
    pub blocks: Vec<Block>,
    /// Number of virtual registers used.
    pub vregs: u32,
}

impl Function {
    /// Total instruction count (terminators included).
    pub fn size(&self) -> usize {
        self.blocks.iter().map(|b| b.insts.len() + 1).sum()
    }
}
