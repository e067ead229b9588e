//! Incremental reading of one transcript file: only what was appended since the last read.
//!
//! A [`Tail`] remembers its offset and the unterminated end of the last read (an agent may be
//! in the middle of writing a line), and notices when the file was replaced (another inode:
//! rotation, an atomic rewrite) or truncated (shorter than the offset): it then reads the file
//! again from the start. Parsers key calls by id, so a line read twice replaces itself instead
//! of counting twice. A `.zst` file (Codex compresses cold rollouts) cannot be tailed: it is
//! decompressed whole whenever its size or modification time changes. A whole-document file
//! (cline rewrites one JSON document as its conversation grows) is read whole, as one "line",
//! whenever it changed.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Most bytes read from a file in one go, so a huge history cannot stall the worker's other
/// sessions for long; the rest is read on the next round.
const MAX_READ: u64 = 8 * 1024 * 1024;

/// One tailed file.
#[derive(Debug)]
pub struct Tail {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    identity: Option<(u64, u64)>,
    /// For `.zst` and whole-document files: the size and modification time last read.
    zst_seen: Option<(u64, i64, i64)>,
    /// The file is one document rewritten whole, not lines appended.
    whole: bool,
}

/// What one read found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// What was read (after the unterminated end of the read before); the lines are ranges of
    /// it, so a line is never copied out of the buffer it was read into.
    data: Vec<u8>,
    /// Complete lines, without their terminators, in `data`.
    ranges: Vec<std::ops::Range<usize>>,
    /// The file was replaced or truncated: what came before was read again from the start.
    pub restarted: bool,
    /// Everything in the file was read (false when [`MAX_READ`] stopped the read early).
    pub at_end: bool,
}

impl Chunk {
    /// The complete lines read, without their terminators.
    pub fn lines(&self) -> impl Iterator<Item = &[u8]> {
        self.ranges.iter().map(|r| &self.data[r.clone()])
    }
}

#[cfg(test)]
impl Chunk {
    /// Whether no line was read.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many lines were read.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }
}

impl Tail {
    /// A tail of `path`, from its start.
    pub fn new(path: PathBuf) -> Tail {
        Tail { path, offset: 0, partial: Vec::new(), identity: None, zst_seen: None, whole: false }
    }

    /// A file that holds one document its writer rewrites whole: each read that finds it
    /// changed returns its whole content as one line.
    pub fn whole(path: PathBuf) -> Tail {
        Tail { whole: true, ..Tail::new(path) }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The byte offset after the last complete line read (a line still being written is not
    /// counted).
    pub fn consumed(&self) -> u64 {
        self.offset.saturating_sub(self.partial.len() as u64)
    }

    /// Reads what was appended since the last call.
    pub fn read(&mut self) -> io::Result<Chunk> {
        if self.path.extension().is_some_and(|e| e == "zst") {
            return self.read_zst();
        }
        if self.whole {
            return self.read_whole();
        }
        let mut file = File::open(&self.path)?;
        let meta = file.metadata()?;
        let identity = identity(&file, &meta);
        let mut chunk = Chunk::default();
        if self.identity.is_some_and(|id| id != identity) || meta.len() < self.offset {
            tracing::debug!(path = %self.path.display(), "transcript replaced or truncated; reading it again");
            self.offset = 0;
            self.partial.clear();
            chunk.restarted = true;
        }
        self.identity = Some(identity);
        let want = meta.len().saturating_sub(self.offset).min(MAX_READ);
        // The unterminated end of the last read goes first: its line continues in this read.
        let mut buf = std::mem::take(&mut self.partial);
        buf.reserve(want as usize);
        let kept = buf.len();
        file.seek(SeekFrom::Start(self.offset))?;
        file.take(want).read_to_end(&mut buf)?;
        self.offset += (buf.len() - kept) as u64;
        chunk.at_end = self.offset >= meta.len();
        self.split(buf, &mut chunk);
        Ok(chunk)
    }

    fn read_zst(&mut self) -> io::Result<Chunk> {
        let meta = std::fs::metadata(&self.path)?;
        let (secs, nanos) = modified(&meta);
        let seen = (meta.len(), secs, nanos);
        if self.zst_seen == Some(seen) {
            return Ok(Chunk { at_end: true, ..Chunk::default() });
        }
        let restarted = self.zst_seen.is_some();
        self.zst_seen = Some(seen);
        let file = File::open(&self.path)?;
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(io::BufReader::new(file))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let mut buf = Vec::new();
        decoder.read_to_end(&mut buf)?;
        self.partial.clear();
        // A compressed file is complete: a last line without a terminator is still a line.
        if buf.last().is_some_and(|b| *b != b'\n') {
            buf.push(b'\n');
        }
        let mut chunk = Chunk { restarted, at_end: true, ..Chunk::default() };
        self.split(buf, &mut chunk);
        Ok(chunk)
    }

    fn read_whole(&mut self) -> io::Result<Chunk> {
        let stat = |path: &Path| {
            std::fs::metadata(path).map(|m| {
                let (secs, nanos) = modified(&m);
                (m.len(), secs, nanos)
            })
        };
        let seen = stat(&self.path)?;
        if self.zst_seen == Some(seen) {
            return Ok(Chunk { at_end: true, ..Chunk::default() });
        }
        let restarted = self.zst_seen.is_some();
        let doc = std::fs::read(&self.path)?;
        // The writer rewrites the file in place: a read can catch a rewrite half done, and the
        // finished rewrite can have the same size and (coarse) modification time as the version
        // stat saw. Only a read that got the whole of an unchanged file is remembered; anything
        // else is read again next time.
        let whole = stat(&self.path)? == seen && doc.len() as u64 == seen.0;
        self.zst_seen = whole.then_some(seen);
        let mut chunk = Chunk { restarted, at_end: true, ..Chunk::default() };
        if !doc.iter().all(u8::is_ascii_whitespace) {
            chunk.ranges.push(0..doc.len());
            chunk.data = doc;
        }
        Ok(chunk)
    }

    /// Splits `buf` into `chunk`'s lines; what follows the last `\n` is kept for the next read.
    fn split(&mut self, buf: Vec<u8>, chunk: &mut Chunk) {
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &buf) {
            let mut line = start..end;
            if buf[line.clone()].last() == Some(&b'\r') {
                line.end -= 1;
            }
            if !buf[line.clone()].iter().all(u8::is_ascii_whitespace) {
                chunk.ranges.push(line);
            }
            start = end + 1;
        }
        self.partial = buf[start..].to_vec();
        chunk.data = buf;
    }
}

/// What tells a file from another that took its name: its device and inode.
#[cfg(unix)]
fn identity(_file: &File, meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// What tells a file from another that took its name: its volume and file index (std has them
/// only on nightly). Should the system not say, every file looks the same and only a
/// truncation is noticed.
#[cfg(windows)]
fn identity(file: &File, _meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::windows::io::AsRawHandle;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle,
    };
    let mut info = BY_HANDLE_FILE_INFORMATION::default();
    // SAFETY: an open file's handle and a structure to write to.
    if unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) } == 0 {
        return (0, 0);
    }
    let index = (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow);
    (u64::from(info.dwVolumeSerialNumber), index)
}

/// The modification time as the system keeps it: seconds and nanoseconds.
#[cfg(unix)]
fn modified(meta: &std::fs::Metadata) -> (i64, i64) {
    use std::os::unix::fs::MetadataExt;
    (meta.mtime(), meta.mtime_nsec())
}

/// The modification time as the system keeps it: 100 ns units since 1601.
#[cfg(windows)]
fn modified(meta: &std::fs::Metadata) -> (i64, i64) {
    use std::os::windows::fs::MetadataExt;
    (meta.last_write_time() as i64, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scratch(name: &str) -> PathBuf {
        crate::test_support::scratch("tail", name)
    }

    fn lines(c: &Chunk) -> Vec<Vec<u8>> {
        c.lines().map(<[u8]>::to_vec).collect()
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn reads_only_what_was_appended_and_waits_for_whole_lines() {
        let dir = scratch("append");
        let path = dir.join("t.jsonl");
        append(&path, b"{\"a\":1}\n{\"b\":");
        let mut tail = Tail::new(path.clone());
        let c = tail.read().unwrap();
        assert_eq!(lines(&c), vec![b"{\"a\":1}".to_vec()]);
        assert!(c.at_end && !c.restarted);
        assert!(tail.read().unwrap().is_empty());
        append(&path, b"2}\r\n\n{\"c\":3}\n");
        let c = tail.read().unwrap();
        assert_eq!(lines(&c), vec![b"{\"b\":2}".to_vec(), b"{\"c\":3}".to_vec()]);
    }

    #[test]
    fn starts_over_after_truncation_and_replacement() {
        let dir = scratch("rotate");
        let path = dir.join("t.jsonl");
        append(&path, b"one\ntwo\n");
        let mut tail = Tail::new(path.clone());
        assert_eq!(tail.read().unwrap().len(), 2);
        std::fs::write(&path, b"x\n").unwrap();
        let c = tail.read().unwrap();
        assert!(c.restarted);
        assert_eq!(lines(&c), vec![b"x".to_vec()]);
        // Replaced by another file (rename over it): another inode, read from the start.
        let other = dir.join("new.jsonl");
        std::fs::write(&other, b"x\ny\nz\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let c = tail.read().unwrap();
        assert!(c.restarted);
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn a_whole_document_is_read_whole_when_it_changed() {
        let dir = scratch("whole");
        let path = dir.join("s.messages.json");
        std::fs::write(&path, b"{\n  \"messages\": []\n}\n").unwrap();
        let mut tail = Tail::whole(path.clone());
        let c = tail.read().unwrap();
        assert_eq!(lines(&c), vec![b"{\n  \"messages\": []\n}\n".to_vec()]);
        assert!(!c.restarted && c.at_end);
        assert!(tail.read().unwrap().is_empty(), "unchanged: nothing new");
        std::fs::write(&path, b"{\"messages\": [{\"id\": \"m1\"}]}").unwrap();
        let c = tail.read().unwrap();
        assert_eq!(c.len(), 1);
        assert!(c.restarted);
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let dir = scratch("missing");
        assert!(Tail::new(dir.join("nope.jsonl")).read().is_err());
    }

    #[test]
    fn zst_files_are_read_whole_once() {
        let dir = scratch("zst");
        let path = dir.join("t.jsonl.zst");
        let data = b"{\"a\":1}\n{\"b\":2}";
        let compressed = ruzstd::encoding::compress_to_vec(
            &data[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        std::fs::write(&path, compressed).unwrap();
        let mut tail = Tail::new(path);
        let c = tail.read().unwrap();
        assert_eq!(lines(&c), vec![b"{\"a\":1}".to_vec(), b"{\"b\":2}".to_vec()]);
        assert!(tail.read().unwrap().is_empty());
    }
}
