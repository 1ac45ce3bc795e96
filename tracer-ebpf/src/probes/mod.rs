//! The programs, one file per probe family.

pub mod arrays;
pub mod calls;
pub mod floor;
pub mod futex;
pub mod procedures;
pub mod process;
mod raw_tracepoint;
pub mod sampler;
pub mod sched;
pub mod status;
mod tracepoint;

pub use raw_tracepoint::{arg, kernel_field, task_tid};
pub use tracepoint::field;

/// Declares a uprobe (or uretprobe) program twice: `$name` in a `uprobe` section, which
/// userspace attaches one perf event per probe point, and `$multi` in a `uprobe.multi`
/// section, which it attaches as one uprobe_multi link for every probe point of a binary
/// (Linux 6.6+; the kernel then waits one grace period per link, not one per point, when
/// the link goes). Both run `$body`, so one object serves either attach path and the
/// records are the same. Userspace loads only the set it attaches. The twins' names end in
/// `_m` (the kernel keeps 15 bytes of a program's name).
macro_rules! uprobe_twins {
    (uprobe $name:ident, $multi:ident => $body:path) => {
        #[aya_ebpf::macros::uprobe]
        pub fn $name(ctx: aya_ebpf::programs::ProbeContext) -> u32 {
            $body(&ctx);
            0
        }

        #[aya_ebpf::macros::uprobe(multi)]
        pub fn $multi(ctx: aya_ebpf::programs::ProbeContext) -> u32 {
            $body(&ctx);
            0
        }
    };
    (uretprobe $name:ident, $multi:ident => $body:path) => {
        #[aya_ebpf::macros::uretprobe]
        pub fn $name(ctx: aya_ebpf::programs::RetProbeContext) -> u32 {
            $body(&ctx);
            0
        }

        #[aya_ebpf::macros::uretprobe(multi)]
        pub fn $multi(ctx: aya_ebpf::programs::RetProbeContext) -> u32 {
            $body(&ctx);
            0
        }
    };
}
pub(crate) use uprobe_twins;
