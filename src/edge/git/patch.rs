//! A patch to apply: its bytes in memory (a small one made by dagexec itself), or a file that
//! holds them ([`PatchFile`]: an attempt's diff, which git writes straight into an unlinked
//! temporary file, and an artifact's `changes.patch`, extracted into one), so that neither the
//! local executor nor the conductor ever holds a change of up to its bound in memory. git reads
//! either from its standard input ([`PatchRef`]); a file is read in chunks of [`CHUNK`] bytes
//! at explicit offsets, so clones of one handle never disturb each other.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

/// The chunk a patch file is read in.
pub(super) const CHUNK: usize = 64 << 10;

/// The first `len` bytes of a file, read where they lie. Cloning shares the file.
#[derive(Debug, Clone)]
pub struct PatchFile {
    file: Arc<File>,
    len: u64,
}

impl PatchFile {
    /// The patch held by the first `len` bytes of `file`.
    pub fn new(file: File, len: u64) -> PatchFile {
        PatchFile {
            file: Arc::new(file),
            len,
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Calls `each` with the patch's bytes in order, [`CHUNK`] bytes at a time at most.
    pub fn each_chunk(&self, mut each: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        let mut buf = vec![0; CHUNK.min(usize::try_from(self.len).unwrap_or(CHUNK))];
        let mut at = 0;
        while at < self.len {
            let want = usize::try_from(self.len - at).map_or(buf.len(), |l| l.min(buf.len()));
            let n = self.file.read_at(&mut buf[..want], at)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the patch file ends at {at} of its {} bytes", self.len),
                ));
            }
            each(&buf[..n])?;
            at += n as u64;
        }
        Ok(())
    }
}

/// A patch, owned: in memory or in a file.
#[derive(Debug, Clone)]
pub enum Patch {
    Bytes(Vec<u8>),
    File(PatchFile),
}

impl Default for Patch {
    fn default() -> Self {
        Patch::Bytes(Vec::new())
    }
}

impl From<Vec<u8>> for Patch {
    fn from(bytes: Vec<u8>) -> Self {
        Patch::Bytes(bytes)
    }
}

impl From<PatchFile> for Patch {
    fn from(file: PatchFile) -> Self {
        Patch::File(file)
    }
}

impl Patch {
    pub fn len(&self) -> u64 {
        match self {
            Patch::Bytes(b) => b.len() as u64,
            Patch::File(f) => f.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the changes: the patch becomes empty.
    pub fn clear(&mut self) {
        *self = Patch::default();
    }

    /// The whole patch in memory (tests only: dagexec never needs it so).
    #[cfg(test)]
    pub fn read_to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.borrowed().write_to(&mut out).expect("the patch reads");
        out
    }

    /// Its first `limit` bytes at most (what a prompt shows of it); what cannot be read ends
    /// it early.
    pub fn head(&self, limit: usize) -> Vec<u8> {
        match self {
            Patch::Bytes(b) => b[..b.len().min(limit)].to_vec(),
            Patch::File(f) => {
                let mut out = Vec::new();
                let _ = f.each_chunk(|c| {
                    let room = limit - out.len();
                    out.extend_from_slice(&c[..c.len().min(room)]);
                    if out.len() < limit {
                        Ok(())
                    } else {
                        Err(io::Error::other("enough"))
                    }
                });
                out
            }
        }
    }

    pub fn borrowed(&self) -> PatchRef<'_> {
        match self {
            Patch::Bytes(b) => PatchRef::Bytes(b),
            Patch::File(f) => PatchRef::File(f),
        }
    }
}

/// A patch, borrowed: what git is fed.
#[derive(Debug, Clone, Copy)]
pub enum PatchRef<'a> {
    Bytes(&'a [u8]),
    File(&'a PatchFile),
}

impl<'a> From<&'a [u8]> for PatchRef<'a> {
    fn from(b: &'a [u8]) -> Self {
        PatchRef::Bytes(b)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for PatchRef<'a> {
    fn from(b: &'a [u8; N]) -> Self {
        PatchRef::Bytes(b)
    }
}

impl<'a> From<&'a Vec<u8>> for PatchRef<'a> {
    fn from(b: &'a Vec<u8>) -> Self {
        PatchRef::Bytes(b)
    }
}

impl<'a> From<&'a Patch> for PatchRef<'a> {
    fn from(p: &'a Patch) -> Self {
        p.borrowed()
    }
}

impl<'a> From<&'a PatchFile> for PatchRef<'a> {
    fn from(f: &'a PatchFile) -> Self {
        PatchRef::File(f)
    }
}

impl PatchRef<'_> {
    pub fn is_empty(&self) -> bool {
        match self {
            PatchRef::Bytes(b) => b.is_empty(),
            PatchRef::File(f) => f.is_empty(),
        }
    }

    /// Whether the patch holds nothing but whitespace (git would call it "no valid patches").
    /// A file that cannot be read is not blank: git reports it.
    pub fn is_blank(&self) -> bool {
        match self {
            PatchRef::Bytes(b) => b.iter().all(u8::is_ascii_whitespace),
            PatchRef::File(f) => f
                .each_chunk(|c| {
                    if c.iter().all(u8::is_ascii_whitespace) {
                        Ok(())
                    } else {
                        Err(io::Error::other("not blank"))
                    }
                })
                .is_ok(),
        }
    }

    /// Writes the patch to `out` (a file in chunks).
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        match self {
            PatchRef::Bytes(b) => out.write_all(b),
            PatchRef::File(f) => f.each_chunk(|c| out.write_all(c)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Seek;

    fn file_of(bytes: &[u8]) -> PatchFile {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.rewind().unwrap();
        PatchFile::new(f, bytes.len() as u64)
    }

    #[test]
    fn a_file_is_read_in_bounded_chunks_whatever_its_clones_did() {
        let bytes: Vec<u8> = (0..(3 * CHUNK + 17)).map(|i| (i % 251) as u8).collect();
        let f = file_of(&bytes);
        let clone = f.clone();
        let mut out = Vec::new();
        let mut largest = 0;
        clone
            .each_chunk(|c| {
                largest = largest.max(c.len());
                out.extend_from_slice(c);
                Ok(())
            })
            .unwrap();
        assert_eq!(out, bytes);
        assert!(largest <= CHUNK);
        let mut again = Vec::new();
        PatchRef::from(&f).write_to(&mut again).unwrap();
        assert_eq!(again, bytes);
        assert!(!PatchRef::from(&f).is_blank());
        assert!(PatchRef::from(&file_of(b" \n\t\n")).is_blank());
        // A file shorter than it claims is an error, not a shorter patch.
        let short = PatchFile::new(tempfile::tempfile().unwrap(), 10);
        assert!(PatchRef::from(&short).write_to(&mut Vec::new()).is_err());
        assert!(!PatchRef::from(&short).is_blank());
    }
}
