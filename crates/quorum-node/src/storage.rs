//! The node's store, watched: while the disk under its data dir refuses writes
//! (`quorum_runtime::StorageHealth`, told by every review's fact log and by a probe), the node
//! takes no new review and no attempt and says why in `cluster status`. The probe writes a
//! small file under the data dir every few seconds — so a disk that filled up while the node
//! was idle is noticed before a review is sent to it — and the first write that goes through,
//! the probe's or a review's, puts the node back to work.

use quorum_runtime::StorageHealth;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How often a node tries the disk while it takes writes, and while it does not.
pub const PROBE_HEALTHY: Duration = Duration::from_secs(5);
pub const PROBE_FAILING: Duration = Duration::from_secs(2);

/// Write, flush and remove a file of `bytes` in `dir`: whether the disk takes a write now.
fn probe(dir: &Path, bytes: usize) -> std::io::Result<()> {
    let path = dir.join(".quorum-write-probe");
    let written = (|| {
        let mut f = std::fs::File::create(&path)?;
        f.write_all(&vec![0u8; bytes])?;
        f.sync_all()
    })();
    let _ = std::fs::remove_file(&path);
    written
}

/// A healthy disk is checked with a page; a disk that refused writes must take a store
/// segment's worth (sled writes in 512 KiB segments) before the node takes work again, so a
/// nearly full disk does not put it back to work only to fail the next review.
const PROBE_BYTES: usize = 4096;
const RECOVERY_BYTES: usize = 1 << 20;

/// Watch `health` for as long as the process runs: probe `data_root` every
/// [`PROBE_HEALTHY`] ([`PROBE_FAILING`] while it refuses writes) and tell `health` what the
/// disk said.
pub fn watch(data_root: PathBuf, health: Arc<StorageHealth>) {
    tokio::spawn(async move {
        loop {
            let failing = health.failing().is_some();
            tokio::time::sleep(if failing {
                PROBE_FAILING
            } else {
                PROBE_HEALTHY
            })
            .await;
            let dir = data_root.clone();
            let bytes = if failing { RECOVERY_BYTES } else { PROBE_BYTES };
            match tokio::task::spawn_blocking(move || probe(&dir, bytes)).await {
                Ok(Ok(())) => health.recovered(),
                Ok(Err(e)) => {
                    if let Some(fault) = quorum_store::StorageFault::of(&e) {
                        health.failed(&format!(
                            "the data dir {} {}: {}",
                            data_root.display(),
                            fault.describe(),
                            fault.remedy()
                        ));
                    }
                }
                Err(_) => {}
            }
        }
    });
}
