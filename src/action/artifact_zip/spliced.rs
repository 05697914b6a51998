//! The archive the `zip` crate reads: the wanted entries' bytes as they lie in the file, and
//! a new central directory naming only them ([`Spliced`]).

use crate::action::artifact_zip::CENTRAL;
use crate::action::artifact_zip::EOCD;
use crate::action::artifact_zip::Wanted;
use std::io::{Read, Seek, SeekFrom};

/// The archive as the `zip` crate sees it: its bytes up to its central directory (the first
/// `head` bytes of `inner`, read where they are), then `tail` — a central directory of the
/// checked entries only and its end record.
pub(super) struct Spliced<R> {
    pub(super) inner: R,
    pub(super) head: u64,
    pub(super) tail: Vec<u8>,
    pub(super) pos: u64,
    /// Where `inner` is, when known (to seek it only when a read does not follow the last).
    pub(super) inner_pos: Option<u64>,
}

impl<R> Spliced<R> {
    fn len(&self) -> u64 {
        self.head + self.tail.len() as u64
    }
}

impl<R: Read + Seek> Read for Spliced<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos < self.head {
            let want = usize::try_from(self.head - self.pos)
                .unwrap_or(usize::MAX)
                .min(buf.len());
            if self.inner_pos != Some(self.pos) {
                self.inner_pos = None;
                self.inner.seek(SeekFrom::Start(self.pos))?;
            }
            let n = self.inner.read(&mut buf[..want])?;
            self.pos += n as u64;
            self.inner_pos = Some(self.pos);
            return Ok(n);
        }
        let at = usize::try_from(self.pos - self.head).unwrap_or(usize::MAX);
        let from = self.tail.get(at..).unwrap_or_default();
        let n = from.len().min(buf.len());
        buf[..n].copy_from_slice(&from[..n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R> Seek for Spliced<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = target.ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
        })?;
        Ok(self.pos)
    }
}

/// A central directory naming only `entries` (their data where the archive has it), then its
/// end record, with the directory at `offset`.
pub(super) fn new_directory(entries: &[Wanted], offset: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let put16 = |out: &mut Vec<u8>, v: u16| out.extend_from_slice(&v.to_le_bytes());
    let put32 = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    for e in entries {
        put32(&mut out, CENTRAL);
        put16(&mut out, 0x0314); // made by: Unix, zip 2.0
        put16(&mut out, 20); // needed: 2.0
        put16(&mut out, (e.flags & 0x0008) | 0x0800); // data descriptor as it was; UTF-8 name
        put16(&mut out, e.method);
        put16(&mut out, 0); // time
        put16(&mut out, 0x21); // date: 1980-01-01
        put32(&mut out, e.crc);
        // Both below their bound (checked), so under 4 GiB.
        put32(&mut out, e.compressed as u32);
        put32(&mut out, e.uncompressed as u32);
        put16(&mut out, e.name.len() as u16);
        put16(&mut out, 0); // extra
        put16(&mut out, 0); // comment
        put16(&mut out, 0); // disk
        put16(&mut out, 0); // internal attributes
        put32(&mut out, 0o100_644 << 16); // a regular file
        put32(&mut out, e.local as u32);
        out.extend_from_slice(e.name.as_bytes());
    }
    let size = out.len() as u32;
    put32(&mut out, EOCD);
    put16(&mut out, 0);
    put16(&mut out, 0);
    put16(&mut out, entries.len() as u16);
    put16(&mut out, entries.len() as u16);
    put32(&mut out, size);
    put32(&mut out, offset);
    put16(&mut out, 0); // comment
    out
}
