//! Replacing a small file whole: written beside it, synced, renamed over it, so a reader (or a
//! crash) sees the old content or the new, never part of either.

use crate::error::StoreError;
use std::path::Path;

/// Write `bytes` to `path` atomically and durably.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write as _;
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
    file.write_all(bytes).map_err(|e| StoreError::io(&tmp, e))?;
    file.sync_all().map_err(|e| StoreError::io(&tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| StoreError::io(path, e))
}
