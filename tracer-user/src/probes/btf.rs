//! Just enough of a BTF reader to find where a member lives inside a kernel struct
//! (aya keeps its type lookups private). Used for what the probes read in kernel
//! structures: `task_struct.se.sum_exec_runtime` (the kernel's own count of a thread's
//! CPU time), and what the raw tracepoints' task and binprm pointers lead to.

use super::{BtfError, ProbeError};

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

/// The kernel's BTF, kept as read: types are found by walking an index of where each
/// starts, and a struct's members are read only when asked for (parsing every type into
/// its own vectors took 0.17 s of every session's start).
pub(crate) struct KernelBtf {
    data: Vec<u8>,
    /// Where the string section starts in `data`, and its length.
    strings_at: usize,
    strings_len: usize,
    /// Where each type's record starts in `data`, by id (index 0, the void type, is 0).
    starts: Vec<usize>,
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// A type's common header.
struct TypeHeader {
    name_off: u32,
    kind: u32,
    kind_flag: bool,
    vlen: usize,
}

/// A struct member: its byte offset in the struct, and its type id.
struct Member {
    offset: u32,
    type_id: u32,
}

impl KernelBtf {
    pub(crate) fn from_sys_fs() -> Result<Self, ProbeError> {
        let path = "/sys/kernel/btf/vmlinux";
        let data = std::fs::read(path).map_err(|source| BtfError::Read { path, source })?;
        let btf = Self::parse(data).ok_or(BtfError::Parse { path })?;
        Ok(btf)
    }

    fn parse(data: Vec<u8>) -> Option<Self> {
        if data.get(..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr_len = u32_at(&data, 4)? as usize;
        let (type_off, type_len) = (u32_at(&data, 8)? as usize, u32_at(&data, 12)? as usize);
        let (str_off, str_len) = (u32_at(&data, 16)? as usize, u32_at(&data, 20)? as usize);
        let types_at = hdr_len + type_off;
        let types_end = types_at + type_len;
        if data.len() < types_end || data.len() < hdr_len + str_off + str_len {
            return None;
        }
        let mut starts = vec![0];
        let mut at = types_at;
        while at < types_end {
            starts.push(at);
            let info = u32_at(&data, at + 4)?;
            let vlen = (info & 0xffff) as usize;
            at += 12
                + match (info >> 24) & 0x1f {
                    1 | 14 | 17 => 4, // INT, VAR, DECL_TAG
                    3 => 12,          // ARRAY
                    KIND_STRUCT | KIND_UNION => 12 * vlen,
                    6 | 13 => 8 * vlen,   // ENUM, FUNC_PROTO
                    15 | 19 => 12 * vlen, // DATASEC, ENUM64
                    2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                    _ => return None,
                };
        }
        Some(KernelBtf {
            data,
            strings_at: hdr_len + str_off,
            strings_len: str_len,
            starts,
        })
    }

    fn name(&self, off: u32) -> &[u8] {
        let strings = &self.data[self.strings_at..self.strings_at + self.strings_len];
        let rest = strings.get(off as usize..).unwrap_or(&[]);
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    fn header(&self, id: usize) -> Option<TypeHeader> {
        let at = *self.starts.get(id).filter(|&&at| at != 0)?;
        let info = u32_at(&self.data, at + 4)?;
        Some(TypeHeader {
            name_off: u32_at(&self.data, at)?,
            kind: (info >> 24) & 0x1f,
            kind_flag: info >> 31 == 1,
            vlen: (info & 0xffff) as usize,
        })
    }

    /// The id of the struct called `name`.
    fn struct_named(&self, name: &str) -> Option<usize> {
        (1..self.starts.len()).find(|&id| {
            self.header(id)
                .is_some_and(|t| t.kind == KIND_STRUCT && self.name(t.name_off) == name.as_bytes())
        })
    }

    /// Where `member` is in the struct or union with id `id`.
    fn member(&self, id: usize, member: &str) -> Option<Member> {
        let t = self.header(id)?;
        if t.kind != KIND_STRUCT && t.kind != KIND_UNION {
            return None;
        }
        let first = self.starts[id] + 12;
        (0..t.vlen).find_map(|i| {
            let at = first + 12 * i;
            if self.name(u32_at(&self.data, at)?) != member.as_bytes() {
                return None;
            }
            let off = u32_at(&self.data, at + 8)?;
            let bits = if t.kind_flag { off & 0xff_ffff } else { off };
            Some(Member {
                offset: bits / 8,
                type_id: u32_at(&self.data, at + 4)?,
            })
        })
    }

    /// Byte offset of a path of members, e.g. `task_struct` + ["se", "sum_exec_runtime"].
    pub(crate) fn offset_of(&self, name: &str, path: &[&str]) -> Option<u32> {
        let mut id = self.struct_named(name)?;
        let mut total = 0;
        for m in path {
            let Member { offset, type_id } = self.member(id, m)?;
            total += offset;
            id = type_id as usize;
        }
        Some(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_task_cpu_time_and_the_stolen_time() {
        let btf = KernelBtf::from_sys_fs().unwrap();
        let pid = btf.offset_of("task_struct", &["pid"]).unwrap();
        let tgid = btf.offset_of("task_struct", &["tgid"]).unwrap();
        assert_eq!(tgid, pid + 4, "pid and tgid are adjacent");
        let sum = btf
            .offset_of("task_struct", &["se", "sum_exec_runtime"])
            .unwrap();
        assert!(sum > 0 && sum.is_multiple_of(8));
        assert!(btf.offset_of("task_struct", &["no_such_member"]).is_none());
        // The way to the CPU's stolen time (a kernel built with FAIR_GROUP_SCHED and
        // PARAVIRT_TIME_ACCOUNTING, as this one is).
        let cfs_rq = btf.offset_of("task_struct", &["se", "cfs_rq"]).unwrap();
        assert!(cfs_rq > 0 && cfs_rq.is_multiple_of(8));
        assert!(btf.offset_of("cfs_rq", &["rq"]).unwrap().is_multiple_of(8));
        let stolen = btf.offset_of("rq", &["prev_steal_time_rq"]).unwrap();
        assert!(stolen > 0 && stolen.is_multiple_of(8), "{stolen}");
        // What the raw tracepoints read: thread_info is task_struct's first member on
        // x86-64, and its cpu follows the flags (and syscall_work) words.
        assert_eq!(btf.offset_of("task_struct", &["thread_info"]), Some(0));
        let cpu = btf
            .offset_of("task_struct", &["thread_info", "cpu"])
            .unwrap();
        assert!(cpu > 0 && cpu < 64, "{cpu}");
        let exit_state = btf.offset_of("task_struct", &["exit_state"]).unwrap();
        let exit_code = btf.offset_of("task_struct", &["exit_code"]).unwrap();
        assert_eq!(
            exit_code,
            exit_state + 4,
            "exit_state and exit_code are adjacent"
        );
        let filename = btf.offset_of("linux_binprm", &["filename"]).unwrap();
        assert!(filename.is_multiple_of(8), "{filename}");
    }
}
