//! Load-time configuration: what userspace writes into the probes' tables before they
//! run (global settings, per-call argument layouts, per-library-family facts).

/// Library families whose calls the probes understand. Part of the cookie of a call probe.
pub mod flavor {
    pub const OPEN_MPI: u8 = 1;
    pub const MPICH: u8 = 2;
    pub const PVM: u8 = 3;
    /// glibc's pthread calls (in libc.so.6 since glibc 2.34, libpthread.so.0 before).
    pub const GLIBC_PTHREAD: u8 = 4;
    /// Number of slots in the flavor table (index 0 unused).
    pub const COUNT: u32 = 5;
}

/// Packs what a call probe needs to know about its attachment into the 64-bit cookie:
/// the call id, the library flavor, and the symbol's virtual address in its file (so the
/// probe can compute the library's load bias from the instruction pointer).
pub const fn call_cookie(call: u16, flavor: u8, symbol_vaddr: u32) -> u64 {
    (call as u64) | ((flavor as u64) << 16) | ((symbol_vaddr as u64) << 32)
}

/// Marks an argument slot as unused in a [`CallLayout`].
pub const NO_ARG: u8 = 0xff;
/// An argument slot that is the probed address itself (the function's address in the
/// process: an OpenMP outlined function's identity).
pub const ARG_IP: u8 = 0xfe;

/// How a call's exit learns the actual source, tag and size of what it received.
pub mod status_mode {
    pub const NONE: u8 = 0;
    /// Argument `status` points to an MPI_Status (layout from the flavor table).
    pub const MPI_STATUS: u8 = 1;
    /// Arguments `status`, `status + 1`, `status + 2` point to int source, tag, length
    /// (pvm_precv).
    pub const INT_POINTERS: u8 = 2;
    /// The library's current receive buffer global (PVM's `pvmrbuf`).
    pub const PVM_RBUF: u8 = 3;
    /// Argument `status` points to an array of MPI_Status, length in argument `count`.
    pub const MPI_STATUS_ARRAY: u8 = 4;
    /// Argument `status` points to an int array whose length is the int the call wrote
    /// through `out` (Waitsome/Testsome's indices): a handle array before the exit.
    pub const INDEX_ARRAY: u8 = 5;
}

/// When a call's array of handles is written ([`CallLayout::array_when`]).
pub mod array_when {
    /// With the entry record, always.
    pub const ENTRY: u8 = 0;
    /// A test of requests (Testall, Testsome), whose handles matter only for those it
    /// completed: read at the entry into the thread's state, written before the exit if
    /// the int the call wrote through `out` (its flag or count) is positive. A polling
    /// loop then writes one record per call. Arrays longer than one record
    /// ([`crate::ARRAY_CHUNK`]) are written with the entry.
    pub const IF_OUT_POSITIVE: u8 = 1;
    /// As [`IF_OUT_POSITIVE`], for Testany: written if the index it wrote is not
    /// negative (MPI_UNDEFINED is).
    pub const IF_OUT_NOT_NEGATIVE: u8 = 2;
}

/// Which argument (0-based, `NO_ARG` if none) of a call holds each field. One entry per
/// call id, written by userspace into the probes' layout table.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLayout {
    pub peer: u8,
    pub tag: u8,
    pub peer2: u8,
    pub tag2: u8,
    pub comm: u8,
    pub count: u8,
    pub dtype: u8,
    /// Pointer to a request handle read at entry (Wait, Test); for a flavor with
    /// `handle_by_value`, the argument is the handle itself (a lock's address).
    pub handle_in: u8,
    /// Pointer to a handle the call writes (Isend/Irecv request, new communicator).
    pub handle_out: u8,
    /// Pointer to an int the call writes (rank, size, index, flag).
    pub out: u8,
    /// Array argument read at entry (requests or task ids), length in `count`.
    pub array: u8,
    pub status: u8,
    /// One of [`status_mode`].
    pub status_mode: u8,
    /// Nonzero if the entry record should carry the library's load bias in `handle`.
    pub want_bias: u8,
    /// Bytes of one element of `array` (4 or 8); 0 means the flavor's handle size.
    pub array_elem: u8,
    /// Nonzero if the call never waits for another thread or process (MPI_Comm_rank,
    /// MPI_Isend, an unlock): its entry record may wait for its exit
    /// ([`crate::CallPairRecord`]).
    pub cannot_block: u8,
    /// Nonzero: the `handle_in` argument is a handle passed by value (an MPI_Group, the
    /// second group of MPI_Group_union), read like `comm`, not a pointer to one.
    pub handle_in_by_value: u8,
    /// Values of `array` per unit of `count` (3 for MPI_Group_range_incl's rank
    /// triples); 0 means 1.
    pub array_per_count: u8,
    /// When `array` is written: one of [`array_when`].
    pub array_when: u8,
    /// Nonzero: `array` is an array of ints whose length no argument gives (MPI_Cart_sub's
    /// `remain_dims` has the cartesian communicator's ndims, which only userspace knows):
    /// the probes write a chunk of it ([`crate::ARRAY_CHUNK`] ints), or what of the chunk
    /// lies in the array's first page when the next page is not mapped (the array then
    /// ends in its first page), and userspace takes the values it needs.
    pub array_unsized: u8,
}

impl CallLayout {
    pub const EMPTY: CallLayout = CallLayout {
        peer: NO_ARG,
        tag: NO_ARG,
        peer2: NO_ARG,
        tag2: NO_ARG,
        comm: NO_ARG,
        count: NO_ARG,
        dtype: NO_ARG,
        handle_in: NO_ARG,
        handle_out: NO_ARG,
        out: NO_ARG,
        array: NO_ARG,
        status: NO_ARG,
        status_mode: status_mode::NONE,
        want_bias: 0,
        array_elem: 0,
        cannot_block: 0,
        handle_in_by_value: 0,
        array_per_count: 0,
        array_when: array_when::ENTRY,
        array_unsized: 0,
    };

    /// The arguments the call probes read at entry, a bit per argument index (bit 0:
    /// the first). Where the entry probe may go depends on it (tracer-user
    /// `target::entry`): the instructions it steps over must leave these alone.
    pub const fn arguments_read(&self) -> u16 {
        let mut slots = [
            self.peer,
            self.tag,
            self.peer2,
            self.tag2,
            self.comm,
            self.count,
            self.dtype,
            self.handle_in,
            self.handle_out,
            self.out,
            self.array,
            self.status,
            NO_ARG,
            NO_ARG,
        ];
        if self.status_mode == status_mode::INT_POINTERS && self.status < ARG_IP - 2 {
            slots[12] = self.status + 1;
            slots[13] = self.status + 2;
        }
        let mut mask = 0u16;
        let mut i = 0;
        while i < slots.len() {
            if slots[i] < 16 {
                mask |= 1 << slots[i];
            }
            i += 1;
        }
        mask
    }
}

/// How the probes turn a datatype argument into an element size.
pub mod dtype_mode {
    pub const NONE: u32 = 0;
    /// The datatype is a pointer to an object with a size_t size at `dtype_size_off`
    /// (Open MPI's `opal_datatype_t::size`).
    pub const POINTER_TO_SIZE: u32 = 1;
    /// MPICH builtin handles carry the size in bits 8-15.
    pub const MPICH_HANDLE: u32 = 2;
    /// PVM type codes (PVM_BYTE, PVM_INT, ...).
    pub const PVM_CODE: u32 = 3;
}

/// How a status struct stores the received byte count.
pub mod count_mode {
    /// A size_t at `status_count_off` (Open MPI `_ucount`).
    pub const SIZE_T: u32 = 1;
    /// MPICH: int count_lo, then count_hi_and_cancelled (bit 0 = cancelled).
    pub const MPICH_SPLIT: u32 = 2;
}

/// Per-library-family facts, written by userspace into the probes' flavor table.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlavorConfig {
    /// Bytes of an MPI_Comm / MPI_Request handle (8 for pointers, 4 for int handles).
    pub handle_size: u32,
    pub dtype_mode: u32,
    pub dtype_size_off: u32,
    pub count_mode: u32,
    pub status_size: u32,
    pub status_source_off: u32,
    pub status_tag_off: u32,
    pub status_count_off: u32,
    /// PVM: virtual address of the `pvmrbuf` global in libpvm3 (0 if unknown).
    pub rbuf_vaddr: u64,
    /// PVM: offsets of source, tag and length in `struct pmsg`.
    pub pmsg_src_off: u32,
    pub pmsg_tag_off: u32,
    pub pmsg_len_off: u32,
    /// 1: a layout's `handle_in` argument is the handle itself, not a pointer to it (the
    /// pthread calls take the address of the lock, which is what identifies it).
    pub handle_by_value: u32,
}

/// Global probe settings, including offsets in kernel structures read from kernel BTF and
/// in the futex tracepoints' records read from tracefs (they change between kernel
/// versions and builds).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeConfig {
    /// 1: MPI/PVM/procedure probes fire in every process (system-wide mode); a process
    /// becomes traced by its first such call.
    pub trace_all: u32,
    /// 1: stop a traced process at exec (SIGSTOP) so userspace can attach procedure
    /// probes before the new program runs; userspace sends SIGCONT.
    pub hold_on_exec: u32,
    /// The tracer's own process, never traced.
    pub self_tgid: u32,
    /// Offsets from kernel BTF of what the raw tracepoints read through the pointers they
    /// are passed: `pid`, `exit_state` and `thread_info.cpu` in `task_struct`, `filename`
    /// in `linux_binprm`.
    pub task_pid: u32,
    pub task_exit_state: u32,
    pub task_cpu: u32,
    pub bprm_filename: u32,
    /// Field offsets of the futex tracepoints' records, from tracefs.
    pub futex_uaddr: u32,
    pub futex_op: u32,
    pub futex_val: u32,
    pub futex_ret: u32,
    /// Offset of `se.sum_exec_runtime` in `task_struct` (from kernel BTF); 0 if unknown.
    pub task_cpu_time: u32,
    /// Where the time the hypervisor stole from this CPU is, from kernel BTF (0 if
    /// unknown): `se.cfs_rq` in `task_struct`, `rq` in `cfs_rq`, `prev_steal_time_rq` in
    /// `rq` (the steal the run queue's clock has left out, updated at least every tick).
    pub task_cfs_rq: u32,
    pub cfs_rq_rq: u32,
    pub rq_stolen: u32,
    /// How far the kernel's count of a running thread's CPU time may lag behind (a tick):
    /// the probes' clock never runs more than this ahead of that count. 0: no bound
    /// (CPUs without a regular tick, `nohz_full`).
    pub kernel_clock_lag_ns: u32,
    /// Wake the reader each time a CPU has written another this many bytes of records, a
    /// power of two (0: the probes' default).
    pub wakeup_bytes: u32,
    /// Slots per CPU in `SLOTS`, a power of two; 0: every record goes to the ring.
    pub slots_per_cpu: u32,
    /// Offset of `exit_code` in `task_struct` (from kernel BTF); 0 if unknown.
    pub task_exit_code: u32,
    /// 1: the sampler runs (`--sample`), so every call's entry also keeps its return
    /// address (`CallFrame::site`), which the sampler puts back in the stack it copies
    /// where the return probe's trampoline replaced it.
    pub sampling: u32,
}
