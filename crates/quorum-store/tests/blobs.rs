//! The data dir's blob store through the store's API: reviews of the same tree share its
//! contents, a node's pack copies share them too, collection keeps what is still referenced, and
//! a content altered on disk is corrupt, naming its file.

mod common;

use common::meta;
use quorum_core::pack::ContextPack;
use quorum_store::{DataDir, StoreError};
use std::path::Path;

fn data_dir() -> (tempfile::TempDir, DataDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = DataDir::new(dir.path());
    (dir, data)
}

/// Bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        total += if p.is_dir() {
            bytes_under(&p)
        } else {
            e.metadata().map(|m| m.len()).unwrap_or(0)
        };
    }
    total
}

#[test]
fn reviews_of_the_same_tree_share_its_contents_and_gc_keeps_what_is_still_referenced() {
    let (tmp, data) = data_dir();
    let big = "x = 1\n".repeat(50_000); // 300 KB, far above any store's own overhead
    let pack = |extra: &str| {
        ContextPack::from_files(
            tmp.path().join("target"),
            None,
            vec![
                ("src/big.py".to_string(), big.clone()),
                ("src/changed.py".to_string(), extra.to_string()),
            ],
        )
    };
    let first = data.create_flow(&meta("a", "/repo", 1)).unwrap();
    first.save_pack(&pack("v = 1\n")).unwrap();
    drop(first);
    let after_first = bytes_under(data.blobs().root());
    assert!(after_first as usize >= big.len(), "{after_first}");

    // The same tree again, one small file changed: only that file's content is new.
    let second = data.create_flow(&meta("b", "/repo", 2)).unwrap();
    second.save_pack(&pack("v = 2\n")).unwrap();
    drop(second);
    let growth = bytes_under(data.blobs().root()) - after_first;
    assert_eq!(growth, "v = 2\n".len() as u64);
    // Neither review's own database holds the contents.
    for id in ["a", "b"] {
        let db = bytes_under(&tmp.path().join("flows").join(id));
        assert!(
            (db as usize) < big.len(),
            "review {id} stores {db} bytes itself"
        );
    }
    for (id, v) in [("a", "v = 1\n"), ("b", "v = 2\n")] {
        let loaded = data.open_flow(id).unwrap().load_pack().unwrap();
        assert_eq!(&*loaded.files["src/big.py"].content, big.as_str());
        assert_eq!(&*loaded.files["src/changed.py"].content, v);
    }

    // Review a goes: its own content with it, the shared one stays for b.
    data.delete_flow("a").unwrap();
    let gone = data.collect_blobs().unwrap();
    assert_eq!(gone.blobs, 1);
    assert_eq!(gone.bytes, "v = 1\n".len() as u64);
    assert!(data.open_flow("b").unwrap().load_pack().is_ok());
    data.delete_flow("b").unwrap();
    assert_eq!(data.collect_blobs().unwrap().blobs, 2);
    assert_eq!(bytes_under(data.blobs().root()), 0);
}

#[test]
fn a_node_s_pack_copies_share_its_contents_and_keep_them_from_collection() {
    let (tmp, data) = data_dir();
    let content = "def f():\n    return 1\n".repeat(1000);
    let pack = ContextPack::from_files(
        tmp.path().join("target"),
        None,
        vec![("src/f.py".to_string(), content.clone())],
    );
    data.create_flow(&meta("own", "/repo", 1))
        .unwrap()
        .save_pack(&pack)
        .unwrap();
    let copies = data.replicas();
    copies
        .create_flow(&meta("copy", "/repo", 2))
        .unwrap()
        .save_pack(&pack)
        .unwrap();
    // Once, in the node's store; nothing under replicas/ holds it again.
    assert_eq!(copies.blobs().root(), data.blobs().root());
    assert_eq!(data.blobs().bytes(), content.len() as u64);
    assert!(!tmp.path().join("replicas").join("blobs").exists());

    // The node's own review goes: the copy still needs the content, from either side.
    data.delete_flow("own").unwrap();
    assert_eq!(data.collect_blobs().unwrap().blobs, 0);
    assert_eq!(copies.collect_blobs().unwrap().blobs, 0);
    assert!(copies.open_flow("copy").unwrap().load_pack().is_ok());
    copies.delete_flow("copy").unwrap();
    assert_eq!(copies.collect_blobs().unwrap().blobs, 1);
    assert_eq!(data.blobs().bytes(), 0);
}

#[test]
fn a_stored_content_altered_on_disk_is_corrupt_naming_the_file() {
    let (tmp, data) = data_dir();
    let pack = ContextPack::from_files(
        tmp.path().join("target"),
        None,
        vec![("src/lib.rs".to_string(), "pub fn f() {}\n".to_string())],
    );
    let store = data.create_flow(&meta("f", "/repo", 1)).unwrap();
    store.save_pack(&pack).unwrap();
    drop(store);
    let hash = &pack.files["src/lib.rs"].hash;
    let blob = data.blobs().root().join(&hash[..2]).join(&hash[2..]);
    std::fs::write(&blob, "pub fn g() {}\n").unwrap();
    let err = data.open_flow("f").unwrap().load_pack().unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { .. }) && err.to_string().contains("src/lib.rs"),
        "{err}"
    );
}
