//! A shard's outbox: closed lake files on the shard's disk, waiting for the uploader. The
//! shard's parts (`merge.rs`: flushed files waiting to be merged into lake files) are kept the
//! same way under `parts/`, and recovered by the same rule.
//!
//! `<shard>/outbox/<lake path>`: the tree under `outbox/` mirrors the lake, so a file's lake path
//! is its path below `outbox/`. The stager writes each file (a temporary renamed into place) and
//! makes a flush's files durable together (`syncfs`) before the checkpoint that trims the WAL; the
//! uploader puts a file only once its flush is checkpointed (its first LSN, in its name, is at or
//! below the checkpoint) and deletes it once the put succeeded. A file whose flush has no
//! checkpoint (a crash between staging and checkpointing) is deleted at start: the WAL replay
//! stages its rows again, perhaps cut at other LSNs.

use std::fs;
use std::io::{self, Write};
use std::path::{Path as FsPath, PathBuf};
use std::time::SystemTime;

use object_store::path::Path;

const TMP: &str = ".tmp";

/// A file in the outbox.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Where it goes in the lake.
    pub path: Path,
    /// Where it is on disk.
    pub file: PathBuf,
    pub bytes: u64,
    /// The first LSN of its flush (from its name, `part-<node>-<shard>-<lsn>.parquet`).
    pub first_lsn: u64,
    pub staged_at: SystemTime,
}

impl Staged {
    /// The app of the file (`.../app_id=<app>/...`).
    pub fn app_id(&self) -> &str {
        self.path
            .as_ref()
            .split('/')
            .find_map(|p| p.strip_prefix("app_id="))
            .unwrap_or("")
    }
}

#[derive(Debug, Clone)]
pub struct Outbox {
    dir: PathBuf,
}

/// The first LSN in a lake file's name.
fn first_lsn(name: &str) -> Option<u64> {
    name.strip_suffix(".parquet")?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

impl Outbox {
    pub fn new(shard_dir: &FsPath) -> Outbox {
        Outbox {
            dir: shard_dir.join("outbox"),
        }
    }

    /// The shard's parts, kept like the outbox (`merge.rs`).
    pub fn parts(shard_dir: &FsPath) -> Outbox {
        Outbox {
            dir: shard_dir.join("parts"),
        }
    }

    /// Where the file for lake path `path` is on disk.
    pub fn local(&self, path: &Path) -> PathBuf {
        path.parts()
            .fold(self.dir.clone(), |p, part| p.join(part.as_ref()))
    }

    /// Writes `bytes` as the file for `path` (a temporary renamed into place), not yet durably:
    /// [`Outbox::sync`] makes a flush's files durable together. Returns the size of the file it
    /// replaced (a retried write replaces the file it wrote before), `None` for a new file. A
    /// failed write leaves nothing behind.
    pub fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<Option<u64>> {
        let file = self.local(path);
        let dir = file.parent().unwrap_or(&self.dir).to_path_buf();
        fs::create_dir_all(&dir)?;
        let before = fs::metadata(&file).ok().map(|m| m.len());
        let mut tmp_name = file.as_os_str().to_owned();
        tmp_name.push(TMP);
        let tmp = PathBuf::from(tmp_name);
        let written = fs::File::create(&tmp).and_then(|mut f| f.write_all(bytes));
        if let Err(e) = written.and_then(|()| fs::rename(&tmp, &file)) {
            let _ = fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(before)
    }

    /// Makes the files [`Outbox::write`] wrote for `paths` durable, with their directory
    /// entries. On Linux one `syncfs` of the disk: a flush of an edge serving many apps writes a
    /// part per app, and two fsyncs each (the file, its directory) cost about half a millisecond
    /// per part here, more than the flush's Parquet. Elsewhere each file and directory is
    /// fsync'd.
    pub fn sync<'p>(&self, paths: impl IntoIterator<Item = &'p Path>) -> io::Result<()> {
        let mut paths = paths.into_iter().peekable();
        if paths.peek().is_none() {
            return Ok(());
        }
        #[cfg(target_os = "linux")]
        {
            Ok(rustix::fs::syncfs(fs::File::open(&self.dir)?)?)
        }
        #[cfg(not(target_os = "linux"))]
        {
            for path in paths {
                let file = self.local(path);
                fs::File::open(&file)?.sync_all()?;
                crate::storage::files::sync_dir(file.parent().unwrap_or(&self.dir))?;
            }
            Ok(())
        }
    }

    /// Every staged file, oldest flush first. Temporaries of interrupted writes are skipped.
    pub fn list(&self) -> io::Result<Vec<Staged>> {
        self.list_from(self.dir.clone())
    }

    /// The staged files under lake directory `dir` (an app's: `lake::app_dir`), oldest first.
    pub fn list_under(&self, dir: &Path) -> io::Result<Vec<Staged>> {
        self.list_from(self.local(dir))
    }

    fn list_from(&self, top: PathBuf) -> io::Result<Vec<Staged>> {
        let mut out = Vec::new();
        let mut dirs = vec![top];
        while let Some(dir) = dirs.pop() {
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let file = entry.path();
                if entry.file_type()?.is_dir() {
                    dirs.push(file);
                    continue;
                }
                let name = entry.file_name();
                let Some(lsn) = name.to_str().and_then(first_lsn) else {
                    continue;
                };
                // A file the stager renamed or removed since the directory was read is no
                // longer there: not an error of the listing.
                let meta = match entry.metadata() {
                    Ok(m) => m,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                };
                let Some(path) = file
                    .strip_prefix(&self.dir)
                    .ok()
                    .and_then(|p| p.to_str())
                    .map(Path::from)
                else {
                    continue;
                };
                out.push(Staged {
                    path,
                    file,
                    bytes: meta.len(),
                    first_lsn: lsn,
                    staged_at: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                });
            }
        }
        out.sort_by(|a, b| (a.first_lsn, &a.path).cmp(&(b.first_lsn, &b.path)));
        Ok(out)
    }

    /// Deletes a shipped file and the directories it leaves empty.
    pub fn remove(&self, staged: &Staged) -> io::Result<()> {
        match fs::remove_file(&staged.file) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut dir = staged.file.parent();
        while let Some(d) = dir.filter(|d| *d != self.dir && d.starts_with(&self.dir)) {
            // Fails (and stops) on the first directory that still holds something.
            if fs::remove_dir(d).is_err() {
                break;
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// At start: deletes the files of flushes beyond `checkpoint` and every temporary; returns
    /// the number and the bytes of the files that stay.
    pub fn recover(&self, checkpoint: u64) -> io::Result<(u64, u64)> {
        let (mut files, mut bytes) = (0, 0);
        for s in self.list()? {
            if s.first_lsn > checkpoint {
                tracing::info!(path = %s.path, "outbox file of an unfinished flush removed; the WAL replay writes it again");
                self.remove(&s)?;
            } else {
                files += 1;
                bytes += s.bytes;
            }
        }
        self.remove_temporaries(&self.dir)?;
        Ok((files, bytes))
    }

    fn remove_temporaries(&self, dir: &FsPath) -> io::Result<()> {
        let entries = match fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let path = entry.path();
            if entry.metadata()?.is_dir() {
                self.remove_temporaries(&path)?;
            } else if path.to_str().is_some_and(|p| p.ends_with(TMP)) {
                fs::remove_file(&path)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lake_path(app: &str, lsn: u64) -> Path {
        Path::from(format!(
            "events/app_id={app}/dt=2026-11-26/hour=10/part-n0-0-{lsn:020}.parquet"
        ))
    }

    #[test]
    fn files_mirror_the_lake_and_list_oldest_flush_first() {
        let dir = tempfile::tempdir().unwrap();
        let o = Outbox::new(dir.path());
        assert_eq!(o.write(&lake_path("b", 9), b"nine").unwrap(), None);
        assert_eq!(o.write(&lake_path("a", 3), b"three").unwrap(), None);
        assert_eq!(
            o.write(&lake_path("a", 3), b"3").unwrap(),
            Some(5),
            "a retry replaces"
        );
        // Nothing written, nothing to sync (the directory need not exist); then both at once.
        Outbox::parts(dir.path()).sync([]).unwrap();
        o.sync([&lake_path("b", 9), &lake_path("a", 3)]).unwrap();
        let got = o.list().unwrap();
        let names: Vec<(&str, u64, u64)> = got
            .iter()
            .map(|s| (s.app_id(), s.first_lsn, s.bytes))
            .collect();
        assert_eq!(names, [("a", 3, 1), ("b", 9, 4)]);
        assert_eq!(got[0].path, lake_path("a", 3));
        o.remove(&got[0]).unwrap();
        assert!(
            !dir.path().join("outbox/events/app_id=a").exists(),
            "empty directories go"
        );
        assert!(dir.path().join("outbox/events/app_id=b").exists());
    }

    #[test]
    fn a_listing_while_files_are_written_and_removed_does_not_fail() {
        // The stager writes (a temporary renamed into place) while the uploader lists: an entry
        // read from the directory may be gone by the time it is looked at.
        let dir = tempfile::tempdir().unwrap();
        let o = Outbox::new(dir.path());
        o.write(&lake_path("a", 1), b"first").unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for lsn in 2..3_000 {
                    let path = lake_path("a", lsn);
                    o.write(&path, b"part").unwrap();
                    fs::remove_file(o.local(&path)).unwrap();
                }
                stop.store(true, std::sync::atomic::Ordering::Release);
            });
            let mut listings = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) || listings == 0 {
                let listed = o.list().unwrap();
                assert_eq!(listed[0].first_lsn, 1, "{listed:?}");
                listings += 1;
            }
        });
    }

    #[test]
    fn recovery_drops_unfinished_flushes_and_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let o = Outbox::new(dir.path());
        o.write(&lake_path("a", 3), b"done").unwrap();
        o.write(&lake_path("a", 8), b"cut by a crash").unwrap();
        let tmp = o.local(&lake_path("a", 9)).with_extension("parquet.tmp");
        fs::write(&tmp, b"half").unwrap();
        assert_eq!(o.recover(7).unwrap(), (1, 4));
        let left: Vec<u64> = o.list().unwrap().iter().map(|s| s.first_lsn).collect();
        assert_eq!(left, [3]);
        assert!(!tmp.exists());
    }
}
