//! File contents kept once per content hash for a whole data dir: every review's pack (and
//! every pack copy a node keeps for a takeover) names its files' contents by blake3 hash, and
//! each content is one read-only file under `blobs/`, shared by every review that holds it. A
//! second review of an unchanged tree writes no content at all.
//!
//! Layout: `blobs/ab/cdef…` (the hash's first two hex digits fan the files out), `blobs/tmp/`
//! for contents being written, `blobs/.lock` for the lock below, and beside each review's
//! store a `blobs.list` of the hashes it references, readable without opening its database
//! (a running review holds that exclusively).
//!
//! **Durability:** contents are written under temporary names, made durable (one `syncfs` on
//! Linux, one fsync per file elsewhere) and only then renamed into place, so a blob under its
//! hash is always whole; the references (`blobs.list`) are durable before the contents, and
//! the pack manifest that names them is written by the caller after [`BlobStore::put_all`]
//! returns, so a manifest never names a missing blob.
//!
//! **Collection:** [`BlobStore::collect`] deletes the blobs no `blobs.list` names. Writers
//! hold the lock shared from their `blobs.list` to their last rename; collection holds it
//! exclusively, so a content one review is about to reuse cannot be collected under it.

use crate::error::StoreError;
use quorum_core::pack::{ResidentWindow, Text};
use std::collections::HashSet;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The directory of a data dir that holds the contents.
pub const BLOBS_DIR: &str = "blobs";
/// Beside a review's store: the hashes its pack references, one per line.
pub const REFERENCES_FILE: &str = "blobs.list";
const TMP_DIR: &str = "tmp";
/// Numbers this process's staged writes apart.
static STAGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
const LOCK_FILE: &str = ".lock";

/// The content-addressed contents of one data dir.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

/// What one [`BlobStore::put_all`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PutStats {
    /// Contents written because no review held them yet.
    pub written: usize,
    pub written_bytes: u64,
    /// Contents already held, so not written again.
    pub reused: usize,
}

/// What one [`BlobStore::collect`] removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Collected {
    pub blobs: usize,
    pub bytes: u64,
}

/// Whether `s` is a blake3 hash as this store names contents: 64 lowercase hex digits.
fn is_hash(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl BlobStore {
    /// The store under `data_root/blobs` (created on first write).
    pub fn in_data_dir(data_root: &Path) -> BlobStore {
        BlobStore::at(data_root.join(BLOBS_DIR))
    }

    /// The store in directory `root` (created on first write).
    pub fn at(root: PathBuf) -> BlobStore {
        BlobStore { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, hash: &str) -> PathBuf {
        self.root.join(&hash[..2]).join(&hash[2..])
    }

    fn lock(&self, exclusive: bool) -> Result<File, StoreError> {
        std::fs::create_dir_all(&self.root).map_err(|e| StoreError::io(&self.root, e))?;
        let path = self.root.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        locked.map_err(|e| StoreError::io(&path, e))?;
        Ok(file)
    }

    /// Make every content of `contents` (hash, text) durable under its hash, after recording
    /// the hashes in `references` (a review's `blobs.list`). A content already held is not
    /// read or written again; one written is checked against its hash first. Reads go through
    /// a [`ResidentWindow`], so storing a spilled pack does not leave it resident.
    pub fn put_all(
        &self,
        references: &Path,
        contents: &[(&str, &Text)],
    ) -> Result<PutStats, StoreError> {
        let _shared = self.lock(false)?;
        let mut listed = String::with_capacity(contents.len() * 65);
        for (hash, _) in contents {
            if !is_hash(hash) {
                return Err(StoreError::corrupt(
                    references,
                    format!("{hash:?} is not a content hash"),
                ));
            }
            listed.push_str(hash);
            listed.push('\n');
        }
        crate::atomic::write_atomically(references, listed.as_bytes())?;

        let tmp = self.root.join(TMP_DIR);
        std::fs::create_dir_all(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        let mut stats = PutStats::default();
        let mut pending: Vec<(PathBuf, PathBuf)> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        let mut window = ResidentWindow::new();
        for (hash, text) in contents {
            if !seen.insert(hash) {
                continue;
            }
            let at = self.path_of(hash);
            if at.is_file() {
                stats.reused += 1;
                continue;
            }
            let bytes = text.as_bytes();
            let actual = blake3::hash(bytes).to_hex();
            if actual.as_str() != *hash {
                return Err(StoreError::corrupt(
                    references,
                    format!("a content named {hash} hashes to {actual}"),
                ));
            }
            // Unique per write: two saves in one process (a node's own review and a pack copy of
            // the same tree) may stage the same content at once.
            let staged = tmp.join(format!(
                "{hash}.{}.{}",
                std::process::id(),
                STAGED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let mut f = File::create(&staged).map_err(|e| StoreError::io(&staged, e))?;
            f.write_all(bytes).map_err(|e| StoreError::io(&staged, e))?;
            if !cfg!(target_os = "linux") {
                f.sync_all().map_err(|e| StoreError::io(&staged, e))?;
            }
            window.done_with(text);
            stats.written += 1;
            stats.written_bytes += bytes.len() as u64;
            pending.push((staged, at));
        }
        drop(window);
        if pending.is_empty() {
            return Ok(stats);
        }
        // Whole before named: the staged contents reach the disk, then take their names.
        sync_filesystem(&tmp)?;
        let mut dirs: HashSet<PathBuf> = HashSet::new();
        for (staged, at) in &pending {
            let dir = at.parent().unwrap_or(&self.root).to_path_buf();
            if dirs.insert(dir.clone()) {
                std::fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
            }
            std::fs::rename(staged, at).map_err(|e| StoreError::io(at, e))?;
        }
        // The renames themselves.
        sync_filesystem(&self.root)?;
        Ok(stats)
    }

    /// The content stored under `hash`, checked against it: a missing or altered blob is an
    /// error naming the file it was for (`what`).
    pub fn get(&self, hash: &str, what: &str) -> Result<Option<Vec<u8>>, StoreError> {
        if !is_hash(hash) {
            return Ok(None);
        }
        let at = self.path_of(hash);
        let bytes = match std::fs::read(&at) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io(&at, e)),
        };
        let actual = blake3::hash(&bytes).to_hex();
        if actual.as_str() != hash {
            return Err(StoreError::corrupt(
                &at,
                format!(
                    "content of {what} does not match its hash (expected {hash}, found {actual})"
                ),
            ));
        }
        Ok(Some(bytes))
    }

    /// Delete every blob no `blobs.list` under any of `flows_dirs/*/` names, and leftovers of
    /// writes that never finished. Holds the lock exclusively: no review is writing meanwhile.
    /// `flows_dirs` must name every directory of reviews that reference this store.
    pub fn collect(&self, flows_dirs: &[PathBuf]) -> Result<Collected, StoreError> {
        if !self.root.is_dir() {
            return Ok(Collected::default());
        }
        let _exclusive = self.lock(true)?;
        let mut referenced: HashSet<String> = HashSet::new();
        for flows_dir in flows_dirs {
            let flows = match std::fs::read_dir(flows_dir) {
                Ok(flows) => flows,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                // Reviews that cannot be listed might reference anything: collect nothing.
                Err(e) => return Err(StoreError::io(flows_dir, e)),
            };
            for flow in flows.flatten() {
                let list = flow.path().join(REFERENCES_FILE);
                match std::fs::read_to_string(&list) {
                    Ok(text) => referenced.extend(text.lines().map(str::to_string)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    // A list that cannot be read might name anything: collect nothing.
                    Err(e) => return Err(StoreError::io(&list, e)),
                }
            }
        }
        let mut out = Collected::default();
        let entries = std::fs::read_dir(&self.root).map_err(|e| StoreError::io(&self.root, e))?;
        for dir in entries.flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            let path = dir.path();
            if name == TMP_DIR {
                // Nobody writes while the lock is held exclusively: these were abandoned.
                for f in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                    out.bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
                    let _ = std::fs::remove_file(f.path());
                }
                continue;
            }
            if name.len() != 2 || !path.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let hash = format!("{name}{}", f.file_name().to_string_lossy());
                if referenced.contains(&hash) {
                    continue;
                }
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                std::fs::remove_file(f.path()).map_err(|e| StoreError::io(f.path(), e))?;
                out.blobs += 1;
                out.bytes += len;
            }
        }
        Ok(out)
    }

    /// Bytes of content held (file lengths, not the file system's blocks).
    pub fn bytes(&self) -> u64 {
        let mut total = 0;
        for dir in std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten()
        {
            if dir.file_name().len() != 2 {
                continue;
            }
            for f in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                total += f.metadata().map(|m| m.len()).unwrap_or(0);
            }
        }
        total
    }
}

/// Everything written to the file system holding `path` reaches the disk.
fn sync_filesystem(path: &Path) -> Result<(), StoreError> {
    #[cfg(target_os = "linux")]
    {
        let dir = File::open(path).map_err(|e| StoreError::io(path, e))?;
        rustix::fs::syncfs(&dir).map_err(|e| StoreError::io(path, std::io::Error::from(e)))?;
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Contents were fsynced one by one; the directory entries here.
        if let Ok(dir) = File::open(path) {
            let _ = dir.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(b: &[u8]) -> String {
        blake3::hash(b).to_hex().to_string()
    }

    fn text(s: &[u8]) -> Text {
        Text::from(std::str::from_utf8(s).unwrap())
    }

    #[test]
    fn a_content_is_written_once_and_read_back_checked() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_data_dir(dir.path());
        let flows = dir.path().join("flows");
        std::fs::create_dir_all(flows.join("a")).unwrap();
        std::fs::create_dir_all(flows.join("b")).unwrap();
        let (x, y) = (b"fn x() {}\n".as_slice(), b"fn y() {}\n".as_slice());
        let (hx, hy) = (hash(x), hash(y));
        let (tx, ty) = (text(x), text(y));
        let first = store
            .put_all(
                &flows.join("a").join(REFERENCES_FILE),
                &[(hx.as_str(), &tx), (hy.as_str(), &ty), (hx.as_str(), &tx)],
            )
            .unwrap();
        assert_eq!((first.written, first.reused), (2, 0));
        let second = store
            .put_all(
                &flows.join("b").join(REFERENCES_FILE),
                &[(hx.as_str(), &tx)],
            )
            .unwrap();
        assert_eq!((second.written, second.reused), (0, 1));
        assert_eq!(store.get(&hx, "x.rs").unwrap().unwrap(), x);
        assert_eq!(store.bytes(), (x.len() + y.len()) as u64);

        // Altered on disk: named, not served.
        std::fs::write(store.path_of(&hy), b"fn z() {}\n").unwrap();
        let err = store.get(&hy, "y.rs").unwrap_err().to_string();
        assert!(
            err.contains("y.rs") && err.contains("does not match"),
            "{err}"
        );
        assert_eq!(store.get(&hash(b"never stored"), "n.rs").unwrap(), None);
    }

    #[test]
    fn collection_keeps_what_a_list_names_and_drops_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_data_dir(dir.path());
        let flows = dir.path().join("flows");
        for f in ["a", "b"] {
            std::fs::create_dir_all(flows.join(f)).unwrap();
        }
        let (x, y) = (b"shared".as_slice(), b"only b".as_slice());
        let (hx, hy) = (hash(x), hash(y));
        let (tx, ty) = (text(x), text(y));
        store
            .put_all(
                &flows.join("a").join(REFERENCES_FILE),
                &[(hx.as_str(), &tx)],
            )
            .unwrap();
        store
            .put_all(
                &flows.join("b").join(REFERENCES_FILE),
                &[(hx.as_str(), &tx), (hy.as_str(), &ty)],
            )
            .unwrap();
        assert_eq!(
            store.collect(std::slice::from_ref(&flows)).unwrap(),
            Collected::default()
        );
        std::fs::remove_dir_all(flows.join("b")).unwrap();
        std::fs::write(store.root.join(TMP_DIR).join("abandoned.1"), b"half").unwrap();
        let gone = store.collect(std::slice::from_ref(&flows)).unwrap();
        assert_eq!(gone.blobs, 1);
        assert_eq!(gone.bytes, (y.len() + 4) as u64);
        assert!(store.get(&hx, "x").unwrap().is_some());
        assert!(store.get(&hy, "y").unwrap().is_none());
    }

    #[test]
    fn saves_of_the_same_content_at_once_in_one_process_both_succeed() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_data_dir(dir.path());
        let flows = dir.path().join("flows");
        let content = "x = 1\n".repeat(20_000);
        let h = hash(content.as_bytes());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (store, flows, content, h) =
                    (store.clone(), flows.clone(), content.clone(), h.clone());
                std::thread::spawn(move || {
                    let dir = flows.join(format!("f{i}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    let t = Text::from(content.as_str());
                    store.put_all(&dir.join(REFERENCES_FILE), &[(h.as_str(), &t)])
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
        assert_eq!(store.get(&h, "x.py").unwrap().unwrap(), content.as_bytes());
    }

    #[test]
    fn a_name_that_is_not_a_hash_is_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = BlobStore::in_data_dir(dir.path());
        let list = dir.path().join(REFERENCES_FILE);
        let err = store
            .put_all(&list, &[("../../etc/passwd", &text(b"x"))])
            .unwrap_err();
        assert!(err.to_string().contains("not a content hash"), "{err}");
        assert!(!list.exists());
    }
}
