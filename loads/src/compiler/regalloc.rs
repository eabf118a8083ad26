//! Linear-scan register allocation: live intervals over the linearised
//! instruction order (stretched over whole blocks where a register is live
//! in or out), sorted by start, assigned to a fixed set of machine
//! registers with the furthest-ending interval spilled to a stack slot.
//! Owns the choice of location for every virtual register; must not
//! reorder or change instructions.

use super::ir::{Function, Vreg};
use super::optimize::{has_bit, liveness};

/// Machine registers available to the allocator.
pub const REGISTERS: u16 = 12;

/// Where a virtual register lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// Machine register number.
    Reg(u16),
    /// Stack slot number.
    Stack(u16),
}

impl Loc {
    /// 16-bit operand encoding: registers below 0x8000, slots above.
    pub fn encode(self) -> u16 {
        match self {
            Loc::Reg(r) => r,
            Loc::Stack(s) => 0x8000 | (s & 0x7fff),
        }
    }
}

/// The allocator's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// Location of every virtual register (unused ones get register 0).
    pub locs: Vec<Loc>,
    /// Stack slots used.
    pub frame_slots: u16,
    /// Intervals that were spilled.
    pub spills: u32,
}

#[derive(Debug, Clone, Copy)]
struct Interval {
    vreg: Vreg,
    start: u32,
    end: u32,
}

/// Allocates locations for `f`'s registers.
pub fn allocate(f: &Function) -> Allocation {
    let n = f.vregs as usize;
    let live = liveness(f);
    let mut start = vec![u32::MAX; n];
    let mut end = vec![0u32; n];
    let touch = |v: Vreg, p: u32, start: &mut Vec<u32>, end: &mut Vec<u32>| {
        if let (Some(s), Some(e)) = (start.get_mut(v as usize), end.get_mut(v as usize)) {
            *s = (*s).min(p);
            *e = (*e).max(p);
        }
    };
    for &p in &f.params {
        touch(p, 0, &mut start, &mut end);
    }
    let mut pos = 1u32;
    for (b, blk) in f.blocks.iter().enumerate() {
        let first = pos;
        for inst in &blk.insts {
            inst.for_each_use(|v| touch(v, pos, &mut start, &mut end));
            if let Some(d) = inst.def() {
                touch(d, pos, &mut start, &mut end);
            }
            pos += 1;
        }
        if let Some(v) = blk.term.used() {
            touch(v, pos, &mut start, &mut end);
        }
        let last = pos;
        pos += 1;
        for v in 0..f.vregs {
            if live.live_in.get(b).is_some_and(|s| has_bit(s, v)) {
                touch(v, first, &mut start, &mut end);
            }
            if live.live_out.get(b).is_some_and(|s| has_bit(s, v)) {
                touch(v, last, &mut start, &mut end);
            }
        }
    }
    let mut intervals: Vec<Interval> = (0..f.vregs)
        .filter_map(|v| {
            let s = *start.get(v as usize)?;
            (s != u32::MAX).then(|| Interval { vreg: v, start: s, end: end.get(v as usize).copied().unwrap_or(s) })
        })
        .collect();
    intervals.sort_by_key(|i| (i.start, i.vreg));

    let mut locs = vec![Loc::Reg(0); n];
    let mut free: Vec<u16> = (0..REGISTERS).rev().collect();
    let mut active: Vec<(Interval, u16)> = Vec::new();
    let mut slots = 0u16;
    let mut spills = 0u32;
    let set = |locs: &mut Vec<Loc>, v: Vreg, l: Loc| {
        if let Some(x) = locs.get_mut(v as usize) {
            *x = l;
        }
    };
    for iv in intervals {
        // Expire intervals that ended.
        active.retain(|(a, r)| {
            if a.end < iv.start {
                free.push(*r);
                false
            } else {
                true
            }
        });
        if let Some(r) = free.pop() {
            set(&mut locs, iv.vreg, Loc::Reg(r));
            active.push((iv, r));
            active.sort_by_key(|(a, _)| (a.end, a.vreg));
            continue;
        }
        // Spill whichever ends last: the new interval or the last active.
        spills += 1;
        let slot = slots;
        slots = slots.saturating_add(1);
        match active.last().copied() {
            Some((last, r)) if last.end > iv.end => {
                set(&mut locs, last.vreg, Loc::Stack(slot));
                set(&mut locs, iv.vreg, Loc::Reg(r));
                active.pop();
                active.push((iv, r));
                active.sort_by_key(|(a, _)| (a.end, a.vreg));
            }
            _ => set(&mut locs, iv.vreg, Loc::Stack(slot)),
        }
    }
    Allocation { locs, frame_slots: slots, spills }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compiler::lexer::lex;
    use crate::compiler::lower::lower;
    use crate::compiler::parser::parse;

    #[test]
    fn overlapping_registers_never_share_a_location() {
        // 20 values all live at the return: more than REGISTERS, so some spill.
        let mut src = String::from("int f(int a) {");
        for i in 0..20 {
            src.push_str(&format!(" int v{i} = a * {};", i + 2));
        }
        src.push_str(" return v0");
        for i in 1..20 {
            src.push_str(&format!(" + v{i}"));
        }
        src.push_str("; }");
        let f = lower(&parse(&lex(&src, 0).unwrap()).unwrap()).unwrap().functions.remove(0);
        let a = allocate(&f);
        assert!(a.spills > 0 && a.frame_slots > 0, "{a:?}");
        // The 20 copies made by the declarations are simultaneously live.
        let decl_regs: Vec<Loc> = f.blocks[0]
            .insts
            .iter()
            .filter_map(|i| match i {
                crate::compiler::ir::Inst::Copy { dst, .. } => Some(a.locs[*dst as usize]),
                _ => None,
            })
            .collect();
        assert_eq!(decl_regs.len(), 20);
        let mut uniq = decl_regs.clone();
        uniq.sort_by_key(|l| l.encode());
        uniq.dedup();
        assert_eq!(uniq.len(), 20, "{decl_regs:?}");
        assert_eq!(Loc::Stack(3).encode(), 0x8003);
    }
}
