//! Reading a file the tracer is about to parse as ELF. The files come from where
//! processes say they are (their executable, what they have mapped, what `ldd` says),
//! and a process may map anything: a device (`/dev/zero` never ends: reading it whole
//! grew the tracer by 1 GB/s under stress-ng), a named pipe, a data file of gigabytes.
//! Only a regular file that starts with the ELF magic is read.

use std::io::{Error, ErrorKind, Read, Seek, SeekFrom};
use std::path::Path;

const ELF_MAGIC: [u8; 4] = *b"\x7fELF";

/// The whole file at `path` if it is a regular file that starts with the ELF magic.
// Read through the handle whose metadata was checked, not by path again
// (`fs::read`): the path may name another file by then.
#[allow(clippy::verbose_file_reads)]
pub(crate) fn read_elf(path: &Path) -> std::io::Result<Vec<u8>> {
    let ElfFile { mut file, len } = open_elf(path)?;
    let mut data = Vec::with_capacity(len as usize);
    file.read_to_end(&mut data)?;
    Ok(data)
}

/// A file checked to be a regular file that starts with the ELF magic, for reading in
/// parts: a library with its debug information is tens of MB (MPICH's is 41 MB), read
/// whole in 85 ms at every start for the symbol tables' few hundred KB.
pub(crate) struct ElfFile {
    /// Positioned at the start.
    pub file: std::fs::File,
    pub len: u64,
}

/// Opens `path` as [`ElfFile`], or says why it is not one.
pub(crate) fn open_elf(path: &Path) -> std::io::Result<ElfFile> {
    let mut file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)?;
    if magic != ELF_MAGIC {
        return Err(Error::new(ErrorKind::InvalidData, "not an ELF file"));
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(ElfFile {
        file,
        len: meta.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_other_files_are_not_read() {
        let zero = read_elf(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(zero.kind(), ErrorKind::InvalidInput);
        let fifo = read_elf(Path::new("/proc/self/fd/0"));
        if std::fs::metadata("/proc/self/fd/0").is_ok_and(|m| !m.is_file()) {
            assert!(
                fifo.is_err(),
                "standard input, not a regular file, was read"
            );
        }
        // /proc's files say they are regular (of size 0): their magic tells.
        let text = read_elf(Path::new("/proc/self/cmdline")).unwrap_err();
        assert_eq!(text.kind(), ErrorKind::InvalidData);
        let me = std::env::current_exe().unwrap();
        assert_eq!(read_elf(&me).unwrap(), std::fs::read(&me).unwrap());
        let dir = std::env::temp_dir().join(format!("elf-file-{}", std::process::id()));
        std::fs::write(&dir, b"hello").unwrap();
        assert_eq!(read_elf(&dir).unwrap_err().kind(), ErrorKind::InvalidData);
        std::fs::remove_file(&dir).unwrap();
    }
}
