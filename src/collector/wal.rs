//! A shard's write-ahead log: numbered records in segment files, group-committed: one durable
//! write per group.
//!
//! Durable writes: the current segment is also open with `O_DIRECT | O_DSYNC`, and an append is one
//! write of the whole blocks (4 KiB) it touches: the segment's last, partial block again (its bytes
//! are kept in memory), the group's records, zeros to the block's end. The write returns once the
//! disk has the data (Linux flushes the disk's cache, or writes with FUA), with no page cache on
//! the way: at saturation on this machine, 0.961 of the CPU per event of a write and an `fdatasync`
//! (the median of 26 alternated pairs; BENCHMARKS.md). Where the filesystem takes no direct writes
//! (tmpfs before Linux 6.6, some network and FUSE filesystems) the append is a write and an
//! `fdatasync`. The zeros after the records are read as the end of the segment, like a recycled
//! segment's older records.
//!
//! Record: `len: u32 LE | crc32(lsn ++ payload): u32 LE | lsn: u64 LE | payload`.
//! Segments: `wal-<first lsn, 20 digits>.log`. The writer only appends to the newest segment; a
//! flush rotates to a new one, and once the flushed rows are in the lake the older segments are
//! deleted (`trim`). A torn record at the end of a segment (a crash in the middle of a write that
//! was never acknowledged) is cut off when the log is opened.
//!
//! Recycling: `trim` keeps one deleted segment as `spare.log`, and the next rotation renames it
//! into the new segment and writes over it from the start. Its blocks are already allocated and
//! its size already on disk, so an append's sync has only the data to write, no size or
//! block map for ext4's journal (measured on this machine's ext4: about 40% less time and CPU
//! per sync). Its old records stay behind the new ones until overwritten: a segment's records
//! carry consecutive LSNs from the one in its name, so reading stops at the first record that
//! does not (an old record always has a lower LSN), and a rotation cuts the segment it leaves
//! to its records.
//!
//! So two files may keep raw events already in the lake: the spare, and the current segment
//! behind its records. An erasure must leave none of them: [`Wal::scrub`] (the writer, asked by
//! `settle` once the trim has passed the app's events) cuts the current segment to its records
//! and deletes the spare (and a segment that a failed rotation left after renaming it). A spare
//! found at open is deleted too (it is never adopted after a restart, and a retired shard keeps
//! none).
//!
//! The checkpoint file holds the last LSN known to be in the lake; it is replaced atomically
//! (write, fsync, rename, fsync the directory).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::storage::files::{sync_dir, write_atomic};

const HEADER: usize = 16;
/// Records bigger than this are corrupt by definition (an event is at most 32 KiB of JSON).
const MAX_RECORD: usize = 16 * 1024 * 1024;
/// The segment kept by `trim` for the next rotation to write over.
const SPARE: &str = "spare.log";

pub struct Wal {
    dir: PathBuf,
    file: File,
    next_lsn: u64,
    /// The LSN the current segment's name carries (its first record's).
    segment_first: u64,
    /// The valid bytes of the current segment: where the next append writes (a recycled
    /// segment's file may be longer).
    segment_bytes: u64,
    /// The size of the current segment's file.
    file_bytes: u64,
    /// How much the segments' files grew (or shrank) since [`Wal::take_grown`]: the backlog
    /// counts the WAL by their sizes.
    grown: i64,
    /// Set when a failed append could not be undone: the next append first retries the undo,
    /// and refuses rather than acknowledge records behind a torn one.
    broken: bool,
    /// The write buffer, kept between appends (a group's records are encoded into it), so a
    /// steady load allocates nothing; given back when an append left it over
    /// [`KEPT_BUFFER_BYTES`].
    buf: Vec<u8>,
    /// The current segment open for direct, synchronous writes (`None`: write + fdatasync).
    direct: Option<File>,
    /// Whether segments are opened for direct writes: false once the filesystem refused one.
    direct_ok: bool,
    /// The bytes of the current segment's last, partial block (a direct write writes it again).
    tail: Vec<u8>,
    /// The buffer of direct writes, used from its first byte aligned to [`BLOCK`]; kept like
    /// `buf`.
    aligned: Vec<u8>,
    /// Tests only: every append fails, as on a full disk.
    #[cfg(test)]
    pub fail_appends: bool,
}

/// A record found when opening the log.
pub struct Record {
    pub lsn: u64,
    pub payload: Vec<u8>,
}

/// The largest write buffer a log keeps between appends (a bigger one is freed after use); each
/// of its two buffers (the records, their aligned copy for a direct write).
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

/// Reads a segment whose first record has LSN `first`: its records up to the first that is
/// torn or whose LSN is not the next one; returns them and the length of their prefix.
fn read_segment(path: &Path, first: u64) -> io::Result<(Vec<Record>, u64)> {
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
        if lsn != first + records.len() as u64 {
            break; // a recycled segment's older record
        }
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
        remove_spare(dir)?;
        let mut next_lsn = checkpoint + 1;
        let mut replay = Vec::new();
        let mut grown = 0;
        let segs = segments(dir)?;
        let newest = segs.last().map(|(first, _)| *first);
        for (first, path) in segs {
            let (records, valid) = read_segment(&path, first)?;
            let len = fs::metadata(&path)?.len();
            if valid < len {
                // A rotation cuts a segment to its records: only the newest may have more.
                if Some(first) == newest {
                    tracing::info!(segment = %path.display(), cut = len - valid, "the end of the newest write-ahead log segment cut off after its last record (the zeros after a direct write's records, a write cut by the stop, or a recycled segment's older records)");
                } else {
                    tracing::warn!(segment = %path.display(), cut = len - valid, "torn write-ahead log tail cut off");
                }
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(valid)?;
                f.sync_all()?;
                grown -= (len - valid) as i64;
            }
            for r in records {
                next_lsn = next_lsn.max(r.lsn + 1);
                if r.lsn > checkpoint {
                    replay.push(r);
                }
            }
        }
        // The spare was deleted above, so the new segment adopts none.
        let (file, file_bytes, _) = Self::create_segment(dir, next_lsn)?;
        let direct = open_direct(&dir.join(segment_name(next_lsn)));
        // Segments the checkpoint already covers (a stop or crash between the checkpoint and
        // its trim): gone now, or nothing would trim them until the shard's next flush, and a
        // settle (`trimmed_through`) would wait for them.
        let trimmed = trim(dir, checkpoint, false);
        grown -= freed(&trimmed) as i64;
        trimmed.map_err(|(_, e)| e)?;
        Ok((
            Wal {
                dir: dir.to_path_buf(),
                file,
                next_lsn,
                segment_first: next_lsn,
                segment_bytes: 0,
                file_bytes,
                grown,
                broken: false,
                buf: Vec::new(),
                direct,
                direct_ok: true,
                tail: Vec::new(),
                aligned: Vec::new(),
                #[cfg(test)]
                fail_appends: false,
            },
            replay,
        ))
    }

    /// The segment whose first record will have LSN `first_lsn`: the spare renamed, when
    /// there is one, else a new file (a file of that name already there holds no record: the
    /// log's next LSN is past every record). Returns it, its size, and the size it brought
    /// into the segments (the spare's; 0 otherwise).
    fn create_segment(dir: &Path, first_lsn: u64) -> io::Result<(File, u64, u64)> {
        let path = dir.join(segment_name(first_lsn));
        let spare = dir.join(SPARE);
        let adopted = match fs::metadata(&spare) {
            Ok(m) => {
                let replaced = fs::metadata(&path).map_or(0, |m| m.len());
                fs::rename(&spare, &path)?;
                m.len().saturating_sub(replaced)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let file = OpenOptions::new()
            .create(true)
            .truncate(false) // a spare is written over, not emptied
            .read(true)
            .write(true)
            .open(&path)?;
        sync_dir(dir)?;
        let size = file.metadata()?.len();
        Ok((file, size, adopted))
    }

    /// Appends the payloads as consecutive records and makes them durable with one write (see
    /// the module's doc).
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
            let undone = self.cut_to_records().and_then(|_| self.file.sync_all());
            self.note_size();
            undone?;
            self.broken = false;
        }
        let end = self.segment_bytes + buf.len() as u64;
        if let Err(e) = self.write_at_end(buf) {
            // Undo the partial write so later records never sit behind a torn one and the same
            // LSNs are not written twice; if even that fails, stop writing.
            if self
                .cut_to_records()
                .and_then(|_| self.file.sync_all())
                .is_err()
            {
                self.broken = true;
            }
            self.note_size();
            return Err(e);
        }
        self.segment_bytes = end;
        if end > self.file_bytes {
            self.grown += (end - self.file_bytes) as i64;
            self.file_bytes = end;
        }
        Ok(())
    }

    /// Writes `buf` after the current segment's records and makes it durable: one direct write
    /// of the blocks it touches, or where the filesystem refuses direct writes, a write and an
    /// `fdatasync`.
    fn write_at_end(&mut self, buf: &[u8]) -> io::Result<()> {
        if let Some(direct) = &self.direct {
            let start = self.segment_bytes - self.tail.len() as u64;
            let used = self.tail.len() + buf.len();
            let len = used.next_multiple_of(BLOCK);
            let mut aligned = std::mem::take(&mut self.aligned);
            aligned.clear();
            aligned.reserve(len + BLOCK);
            let at = aligned.as_ptr().align_offset(BLOCK);
            aligned.resize(at, 0);
            aligned.extend_from_slice(&self.tail);
            aligned.extend_from_slice(buf);
            aligned.resize(at + len, 0);
            let written = direct.write_all_at(&aligned[at..], start);
            if written.is_ok() {
                self.tail.clear();
                self.tail
                    .extend_from_slice(&aligned[at + used - used % BLOCK..at + used]);
                let file_end = start + len as u64;
                if file_end > self.file_bytes {
                    self.grown += (file_end - self.file_bytes) as i64;
                    self.file_bytes = file_end;
                }
            }
            if aligned.capacity() <= KEPT_BUFFER_BYTES {
                self.aligned = aligned;
            }
            match written {
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                    // The filesystem opened the file for direct writes but refuses them: write
                    // as elsewhere (what the failed write left is written over).
                    tracing::warn!(wal = %self.dir.display(), error = %e, "direct writes refused; the write-ahead log writes and fdatasyncs instead");
                    self.direct = None;
                    self.direct_ok = false;
                }
                other => return other,
            }
        }
        self.file.write_all_at(buf, self.segment_bytes)?;
        self.file.sync_data()
    }

    /// Cuts the current segment's file to its records (a recycled segment's older ones, or a
    /// failed write, go).
    fn cut_to_records(&mut self) -> io::Result<()> {
        self.file.set_len(self.segment_bytes)?;
        self.grown -= self.file_bytes.saturating_sub(self.segment_bytes) as i64;
        self.file_bytes = self.segment_bytes;
        Ok(())
    }

    /// Cuts the current segment's file to its records when it is longer (a recycled segment's
    /// older records), durably: a power loss must not bring them back.
    fn cut_tail(&mut self) -> io::Result<()> {
        if self.file_bytes > self.segment_bytes {
            self.cut_to_records()?;
            self.file.sync_all()?;
        }
        Ok(())
    }

    /// Reads the current segment's size again, after a failure left it unknown.
    fn note_size(&mut self) {
        if let Ok(m) = self.file.metadata() {
            self.grown += m.len() as i64 - self.file_bytes as i64;
            self.file_bytes = m.len();
        }
    }

    /// How much the segments' files grew (negative: shrank) since the last call, or since the
    /// log was opened (its cut tails, a spare taken): the backlog counts the WAL by file sizes.
    pub fn take_grown(&mut self) -> i64 {
        std::mem::take(&mut self.grown)
    }

    /// The LSN the next record will get.
    pub fn next_lsn(&self) -> u64 {
        self.next_lsn
    }

    /// Bytes written to the current segment.
    pub fn segment_bytes(&self) -> u64 {
        self.segment_bytes
    }

    /// Removes what the log's files keep beyond its records: the current segment's tail (a
    /// recycled segment's older records), the spare, and any segment newer than the current
    /// one (a rotation that failed after it renamed the spare leaves one, holding only the
    /// spare's older records). For an erasure, once the trim passed the erased events
    /// (`settle.rs`).
    pub fn scrub(&mut self) -> io::Result<()> {
        self.cut_tail()?;
        remove_spare(&self.dir)?;
        for (first, path) in segments(&self.dir)? {
            if first > self.segment_first {
                fs::remove_file(path)?;
            }
        }
        sync_dir(&self.dir)
    }

    /// Starts a new segment; every record so far is in older segments. The one left is cut to
    /// its records (a recycled segment's older ones go), so its size is what it holds.
    pub fn rotate(&mut self) -> io::Result<()> {
        self.cut_tail()?;
        let (file, file_bytes, adopted) = Self::create_segment(&self.dir, self.next_lsn)?;
        self.file = file;
        self.file_bytes = file_bytes;
        self.grown += adopted as i64;
        self.segment_first = self.next_lsn;
        self.segment_bytes = 0;
        self.tail.clear();
        self.direct = if self.direct_ok {
            open_direct(&self.dir.join(segment_name(self.next_lsn)))
        } else {
            None
        };
        Ok(())
    }
}

/// Deletes the segments whose records all have LSNs up to `upto` (never the newest segment),
/// the first kept as the spare when `keep_spare` and there is none; returns the bytes freed
/// (the segments' share of the backlog). A failure part-way still says what it freed before.
pub fn trim(dir: &Path, upto: u64, keep_spare: bool) -> Result<u64, (u64, io::Error)> {
    let mut freed = 0;
    let segs = segments(dir).map_err(|e| (freed, e))?;
    let spare = dir.join(SPARE);
    let mut removed = false;
    for pair in segs.windows(2) {
        let (_, path) = &pair[0];
        let (next_first, _) = pair[1];
        if next_first <= upto + 1 {
            let size = fs::metadata(path).map_or(0, |m| m.len());
            let gone = if keep_spare && !spare.exists() {
                fs::rename(path, &spare)
            } else {
                fs::remove_file(path)
            };
            gone.map_err(|e| (freed, e))?;
            freed += size;
            removed = true;
        }
    }
    if removed {
        sync_dir(dir).map_err(|e| (freed, e))?;
    }
    Ok(freed)
}

/// The bytes a trim freed, whether or not it then failed.
pub fn freed(trimmed: &Result<u64, (u64, io::Error)>) -> u64 {
    *trimmed.as_ref().unwrap_or_else(|(n, _)| n)
}

/// The unit of a direct write: its offset, length and buffer are multiples of it (4 KiB, the
/// largest logical block of common disks).
const BLOCK: usize = 4096;

/// `path` opened for direct, synchronous writes; `None` where the filesystem refuses them (and
/// off Linux).
fn open_direct(path: &Path) -> Option<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let flags = rustix::fs::OFlags::DIRECT | rustix::fs::OFlags::DSYNC;
        OpenOptions::new()
            .write(true)
            .custom_flags(flags.bits() as i32)
            .open(path)
            .ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = path;
        None
    }
}

/// Deletes the spare, if any.
fn remove_spare(dir: &Path) -> io::Result<()> {
    match fs::remove_file(dir.join(SPARE)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Whether no segment of `dir` starts at or below `lsn`: true once the writer rotated past it
/// and the trim reached it (`settle` waits for it; the spare and the current segment's tail
/// may still hold such records until [`Wal::scrub`]).
pub fn trimmed_through(dir: &Path, lsn: u64) -> io::Result<bool> {
    Ok(segments(dir)?.first().is_none_or(|(first, _)| *first > lsn))
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
    use std::io::Write;

    impl Wal {
        /// This log with direct writes off, as on a filesystem that refuses them.
        fn buffered(mut self) -> Wal {
            self.direct = None;
            self.direct_ok = false;
            self
        }
    }

    /// Whether the filesystem of `dir` takes direct writes (ext4, XFS, Btrfs: this machine's
    /// temporary directories are on ext4).
    fn takes_direct_writes(dir: &Path) -> bool {
        const EXT4: i64 = 0xEF53;
        const XFS: i64 = 0x5846_5342;
        const BTRFS: i64 = 0x9123_683E;
        let kind = rustix::fs::statfs(dir).unwrap().f_type as i64;
        [EXT4, XFS, BTRFS].contains(&kind)
    }

    #[test]
    fn appends_read_back_the_same_written_direct_or_with_fdatasync() {
        // Records within a block, ending on its edge (16 bytes of header each), spanning several.
        let sizes = [
            1usize,
            100,
            4_096 - 17 - 116 - 16,
            5_000,
            3,
            8_192,
            0,
            4_096,
        ];
        let payloads: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, n)| vec![i as u8 + 1; *n])
            .collect();
        for direct in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let (wal, _) = Wal::open(dir.path(), 0).unwrap();
            let mut wal = if direct { wal } else { wal.buffered() };
            if direct && takes_direct_writes(dir.path()) {
                assert!(wal.direct.is_some(), "direct writes on this filesystem");
            }
            for (i, p) in payloads.iter().enumerate() {
                assert_eq!(wal.append(&[p]).unwrap(), i as u64 + 1);
                if i == 3 {
                    wal.rotate().unwrap(); // a segment cut to its records, a new one
                }
            }
            let (_, current) = segments(dir.path()).unwrap().pop().unwrap();
            let len = fs::metadata(&current).unwrap().len();
            let records = wal.segment_bytes();
            if wal.direct.is_some() {
                assert_eq!(len, records.next_multiple_of(BLOCK as u64), "whole blocks");
            } else {
                assert_eq!(len, records);
            }
            drop(wal);
            let (_, replay) = Wal::open(dir.path(), 0).unwrap();
            let got: Vec<Vec<u8>> = replay.into_iter().map(|r| r.payload).collect();
            assert_eq!(got, payloads, "direct: {direct}");
        }
    }

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

    /// A log in `dir` whose segments hold `groups`, each appended and then rotated.
    fn rotated(dir: &Path, groups: &[&[&[u8]]]) -> Wal {
        let (mut wal, _) = Wal::open(dir, 0).unwrap();
        for group in groups {
            wal.append(group).unwrap();
            wal.rotate().unwrap();
        }
        wal
    }

    #[test]
    fn trim_deletes_whole_segments_up_to_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let wal = rotated(dir.path(), &[&[b"1", b"2"], &[b"3"]]);
        assert_eq!(bytes(dir.path()).unwrap(), 3 * 17);
        assert_eq!(
            trim(dir.path(), 2, true).unwrap(),
            2 * 17,
            "two records of 16 + 1 bytes"
        );
        assert_eq!(trim(dir.path(), 3, true).unwrap(), 17);
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

    #[test]
    fn a_trim_that_fails_part_way_says_what_it_freed() {
        let dir = tempfile::tempdir().unwrap();
        let _wal = rotated(dir.path(), &[&[b"1", b"2"], &[b"3"]]);
        // Something that is not a file, named as a segment between the two: its removal fails.
        fs::create_dir(dir.path().join(segment_name(2))).unwrap();
        let trimmed = trim(dir.path(), 3, false);
        assert!(trimmed.is_err());
        assert_eq!(
            freed(&trimmed),
            2 * 17,
            "the first segment went before the failure"
        );
        assert!(!dir.path().join(segment_name(1)).exists());
    }

    fn file_len(p: &Path) -> u64 {
        fs::metadata(p).unwrap().len()
    }

    #[test]
    fn a_trimmed_segment_is_written_over_and_its_older_records_never_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        // Records over a block: a direct write covers the first block only.
        let big = vec![7u8; 2000];
        wal.append(&[&big, &big, &big]).unwrap(); // LSNs 1-3, 3 x 2 016 bytes
        wal.rotate().unwrap();
        wal.append(&[b"4"]).unwrap();
        assert_eq!(trim(dir.path(), 3, true).unwrap(), 6048);
        let spare = dir.path().join(SPARE);
        assert_eq!(file_len(&spare), 6048, "the first segment, kept");
        // The next segment is the spare, written over from its start.
        wal.rotate().unwrap();
        assert!(!spare.exists());
        let (_, current) = segments(dir.path()).unwrap().pop().unwrap();
        assert_eq!(file_len(&current), 6048);
        wal.append(&[b"5", b"6"]).unwrap();
        assert_eq!(file_len(&current), 6048, "no growth: its blocks are reused");
        // The backlog counts the segments' files: the first, the second, the spare taken.
        assert_eq!(wal.take_grown(), 6048 + 17 + 6048);
        assert_eq!(bytes(dir.path()).unwrap(), 17 + 6048);
        drop(wal);
        // Reopened: 5 and 6, then the segment's older records (LSN 1 onwards) are not replayed.
        let (mut wal, replay) = Wal::open(dir.path(), 4).unwrap();
        let got: Vec<(u64, Vec<u8>)> = replay.into_iter().map(|r| (r.lsn, r.payload)).collect();
        assert_eq!(got, [(5, b"5".to_vec()), (6, b"6".to_vec())]);
        assert_eq!(wal.next_lsn(), 7);
        assert_eq!(
            wal.take_grown(),
            -(6048 - 2 * 17) - 17,
            "the older records cut, and the segment of LSN 4 trimmed, as the backlog counts them"
        );
        assert_eq!(file_len(&current), 34);
    }

    #[test]
    fn a_rotation_leaves_a_recycled_segment_as_long_as_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        wal.append(&[vec![1u8; 200]]).unwrap(); // 216 bytes
        wal.rotate().unwrap();
        trim(dir.path(), 1, true).unwrap();
        wal.rotate().unwrap(); // onto the spare
        wal.append(&[b"ab"]).unwrap(); // 18 bytes
        wal.rotate().unwrap();
        assert_eq!(bytes(dir.path()).unwrap(), 18, "what the backlog counted");
        assert_eq!(
            trim(dir.path(), 3, true).unwrap(),
            18,
            "and what trimming frees"
        );
        drop(wal);
        assert!(dir.path().join(SPARE).exists(), "the trimmed segment kept");
        let (mut wal, replay) = Wal::open(dir.path(), 3).unwrap();
        assert!(replay.is_empty());
        assert!(
            !dir.path().join(SPARE).exists(),
            "a spare is not kept over a restart"
        );
        assert_eq!(wal.take_grown(), 0, "a new segment, nothing adopted");
        assert_eq!(wal.next_lsn(), 4);
    }

    /// What an erasure relies on (`settle.rs`): once the trim passed the erased records, no
    /// file of the log keeps them.
    #[test]
    fn a_scrub_cuts_the_current_segment_to_its_records_and_deletes_the_spare() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        let erased = b"erased-person-erased-person";
        // Past the first block, which the append below writes again.
        let records = erased.repeat(111);
        wal.append(&[&records, &records]).unwrap(); // LSNs 1-2
        wal.rotate().unwrap();
        wal.append(&[erased]).unwrap(); // 3
        wal.rotate().unwrap();
        trim(dir.path(), 2, true).unwrap(); // the first segment: the spare
        trim(dir.path(), 3, true).unwrap(); // the second: deleted
        wal.rotate().unwrap(); // onto the spare: its records stay behind the new ones
        wal.append(&[b"x"]).unwrap();
        let holding = |dir: &Path| -> usize {
            fs::read_dir(dir)
                .unwrap()
                .flatten()
                .filter(|e| {
                    let bytes = fs::read(e.path()).unwrap();
                    bytes.windows(erased.len()).any(|w| w == erased)
                })
                .count()
        };
        assert_eq!(
            holding(dir.path()),
            1,
            "the current segment, behind its record"
        );
        wal.scrub().unwrap();
        assert_eq!(holding(dir.path()), 0);
        let (_, current) = segments(dir.path()).unwrap().pop().unwrap();
        assert_eq!(file_len(&current), 17, "its one record");
        // A spare goes too.
        wal.rotate().unwrap();
        wal.append(&[b"y"]).unwrap();
        trim(dir.path(), 4, true).unwrap();
        assert!(dir.path().join(SPARE).exists());
        wal.scrub().unwrap();
        assert!(!dir.path().join(SPARE).exists());
        drop(wal);
        let (wal, replay) = Wal::open(dir.path(), 4).unwrap();
        assert_eq!(replay.iter().map(|r| r.lsn).collect::<Vec<_>>(), [5]);
        assert_eq!(wal.next_lsn(), 6);
    }

    /// A rotation that failed after it renamed the spare (its open or the directory's sync)
    /// left a segment newer than the current one, holding only the spare's older records.
    #[test]
    fn a_scrub_deletes_the_segment_a_failed_rotation_left() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        wal.append(&[b"a"]).unwrap();
        let erased = b"erased-person-erased-person";
        let stray = dir.path().join(segment_name(wal.next_lsn()));
        fs::write(&stray, erased).unwrap();
        wal.append(&[b"b", b"c"]).unwrap(); // the current segment again, past the stray's name
        wal.scrub().unwrap();
        assert!(!stray.exists());
        drop(wal);
        let (_, replay) = Wal::open(dir.path(), 0).unwrap();
        assert_eq!(replay.iter().map(|r| r.lsn).collect::<Vec<_>>(), [1, 2, 3]);
    }

    /// A stop between the checkpoint and its trim: the open trims, or a settle would wait
    /// for a flush of an idle (or retired) shard.
    #[test]
    fn the_open_trims_the_segments_the_checkpoint_covers() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        wal.append(&[b"1", b"2"]).unwrap();
        wal.rotate().unwrap();
        wal.append(&[b"3"]).unwrap();
        write_checkpoint(dir.path(), 3).unwrap();
        drop(wal);
        let before = bytes(dir.path()).unwrap() as i64;
        let (mut wal, replay) = Wal::open(dir.path(), 3).unwrap();
        assert!(replay.is_empty());
        assert_eq!(
            segments(dir.path()).unwrap().len(),
            1,
            "the new segment only"
        );
        assert!(trimmed_through(dir.path(), 3).unwrap());
        assert_eq!(wal.take_grown(), -before, "the backlog gives them back");
        assert!(!dir.path().join(SPARE).exists());
    }

    #[test]
    fn a_retired_shard_keeps_no_spare() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, _) = Wal::open(dir.path(), 0).unwrap();
        wal.append(&[b"1"]).unwrap();
        wal.rotate().unwrap();
        assert_eq!(trim(dir.path(), 1, false).unwrap(), 17);
        assert!(!dir.path().join(SPARE).exists());
    }
}
