//! Call sites across processes. A return address means something only inside its
//! process (address space layout randomization gives every rank its own), so a site is
//! kept as (object file, offset in it), from the mappings the tracer recorded for the
//! process: every rank's call at the same line is then one site.

use std::collections::{BTreeMap, HashMap};

use crate::format::ProcessInfo;

/// No object's code spans more than this past its start: an address farther from the
/// nearest mapping below it lies in something mapped after the last inspection (a
/// library loaded later), and is kept raw rather than attributed to the wrong file.
const MAX_OBJECT_SPAN: u64 = 256 << 20;

/// Where a call site is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Place {
    /// An offset in an object file (interned, see [`SiteMap::object`]).
    Object { object: u32, offset: u64 },
    /// An address of one process that no known mapping explains.
    Raw { pid: u32, address: u64 },
}

/// The mappings of every process, as recorded (the union of its inspections).
#[derive(Default)]
pub(crate) struct SiteMap {
    /// pid -> start address of file offset 0 -> object id.
    maps: HashMap<u32, BTreeMap<u64, u32>>,
    objects: Vec<String>,
    ids: HashMap<String, u32>,
}

impl SiteMap {
    pub(super) fn process(&mut self, info: &ProcessInfo) {
        for m in &info.mappings {
            let id = match self.ids.get(&m.path) {
                Some(&id) => id,
                None => {
                    let id = self.objects.len() as u32;
                    self.objects.push(m.path.clone());
                    self.ids.insert(m.path.clone(), id);
                    id
                }
            };
            self.maps.entry(info.pid).or_default().insert(m.bias, id);
        }
    }

    /// The place of `address` in process `pid`: in the object mapped nearest below it.
    pub(crate) fn place(&self, pid: u32, address: u64) -> Place {
        let found = self
            .maps
            .get(&pid)
            .and_then(|m| m.range(..=address).next_back())
            .filter(|(&start, _)| address - start < MAX_OBJECT_SPAN);
        match found {
            Some((&start, &object)) => Place::Object {
                object,
                offset: address - start,
            },
            None => Place::Raw { pid, address },
        }
    }

    pub(super) fn object(&self, id: u32) -> &str {
        &self.objects[id as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Mapping;

    #[test]
    fn sites_are_offsets_in_objects() {
        let mut s = SiteMap::default();
        for (pid, exe, lib) in [
            (1, 0x5500_0000_0000, 0x7f00_0000_0000),
            (2, 0x5600_0000_0000, 0x7e00_0000_0000),
        ] {
            s.process(&ProcessInfo {
                pid,
                mappings: vec![
                    Mapping {
                        path: "/bin/app".into(),
                        bias: exe,
                    },
                    Mapping {
                        path: "/lib/libmpi.so".into(),
                        bias: lib,
                    },
                ],
                ..Default::default()
            });
        }
        let a = s.place(1, 0x5500_0000_11ec);
        assert_eq!(
            a,
            s.place(2, 0x5600_0000_11ec),
            "the same line in two ranks"
        );
        let Place::Object { object, offset } = a else {
            panic!("{a:?}")
        };
        assert_eq!((s.object(object), offset), ("/bin/app", 0x11ec));
        assert!(matches!(
            s.place(1, 0x7f00_0001_0000),
            Place::Object {
                offset: 0x1_0000,
                ..
            }
        ));
        // Far past the executable (a library mapped later), or in an unknown process.
        assert_eq!(
            s.place(1, 0x6000_0000_0000),
            Place::Raw {
                pid: 1,
                address: 0x6000_0000_0000
            }
        );
        assert_eq!(
            s.place(3, 0x10),
            Place::Raw {
                pid: 3,
                address: 0x10
            }
        );
    }
}
