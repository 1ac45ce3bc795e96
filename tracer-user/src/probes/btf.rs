//! Just enough of a BTF reader to find where a member lives inside a kernel struct
//! (aya keeps its type lookups private). Used to read `task_struct.se.sum_exec_runtime`,
//! the kernel's own count of a thread's CPU time.

use super::{BtfError, ProbeError};

const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;

struct Type {
    name_off: u32,
    kind: u32,
    kind_flag: bool,
    /// (name_off, type id, bit offset) for struct and union members.
    members: Vec<(u32, u32, u32)>,
}

pub struct KernelBtf {
    strings: Vec<u8>,
    /// Index 0 is the void type; ids start at 1.
    types: Vec<Option<Type>>,
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// A struct member: its byte offset in the struct, and its type id.
struct Member {
    offset: u32,
    type_id: u32,
}

impl KernelBtf {
    pub fn from_sys_fs() -> Result<Self, ProbeError> {
        let path = "/sys/kernel/btf/vmlinux";
        let data = std::fs::read(path).map_err(|source| BtfError::Read { path, source })?;
        let btf = Self::parse(&data).ok_or(BtfError::Parse { path })?;
        Ok(btf)
    }

    fn parse(d: &[u8]) -> Option<Self> {
        if d.get(..2)? != [0x9f, 0xeb] {
            return None;
        }
        let hdr_len = u32_at(d, 4)? as usize;
        let (type_off, type_len) = (u32_at(d, 8)? as usize, u32_at(d, 12)? as usize);
        let (str_off, str_len) = (u32_at(d, 16)? as usize, u32_at(d, 20)? as usize);
        let types_bytes = d.get(hdr_len + type_off..hdr_len + type_off + type_len)?;
        let strings = d
            .get(hdr_len + str_off..hdr_len + str_off + str_len)?
            .to_vec();
        let mut types = vec![None];
        let mut at = 0;
        while at < types_bytes.len() {
            let name_off = u32_at(types_bytes, at)?;
            let info = u32_at(types_bytes, at + 4)?;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            at += 12;
            let mut members = Vec::new();
            let extra = match kind {
                1 | 14 | 17 => 4, // INT, VAR, DECL_TAG
                3 => 12,          // ARRAY
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = at + 12 * i;
                        members.push((
                            u32_at(types_bytes, m)?,
                            u32_at(types_bytes, m + 4)?,
                            u32_at(types_bytes, m + 8)?,
                        ));
                    }
                    12 * vlen
                }
                6 | 13 => 8 * vlen,   // ENUM, FUNC_PROTO
                15 | 19 => 12 * vlen, // DATASEC, ENUM64
                2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                _ => return None,
            };
            at += extra;
            types.push(Some(Type {
                name_off,
                kind,
                kind_flag: info >> 31 == 1,
                members,
            }));
        }
        Some(KernelBtf { strings, types })
    }

    fn name(&self, off: u32) -> &[u8] {
        let rest = self.strings.get(off as usize..).unwrap_or(&[]);
        &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())]
    }

    fn struct_named(&self, name: &str) -> Option<&Type> {
        self.types
            .iter()
            .flatten()
            .find(|t| t.kind == KIND_STRUCT && self.name(t.name_off) == name.as_bytes())
    }

    /// Where `member` is in struct `t`.
    fn member(&self, t: &Type, member: &str) -> Option<Member> {
        let (_, ty, off) = t
            .members
            .iter()
            .find(|(n, _, _)| self.name(*n) == member.as_bytes())?;
        let bits = if t.kind_flag { off & 0xff_ffff } else { *off };
        Some(Member {
            offset: bits / 8,
            type_id: *ty,
        })
    }

    /// Byte offset of a path of members, e.g. `task_struct` + ["se", "sum_exec_runtime"].
    pub fn offset_of(&self, name: &str, path: &[&str]) -> Option<u32> {
        let mut t = self.struct_named(name)?;
        let mut total = 0;
        for (i, m) in path.iter().enumerate() {
            let Member {
                offset: off,
                type_id: ty,
            } = self.member(t, m)?;
            total += off;
            if i + 1 < path.len() {
                t = self.types.get(ty as usize)?.as_ref()?;
            }
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
    }
}
