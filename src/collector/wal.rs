//! A shard's write-ahead log: numbered records in segment files, group-committed with one
//! `fdatasync` per group.
//!
//! Record: `len: u32 LE | crc32(lsn ++ payload): u32 LE | lsn: u64 LE | payload`.
//! Segments: `wal-<first lsn, 20 digits>.log`. The writer only appends to the newest segment; a
//! flush rotates to a new one, and once the flushed rows are in the lake the older segments are
//! deleted (`trim`). A torn record at the end of a segment (a crash in the middle of a write that
//! was never acknowledged) is cut off when the log is opened.
//!
//! The checkpoint file holds the last LSN known to be in the lake; it is replaced atomically
//! (write, fsync, rename, fsync the directory).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::storage::files::{sync_dir, write_atomic};

const HEADER: usize = 16;
/// Records bigger than this are corrupt by definition (an event is at most 32 KiB of JSON).
const MAX_RECORD: usize = 16 * 1024 * 1024;

pub struct Wal {
    dir: PathBuf,
    file: File,
    next_lsn: u64,
    segment_bytes: u64,
    /// Set when a failed append could not be undone: the next append first retries the undo,
    /// and refuses rather than acknowledge records behind a torn one.
    broken: bool,
    /// The write buffer, kept between appends (a group's records are encoded into it), so a
    /// steady load allocates nothing; given back when an append left it over
    /// [`KEPT_BUFFER_BYTES`].
    buf: Vec<u8>,
    /// Tests only: every append fails, as on a full disk.
    #[cfg(test)]
    pub fail_appends: bool,
}

/// A record found when opening the log.
pub struct Record {
    pub lsn: u64,
    pub payload: Vec<u8>,
}

/// The largest write buffer a log keeps between appends (a bigger one is freed after use).
const KEPT_BUFFER_BYTES: usize = 4 << 20;

fn segment_name(first_lsn: u64) -> String {
    format!("wal-{first_lsn:020}.log")
}

/// The segments of `dir`, oldest first, with their first LSN.
pub fn segments(dir: &Path) -> io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(n) = name
            .strip_prefix("wal-")
            .and_then(|n| n.strip_suffix(".log"))
        {
            if let Ok(lsn) = n.parse::<u64>() {
                out.push((lsn, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads a segment's valid records; returns them and the length of the valid prefix.
fn read_segment(path: &Path) -> io::Result<(Vec<Record>, u64)> {
    let mut bytes = Vec::new();
    BufReader::new(File::open(path)?).read_to_end(&mut bytes)?;
    let mut records = Vec::new();
    let mut pos = 0usize;
    while bytes.len() - pos >= HEADER {
        let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        let crc = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().expect("4 bytes"));
        if len > MAX_RECORD || bytes.len() - pos - HEADER < len {
            break;
        }
        let body = &bytes[pos + 8..pos + HEADER + len];
        if crc32fast::hash(body) != crc {
            break;
        }
        let lsn = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
        records.push(Record {
            lsn,
            payload: body[8..].to_vec(),
        });
        pos += HEADER + len;
    }
    Ok((records, pos as u64))
}

impl Wal {
    /// Opens the log in `dir`: returns every intact record with an LSN above `checkpoint`, cuts
    /// torn tails off, and starts a fresh segment for new writes.
    pub fn open(dir: &Path, checkpoint: u64) -> io::Result<(Wal, Vec<Record>)> {
        fs::create_dir_all(dir)?;
        let mut next_lsn = checkpoint + 1;
        let mut replay = Vec::new();
        for (_, path) in segments(dir)? {
            let (records, valid) = read_segment(&path)?;
            let len = fs::metadata(&path)?.len();
            if valid < len {
                tracing::warn!(segment = %path.display(), cut = len - valid, "torn write-ahead log tail cut off");
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(valid)?;
                f.sync_all()?;
            }
            for r in records {
                next_lsn = next_lsn.max(r.lsn + 1);
                if r.lsn > checkpoint {
                    replay.push(r);
                }
            }
        }
        let file = Self::create_segment(dir, next_lsn)?;
        Ok((
            Wal {
                dir: dir.to_path_buf(),
                file,
                next_lsn,
                segment_bytes: 0,
                broken: false,
                buf: Vec::new(),
                #[cfg(test)]
                fail_appends: false,
            },
            replay,
        ))
    }

    fn create_segment(dir: &Path, first_lsn: u64) -> io::Result<File> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(segment_name(first_lsn)))?;
        sync_dir(dir)?;
        Ok(file)
    }

    /// Appends the payloads as consecutive records and makes them durable with one fdatasync.
    /// Returns the LSN of the first one.
    pub fn append<P: AsRef<[u8]>>(&mut self, payloads: &[P]) -> io::Result<u64> {
        self.append_with(payloads, |p, buf| buf.extend_from_slice(p.as_ref()))
    }

    /// Like [`Wal::append`], with each item encoded straight into the write buffer.
    pub fn append_with<T>(
        &mut self,
        items: &[T],
        encode: impl Fn(&T, &mut Vec<u8>),
    ) -> io::Result<u64> {
        let first = self.next_lsn;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for (i, item) in items.iter().enumerate() {
            let start = buf.len();
            buf.extend_from_slice(&[0; 8]); // length and CRC, filled in below
            buf.extend_from_slice(&(first + i as u64).to_le_bytes());
            encode(item, &mut buf);
            let len = (buf.len() - start - HEADER) as u32;
            let crc = crc32fast::hash(&buf[start + 8..]);
            buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
            buf[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        }
        let written = self.write_durably(&buf);
        if buf.capacity() <= KEPT_BUFFER_BYTES {
            self.buf = buf;
        }
        written?;
        self.next_lsn += items.len() as u64;
        Ok(first)
    }

    /// Writes `buf` at the end of the segment and syncs it; on failure, cuts it off again.
    fn write_durably(&mut self, buf: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if self.fail_appends {
            return Err(io::Error::from_raw_os_error(28)); // ENOSPC
        }
        if self.broken {
            // The undo of a failed append failed too: try it again (the disk may be back)
            // before anything is written behind the torn record.
            self.file
                .set_len(self.segment_bytes)
                .and_then(|_| self.file.sync_all())?;
            self.broken = false;
        }
        if let Err(e) = self.file.write_all(buf).and_then(|_| self.file.sync_data()) {
            // Undo the partial write so later records never sit behind a torn one and the same
            // LSNs are not written twice; if even that fails, stop writing.
            if self
                .file
                .set_len(self.segment_bytes)
                .and_then(|_| self.file.sync_all())
                .is_err()
            {
                self.broken = true;
            }
            return Err(e);
        }
        self.segment_bytes += buf.len() as u64;
        Ok(())
    }

    /// The LSN the next record will get.
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Bytes written to the current segment.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Starts a new segment; every record so far is in older segments.
    pub fn rotate(&mut self) -> io::Result<()> {
        self.file = Self::create_segment(&self.dir, self.next_lsn)?;
        self.segment_bytes = 0;
        Ok(())
    }
}

/// Deletes the segments whose records all have LSNs up to `upto` (never the newest segment);
/// returns the bytes freed.
pub fn trim(dir: &Path, upto: u64) -> io::Result<u64> {
    let segs = segments(dir)?;
    let mut freed = 0;
    let mut removed = false;
    for pair in segs.windows(2) {
        let (_, path) = &pair[0];
        let (next_first, _) = pair[1];
        if next_first <= upto + 1 {
            freed += fs::metadata(path).map_or(0, |m| m.len());
            fs::remove_file(path)?;
            removed = true;
        }
    }
    if removed {
        sync_dir(dir)?;
    }
    Ok(freed)
}

/// The bytes of every segment in `dir` (the WAL's share of the backlog at start).
pub fn bytes(dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    for (_, path) in segments(dir)? {
        total += fs::metadata(path)?.len();
    }
    Ok(total)
}

const CHECKPOINT: &str = "checkpoint";

/// The last LSN known to be in the lake (0 when none).
pub fn read_checkpoint(dir: &Path) -> io::Result<u64> {
    match fs::read_to_string(dir.join(CHECKPOINT)) {
        Ok(s) => s
            .trim()
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("checkpoint: {e}"))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

pub fn write_checkpoint(dir: &Path, lsn: u64) -> io::Result<()> {
    write_atomic(dir, CHECKPOINT, lsn.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, replay) = Wal::open(dir.path(), 0).unwrap();
        assert!(replay.is_empty());
        assert_eq!(wal.append(&[b"a".to_vec(), b"bb".to_vec()]).unwrap(), 1);
        assert_eq!(wal.append(&[b"ccc"]).unwrap(), 3);
        drop(wal);
        // A torn write: half a record at the end.
        let (_, last) = segments(dir.path()).unwrap().pop().unwrap();
        let mut f = OpenOptions::new().append(true).open(&last).unwrap();
        f.write_all(&[9, 0, 0, 0, 1, 2]).unwrap();
        let (mut wal, replay) = Wal::open(dir.path(), 0).unwrap();
        let got: Vec<(u64, Vec<u8>)> = replay.into_iter().map(|r| (r.lsn, r.payload)).collect();
        assert_eq!(
            got,
            [
                (1, b"a".to_vec()),
                (2, b"bb".to_vec()),
                (3, b"ccc".to_vec())
            ]
        );
        assert_eq!(wal.next_lsn(), 4);
        assert_eq!(wal.append(&[b"d"]).unwrap(), 4);
        // Only records above the checkpoint are replayed.
        write_checkpoint(dir.path(), 2).unwrap();
        drop(wal);
        let cp = read_checkpoint(dir.path()).unwrap();
        let (_, replay) = Wal::open(dir.path(), cp).unwrap();
        assert_eq!(replay.iter().map(|r| r.lsn).collect::<Vec<_>>(), [3, 4]);
    }

    #[test]
    fn trim_deletes_whole_segments_up_to_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        wal.append(&[b"1", b"2"]).unwrap();
        wal.rotate().unwrap();
        wal.append(&[b"3"]).unwrap();
        wal.rotate().unwrap();
        assert_eq!(bytes(dir.path()).unwrap(), 3 * 17);
        assert_eq!(
            trim(dir.path(), 2).unwrap(),
            2 * 17,
            "two records of 16 + 1 bytes"
        );
        assert_eq!(trim(dir.path(), 3).unwrap(), 17);
        assert_eq!(bytes(dir.path()).unwrap(), 0);
        assert_eq!(
            segments(dir.path()).unwrap().len(),
            1,
            "the newest segment stays"
        );
        drop(wal);
        let (wal, replay) = Wal::open(dir.path(), 3).unwrap();
        assert!(replay.is_empty());
        assert_eq!(wal.next_lsn(), 4, "LSNs keep growing after a trim");
    }
}
