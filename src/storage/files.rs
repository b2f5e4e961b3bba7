//! Small durable files: atomic replacement and directory fsync.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

/// Makes a directory's entries (creations, renames, removals) durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Atomically replaces a small file: write a temporary, fsync, rename, fsync the directory.
/// A crash leaves either the old contents or the new ones, never a mix.
/// A failed write (a full disk) removes its temporary.
pub fn write_atomic(dir: &Path, name: &str, contents: &[u8]) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let written = File::create(&tmp).and_then(|mut f| {
        f.write_all(contents)?;
        f.sync_all()?;
        fs::rename(&tmp, dir.join(name))
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_the_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        write_atomic(dir.path(), "f", b"first, longer").unwrap();
        write_atomic(dir.path(), "f", b"second").unwrap();
        assert_eq!(fs::read(dir.path().join("f")).unwrap(), b"second");
        assert!(!dir.path().join("f.tmp").exists());
    }
}
