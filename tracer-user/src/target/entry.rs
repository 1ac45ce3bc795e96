//! Where a function's entry probe goes: on its first instruction, unless the kernel would
//! refuse a uprobe there or run it the slow way, and a later instruction that the
//! function reaches with its arguments and return address untouched does better.
//!
//! How x86-64 uprobes run the instruction under the breakpoint: a few kinds the kernel
//! emulates (a `push` of a register, a relative `jmp`, `call` or conditional jump, and
//! on recent kernels its own one- to eight-byte NOPs, the five-byte one without even
//! the trap); any other it copies out of line and single-steps, a second trap. On the
//! VMs we run on that trap is slow: an entry and return probe pair on Open MPI's `MPI_Waitall` or
//! `MPI_Test`, which start by loading a flag (`mov ompi_mpi_param_check(%rip),%rax`),
//! cost 15 us a call with empty programs, against 2 us on `MPI_Wait`, which starts with
//! `push %rbp` (docs/benchmarks.md, "Overhead on real codes", round 3). Such a load
//! changes neither the arguments the probe reads nor the stack pointer, so the probe can
//! sit on the `push` after it and read the same arguments and return address; the
//! return probe, which replaces the return address on top of the stack, works there too.
//! Likewise libgomp's `GOMP_barrier` (`endbr64`, two loads, a `test`, then a `je`) and
//! glibc's `pthread_mutex_lock` (loads and `and`s of registers it then branches on).

use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::target::symbols::Symbol;
use tracer_common::CallLayout;

/// At most this many instructions are stepped over before an emulated one.
const MAX_SKIPPED: usize = 4;

/// The arguments a function's entry probe reads: a bit per argument index, bit 0 the
/// first (`CallLayout::arguments_read`). The instructions a probe is moved past must
/// leave their registers alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ArgumentsRead(pub u16);

impl ArgumentsRead {
    /// A probe that reads no argument (`--func` procedures).
    pub(crate) const NONE: ArgumentsRead = ArgumentsRead(0);
    /// One that may read any.
    #[cfg(test)]
    pub(crate) const ALL: ArgumentsRead = ArgumentsRead(u16::MAX);

    /// What the call probes read of a call laid out as `layout`.
    pub(crate) fn of(layout: &CallLayout) -> ArgumentsRead {
        ArgumentsRead(layout.arguments_read())
    }

    /// Whether an instruction that writes register `reg` (ModRM numbering, REX bit 3
    /// included) would change what the probe reads: the stack pointer always (the probes
    /// read the return address and the stack arguments at it), an argument register
    /// when its argument is read.
    fn kept(self, reg: u8) -> bool {
        // x86-64 System V: the registers of arguments 0 to 5.
        const ARGUMENT_REGISTERS: [u8; 6] = [7, 6, 2, 1, 8, 9]; // rdi rsi rdx rcx r8 r9
        const RSP: u8 = 4;
        reg == RSP
            || ARGUMENT_REGISTERS
                .iter()
                .enumerate()
                .any(|(arg, &r)| r == reg && self.0 & (1 << arg) != 0)
    }
}

/// Where to put the entry probe of `sym`, whose code starts at `code[0]`, for a probe
/// that reads `args`:
/// - on a `lock`-prefixed instruction the kernel refuses a uprobe (x86 `is_prefix_bad`),
///   and where the file is not mapped yet when the probe is attached (a process held at
///   exec) it leaves the breakpoint out without a word. glibc's `pthread_spin_lock`
///   starts with `lock decl (%rdi)`: such a function is probed on its second
///   instruction. (A spin that loops back to the locked instruction passes the probe
///   again: the retries show as calls nested in the first.) None if the locked
///   instruction is not one [`locked_instruction_len`] knows.
/// - after leading instructions the kernel would single-step and that change neither
///   memory nor the stack pointer nor the registers of `args` ([`harmless_len`]), when
///   the instruction after them is one it emulates ([`emulated`]);
/// - otherwise on the symbol itself.
pub(crate) fn probe_point(sym: &Symbol, code: &[u8], args: ArgumentsRead) -> Option<Symbol> {
    if code.first() == Some(&LOCK) {
        let len = locked_instruction_len(code)?;
        return Some(moved(sym, len));
    }
    Some(moved(sym, skipped_prefix_len(code, args)))
}

/// [`probe_point`] for `sym` of `file`, reading its first bytes; `sym` itself when they
/// cannot be read or its first instruction is a `lock` one we do not know (where the
/// kernel refuses the probe, or for a process held at exec leaves it out: callers that
/// may meet one, the C library's, use [`probe_point`] and skip the call).
pub(crate) fn probe_point_in(file: &Path, sym: &Symbol, args: ArgumentsRead) -> Symbol {
    let mut code = [0u8; 64];
    let read = std::fs::File::open(file)
        .and_then(|f| f.read_at(&mut code, sym.file_offset))
        .unwrap_or(0);
    probe_point(sym, &code[..read], args).unwrap_or_else(|| sym.clone())
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
fn skipped_prefix_len(code: &[u8], args: ArgumentsRead) -> usize {
    let mut at = 0;
    for _ in 0..=MAX_SKIPPED {
        let rest = code.get(at..).unwrap_or_default();
        if emulated(rest) {
            return at;
        }
        match harmless_len(rest, args) {
            Some(len) => at += len,
            None => return 0,
        }
    }
    0
}

const LOCK: u8 = 0xf0;
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// The NOPs x86 kernels emulate under a uprobe: their own one- to eight-byte forms
/// (`x86_nops`), byte for byte. A probe on the five-byte one is rewritten on its first
/// hit into a call of a trampoline that enters the kernel by a system call, no trap at
/// all. Measured here (docs/benchmarks.md, "Overhead on real codes", round 6): about
/// 0.82 us an entry and return probe pair on these, 0.74 us on the five-byte one, 10 us
/// single-stepped on a nine-byte NOP. Kernels without NOP emulation single-step them,
/// which costs what a probe on the instructions before them would.
const EMULATED_NOPS: [&[u8]; 8] = [
    &[0x90],
    &[0x66, 0x90],
    &[0x0f, 0x1f, 0x00],
    &[0x0f, 0x1f, 0x40, 0x00],
    &[0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],
    &[0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00],
    &[0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00],
];

/// Whether the kernel's x86 uprobes emulate the instruction at `code[0]` rather than
/// single-step it: `push` of a 64-bit register (with or without REX.B), the relative
/// jumps and calls, and the kernel's own NOPs ([`EMULATED_NOPS`]; code built with
/// `-fcf-protection -mnop-mcount` starts with `endbr64` and the five-byte one).
pub(crate) fn emulated(code: &[u8]) -> bool {
    let push = matches!(code, [0x50..=0x57, ..] | [0x41, 0x50..=0x57, ..]);
    let branch = matches!(
        code,
        [0xe8 | 0xe9 | 0xeb | 0x70..=0x7f, ..] | [0x0f, 0x80..=0x8f, ..]
    );
    let nop = EMULATED_NOPS.iter().any(|nop| code.starts_with(nop));
    push || branch || nop
}

/// Length of the instruction at `code[0]` if it writes no memory, no control flow and no
/// register but the flags and one the probe does not read (`args`, the stack pointer):
/// `endbr64`; a load, `lea` or register move; a move of a constant; an `add`, `or`,
/// `and`, `sub` or `xor` into a register; a `cmp` or `test`. None for anything else
/// (and for the 16-bit operand forms, which compilers do not put first).
fn harmless_len(code: &[u8], args: ArgumentsRead) -> Option<usize> {
    if code.starts_with(&ENDBR64) {
        return Some(4);
    }
    let byte = |i: usize| code.get(i).copied();
    let mut i = 0;
    if matches!(byte(i)?, 0x64 | 0x65) {
        i += 1; // fs/gs: a thread-local operand
    }
    let mut rex = 0;
    if byte(i)? & 0xf0 == 0x40 {
        rex = byte(i)?;
        i += 1;
    }
    let wide = rex & 0x8 != 0;
    let op = byte(i)?;
    i += 1;
    let harmless = |dest: Option<u8>, len: usize| match dest {
        Some(reg) if args.kept(reg) => None,
        _ => Some(len),
    };
    const RAX: u8 = 0;
    match op {
        // mov $imm, r32 (r64 with REX.W)
        0xb8..=0xbf => {
            let dest = (op & 7) | ((rex & 0x1) << 3);
            return harmless(Some(dest), i + if wide { 8 } else { 4 });
        }
        // add, or, and, sub, xor %eax with imm32; cmp, test %eax with imm32 / %al, imm8
        0x05 | 0x0d | 0x25 | 0x2d | 0x35 => return harmless(Some(RAX), i + 4),
        0x3d | 0xa9 => return Some(i + 4),
        0x3c | 0xa8 => return Some(i + 1),
        _ => {}
    }
    let modrm = byte(i)?;
    let register_operand = modrm >> 6 == 3;
    let ext = (modrm >> 3) & 7;
    let reg = ext | ((rex & 0x4) << 1);
    let rm = (modrm & 7) | ((rex & 0x1) << 3);
    let operand = i + modrm_operand_len(&code[i..])?;
    match op {
        // mov, add, or, and, sub, xor into the ModRM register
        0x8b | 0x03 | 0x0b | 0x23 | 0x2b | 0x33 => harmless(Some(reg), operand),
        0x8d if !register_operand => harmless(Some(reg), operand), // lea
        // mov, add, or, and, sub, xor into a register operand (not memory)
        0x89 | 0x01 | 0x09 | 0x21 | 0x29 | 0x31 if register_operand => harmless(Some(rm), operand),
        // cmp and test: the flags only
        0x38..=0x3b | 0x84 | 0x85 => Some(operand),
        0x80 | 0x83 if ext == 7 => Some(operand + 1),
        0x81 if ext == 7 => Some(operand + 4),
        0xf6 if ext == 0 => Some(operand + 1),
        0xf7 if ext == 0 => Some(operand + 4),
        // add, or, and, sub, xor $imm into a register operand
        0x83 if register_operand && matches!(ext, 0 | 1 | 4 | 5 | 6) => {
            harmless(Some(rm), operand + 1)
        }
        0x81 if register_operand && matches!(ext, 0 | 1 | 4 | 5 | 6) => {
            harmless(Some(rm), operand + 4)
        }
        // mov $imm32, r/m64 into a register operand
        0xc7 if register_operand && ext == 0 => harmless(Some(rm), operand + 4),
        _ => None,
    }
}

/// Length of a ModRM byte and what follows it (SIB byte and displacement), `code[0]`
/// being the ModRM byte: 1 for a register operand.
fn modrm_operand_len(code: &[u8]) -> Option<usize> {
    let byte = |i: usize| code.get(i).copied();
    let modrm = byte(0)?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return Some(1);
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
    if byte(i)? >> 6 == 3 {
        return None; // `lock` needs a memory operand
    }
    Some(i + modrm_operand_len(&code[i..])? + imm)
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
        offset_reading(code, ArgumentsRead::ALL)
    }

    fn offset_reading(code: &[u8], args: ArgumentsRead) -> Option<u64> {
        probe_point(&sym(), code, args).map(|s| {
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
    fn registers_of_arguments_the_probe_does_not_read_may_change() {
        // libgomp's GOMP_barrier (no argument read): endbr64; mov 0x39dbd(%rip),%rax;
        // mov %fs:0x10(%rax),%rdi; test %rdi,%rdi; je
        let barrier = [
            0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8b, 0x05, 0xbd, 0x9d, 0x03, 0x00, 0x64, 0x48, 0x8b,
            0x78, 0x10, 0x48, 0x85, 0xff, 0x74, 0x0b,
        ];
        assert_eq!(offset_reading(&barrier, ArgumentsRead::NONE), Some(19));
        assert_eq!(offset_reading(&barrier, ArgumentsRead(0b1)), Some(0));
        // glibc's pthread_mutex_lock (argument 0 read): mov 0x10(%rdi),%eax;
        // mov %eax,%edx; and $0x17f,%edx; and $0x7c,%eax; jne
        let lock = [
            0x8b, 0x47, 0x10, 0x89, 0xc2, 0x81, 0xe2, 0x7f, 0x01, 0x00, 0x00, 0x83, 0xe0, 0x7c,
            0x0f, 0x85, 0, 0, 0, 0,
        ];
        assert_eq!(offset_reading(&lock, ArgumentsRead(0b1)), Some(14));
        assert_eq!(offset_reading(&lock, ArgumentsRead(0b101)), Some(0));
        // glibc's pthread_mutex_unlock: mov $0x1,%esi; jmp
        let unlock = [0xbe, 1, 0, 0, 0, 0xe9, 0, 0, 0, 0];
        assert_eq!(offset_reading(&unlock, ArgumentsRead(0b1)), Some(5));
        assert_eq!(offset_reading(&unlock, ArgumentsRead(0b11)), Some(0));
        // glibc's pthread_join: mov $0x1,%r8d; xor %ecx,%ecx; xor %edx,%edx; jmp
        let join = [0x41, 0xb8, 1, 0, 0, 0, 0x31, 0xc9, 0x31, 0xd2, 0xeb, 0x10];
        assert_eq!(offset_reading(&join, ArgumentsRead(0b11)), Some(10));
        assert_eq!(offset_reading(&join, ArgumentsRead(0b10011)), Some(0));
        // Five instructions before the branch: more than are stepped over.
        let long = [
            0x31, 0xc0, 0x31, 0xc0, 0x31, 0xc0, 0x31, 0xc0, 0x31, 0xc0, 0xeb, 0,
        ];
        assert_eq!(offset_reading(&long, ArgumentsRead::NONE), Some(0));
        assert_eq!(offset_reading(&long[2..], ArgumentsRead::NONE), Some(8));
    }

    #[test]
    fn the_call_table_says_which_arguments_a_probe_reads() {
        use tracer_analysis::calls::CALLS;
        let read = |name: &str| {
            let c = CALLS.iter().find(|c| c.symbol == name).unwrap();
            c.layout.arguments_read()
        };
        assert_eq!(read("GOMP_barrier"), 0);
        assert_eq!(read("pthread_mutex_lock"), 0b1);
        // MPI_Isend(buf, count, type, dest, tag, comm, request): all but the buffer.
        assert_eq!(read("MPI_Isend"), 0b111_1110);
    }

    #[test]
    fn a_probe_goes_on_a_nop_the_kernel_emulates() {
        // -fcf-protection -mnop-mcount: endbr64; nopl 0x0(%rax,%rax,1)
        let cet_nop5 = [0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x53];
        assert_eq!(offset(&cet_nop5), Some(4));
        // mov 0x10(%rip),%rax; nopl (%rax); add ...
        let load_nop3 = [
            0x48, 0x8b, 0x05, 0x10, 0, 0, 0, 0x0f, 0x1f, 0x00, 0x01, 0xf8,
        ];
        assert_eq!(offset(&load_nop3), Some(7));
        // xor %eax,%eax; xchg %ax,%ax
        assert_eq!(
            offset_reading(&[0x31, 0xc0, 0x66, 0x90], ArgumentsRead::NONE),
            Some(2)
        );
        // A nine-byte NOP is single-stepped like the endbr64 before it: no gain in moving.
        let nop9 = [0x66, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0];
        assert!(!emulated(&nop9));
        let cet_nop9 = [&[0xf3, 0x0f, 0x1e, 0xfa][..], &nop9, &[0x53]].concat();
        assert_eq!(offset(&cet_nop9), Some(0));
        // Not a NOP: nopl with another ModRM register field is `0f 1f /0` only.
        assert!(!emulated(&[0x0f, 0x1f, 0x48, 0x00]));
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
        // Stores are not stepped over: mov %eax,(%rdi); movl $0,(%rdi); addl $1,(%rdi)
        assert_eq!(offset(&[0x89, 0x07, 0x53]), Some(0));
        assert_eq!(offset(&[0xc7, 0x07, 0, 0, 0, 0, 0x53]), Some(0));
        assert_eq!(offset(&[0x83, 0x07, 0x01, 0x53]), Some(0));
        // sub $8,%rsp and mov %rdi,%rsp change the stack pointer.
        assert_eq!(
            offset_reading(&[0x48, 0x89, 0xfc, 0x53], ArgumentsRead::NONE),
            Some(0)
        );
        assert_eq!(offset(&[0x48, 0x83, 0xec, 0x08, 0x53]), Some(0));
        // Code cut short.
        assert_eq!(offset(&[0x48, 0x8b, 0x05, 0x61]), Some(0));
        assert_eq!(offset(&[]), Some(0));
    }
}
