//! Where a function's entry probe goes: on its first instruction, unless the kernel would
//! refuse a uprobe there or run it the slow way, and a later instruction that the
//! function reaches with its arguments and return address untouched does better.
//!
//! How x86-64 uprobes run the instruction under the breakpoint: a few kinds the kernel
//! emulates (a `push` of a register, a relative `jmp`, `call` or conditional jump);
//! any other it copies out of line and single-steps, a second trap. On the VMs we run
//! on that trap is slow: an entry and return probe pair on Open MPI's `MPI_Waitall` or
//! `MPI_Test`, which start by loading a flag (`mov ompi_mpi_param_check(%rip),%rax`),
//! cost 15 us a call with empty programs, against 2 us on `MPI_Wait`, which starts with
//! `push %rbp` (docs/benchmarks.md, "Overhead on real codes", round 3). Such a load
//! changes neither the arguments nor the stack pointer, so the probe can sit on the
//! `push` after it and read the same arguments and return address; the return probe,
//! which replaces the return address on top of the stack, works there too.

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::target::symbols::Symbol;

/// At most this many instructions are stepped over before an emulated one.
const MAX_SKIPPED: usize = 4;

/// Where to put the entry probe of `sym`, whose code starts at `code[0]`:
/// - on a `lock`-prefixed instruction the kernel refuses a uprobe (x86 `is_prefix_bad`),
///   and where the file is not mapped yet when the probe is attached (a process held at
///   exec) it leaves the breakpoint out without a word. glibc's `pthread_spin_lock`
///   starts with `lock decl (%rdi)`: such a function is probed on its second
///   instruction. (A spin that loops back to the locked instruction passes the probe
///   again: the retries show as calls nested in the first.) None if the locked
///   instruction is not one [`locked_instruction_len`] knows.
/// - after leading instructions the kernel would single-step and that leave the
///   arguments and the stack pointer alone ([`harmless_len`]), when the instruction
///   after them is one it emulates ([`emulated`]);
/// - otherwise on the symbol itself.
pub fn probe_point(sym: &Symbol, code: &[u8]) -> Option<Symbol> {
    if code.first() == Some(&LOCK) {
        let len = locked_instruction_len(code)?;
        return Some(moved(sym, len));
    }
    Some(moved(sym, skipped_prefix_len(code)))
}

/// [`probe_point`] for `sym` of `file`, reading its first bytes; `sym` itself when they
/// cannot be read or its first instruction is a `lock` one we do not know (the kernel then
/// refuses the probe, with an error the caller reports).
pub fn probe_point_in(file: &Path, sym: &Symbol) -> Symbol {
    let mut code = [0u8; 32];
    let read = std::fs::File::open(file)
        .and_then(|f| f.read_at(&mut code, sym.file_offset))
        .unwrap_or(0);
    probe_point(sym, &code[..read]).unwrap_or_else(|| sym.clone())
}

fn moved(sym: &Symbol, by: usize) -> Symbol {
    Symbol {
        vaddr: sym.vaddr + by as u64,
        file_offset: sym.file_offset + by as u64,
        ..sym.clone()
    }
}

/// Bytes of harmless instructions at the start of `code` before an emulated one; 0 if
/// the first is emulated already, or if no emulated one follows a few harmless ones.
fn skipped_prefix_len(code: &[u8]) -> usize {
    let mut at = 0;
    for _ in 0..=MAX_SKIPPED {
        let rest = code.get(at..).unwrap_or_default();
        if emulated(rest) {
            return at;
        }
        match harmless_len(rest) {
            Some(len) => at += len,
            None => return 0,
        }
    }
    0
}

const LOCK: u8 = 0xf0;

/// Whether the kernel's x86 uprobes emulate the instruction at `code[0]` rather than
/// single-step it: `push` of a 64-bit register (with or without REX.B), and the
/// relative jumps and calls.
pub fn emulated(code: &[u8]) -> bool {
    let push = matches!(code, [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..]);
    let branch = matches!(
        code,
        [0xe8 | 0xe9 | 0xeb | 0x70..=0x7f, ..] | [0x0f, 0x80..=0x8f, ..]
    );
    push || branch
}

/// x86-64 registers (ModRM numbering, REX bit 3 included) a probed function may not have
/// changed when its entry probe runs: the six argument registers (the probes read them)
/// and the stack pointer (they read the return address and the stack arguments at it).
fn kept_register(reg: u8) -> bool {
    const RCX: u8 = 1;
    const RDX: u8 = 2;
    const RSP: u8 = 4;
    const RSI: u8 = 6;
    const RDI: u8 = 7;
    const R8: u8 = 8;
    const R9: u8 = 9;
    matches!(reg, RCX | RDX | RSP | RSI | RDI | R8 | R9)
}

/// Length of the instruction at `code[0]` if it changes nothing but one register that
/// the entry probe does not read: `endbr64`, or a `mov` from memory or `lea` into such a
/// register (compilers put a load of a global flag first: Open MPI's parameter check,
/// MPICH's error-handling state). None for anything else.
fn harmless_len(code: &[u8]) -> Option<usize> {
    if code.starts_with(&[0xf3, 0x0f, 0x1e, 0xfa]) {
        return Some(4); // endbr64
    }
    let byte = |i: usize| code.get(i).copied();
    let mut i = 0;
    let mut rex = 0;
    if byte(0)? & 0xf0 == 0x40 {
        rex = byte(0)?;
        i += 1;
    }
    // mov r32/r64, r/m; lea r, m
    if !matches!(byte(i)?, 0x8b | 0x8d) {
        return None;
    }
    i += 1;
    let modrm = byte(i)?;
    if modrm >> 6 == 3 {
        return None; // a register source: not what compilers put first
    }
    let dest = ((modrm >> 3) & 7) | ((rex & 0x4) << 1);
    if kept_register(dest) {
        return None;
    }
    Some(i + memory_operand_len(&code[i..])?)
}

/// Length of a ModRM byte with a memory operand and what follows it (SIB byte and
/// displacement), `code[0]` being the ModRM byte.
fn memory_operand_len(code: &[u8]) -> Option<usize> {
    let byte = |i: usize| code.get(i).copied();
    let modrm = byte(0)?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return None;
    }
    let mut i = 1;
    if rm == 4 {
        let sib = byte(i)?;
        i += 1;
        if md == 0 && sib & 7 == 5 {
            i += 4;
        }
    } else if md == 0 && rm == 5 {
        i += 4; // rip-relative
    }
    i += match md {
        1 => 1,
        2 => 4,
        _ => 0,
    };
    Some(i)
}

/// Length of a `lock`-prefixed x86-64 instruction (the read-modify-write forms `lock` is
/// allowed on, with a memory operand): None if `code` does not start with one we know.
fn locked_instruction_len(code: &[u8]) -> Option<usize> {
    let byte = |i: usize| code.get(i).copied();
    if byte(0)? != LOCK {
        return None;
    }
    let mut i = 1;
    let mut operand16 = false;
    while byte(i)? == 0x66 {
        operand16 = true;
        i += 1;
    }
    if byte(i)? & 0xf0 == 0x40 {
        i += 1; // REX
    }
    let imm = match byte(i)? {
        0x0f => {
            i += 1;
            match byte(i)? {
                // cmpxchg, xadd, bts/btr/btc, cmpxchg8b/16b
                0xb0 | 0xb1 | 0xc0 | 0xc1 | 0xab | 0xb3 | 0xbb | 0xc7 => 0,
                0xba => 1, // bt* r/m, imm8
                _ => return None,
            }
        }
        // add, or, adc, sbb, and, sub, xor r/m, reg; xchg; inc/dec; not/neg
        0x00 | 0x01 | 0x08 | 0x09 | 0x10 | 0x11 | 0x18 | 0x19 | 0x20 | 0x21 | 0x28 | 0x29
        | 0x30 | 0x31 | 0x86 | 0x87 | 0xfe | 0xff | 0xf6 | 0xf7 => 0,
        0x80 | 0x83 => 1,
        0x81 if operand16 => 2,
        0x81 => 4,
        _ => return None,
    };
    i += 1;
    Some(i + memory_operand_len(&code[i..])? + imm)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym() -> Symbol {
        Symbol {
            name: "f".into(),
            vaddr: 0x1000,
            file_offset: 0x800,
            is_function: true,
        }
    }

    fn offset(code: &[u8]) -> Option<u64> {
        probe_point(&sym(), code).map(|s| {
            assert_eq!(s.vaddr - 0x1000, s.file_offset - 0x800);
            s.vaddr - 0x1000
        })
    }

    #[test]
    fn lengths_of_locked_instructions() {
        for (code, len) in [
            (&[0xf0, 0xff, 0x0f, 0x75][..], 3),             // lock decl (%rdi)
            (&[0xf0, 0x0f, 0xb1, 0x0f][..], 4),             // lock cmpxchg %ecx,(%rdi)
            (&[0xf0, 0x48, 0x0f, 0xb1, 0x57, 0x08][..], 6), // lock cmpxchg %rdx,8(%rdi)
            (&[0xf0, 0x83, 0x07, 0x01][..], 4),             // lock addl $1,(%rdi)
            (&[0xf0, 0x0f, 0xc1, 0x44, 0x24, 0x10][..], 6), // lock xadd %eax,0x10(%rsp)
            (&[0xf0, 0x81, 0x05, 1, 0, 0, 0, 2, 0, 0, 0][..], 11), // lock addl $2,x(%rip)
        ] {
            assert_eq!(locked_instruction_len(code), Some(len), "{code:02x?}");
            assert_eq!(offset(code), Some(len as u64), "{code:02x?}");
        }
        assert_eq!(locked_instruction_len(&[0x41, 0x57]), None);
        assert_eq!(locked_instruction_len(&[0xf0, 0xff, 0xc0]), None); // register operand
        assert_eq!(offset(&[0xf0, 0xff, 0xc0]), None);
    }

    #[test]
    fn a_leading_load_is_stepped_over_to_a_push() {
        // Open MPI 4.1's MPI_Waitall: mov 0x84e61(%rip),%rax; push %r12
        let waitall = [0x48, 0x8b, 0x05, 0x61, 0x4e, 0x08, 0x00, 0x41, 0x54];
        assert_eq!(offset(&waitall), Some(7));
        // MPICH 4's MPI_Init: lea 0x268f991(%rip),%rax; push %r12
        let init = [0x48, 0x8d, 0x05, 0x91, 0xf9, 0x68, 0x02, 0x41, 0x54];
        assert_eq!(offset(&init), Some(7));
        // endbr64; mov 0x10(%rdi),%eax; push %rbx
        assert_eq!(
            offset(&[0xf3, 0x0f, 0x1e, 0xfa, 0x8b, 0x47, 0x10, 0x53]),
            Some(7)
        );
        // endbr64; jmp rel32
        assert_eq!(offset(&[0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 0, 0, 0, 0]), Some(4));
    }

    #[test]
    fn the_first_instruction_is_kept_when_moving_would_not_help_or_not_be_safe() {
        // push %r15 first: emulated already.
        assert_eq!(offset(&[0x41, 0x57, 0x41, 0x56]), Some(0));
        // A load into an argument register (mov 0x10(%rip),%rdi; push %rbx).
        assert_eq!(offset(&[0x48, 0x8b, 0x3d, 0x10, 0, 0, 0, 0x53]), Some(0));
        // ... into %r9 (REX.R): mov 0x10(%rip),%r9; push %rbx
        assert_eq!(offset(&[0x4c, 0x8b, 0x0d, 0x10, 0, 0, 0, 0x53]), Some(0));
        // A load followed by something single-stepped too (mov (%rdi),%eax; add ...).
        assert_eq!(offset(&[0x8b, 0x07, 0x83, 0xc0, 0x01]), Some(0));
        // A store (mov %eax,(%rdi)) is not stepped over.
        assert_eq!(offset(&[0x89, 0x07, 0x53]), Some(0));
        // sub $8,%rsp changes the stack pointer.
        assert_eq!(offset(&[0x48, 0x83, 0xec, 0x08, 0x53]), Some(0));
        // Code cut short.
        assert_eq!(offset(&[0x48, 0x8b, 0x05, 0x61]), Some(0));
        assert_eq!(offset(&[]), Some(0));
    }
}
