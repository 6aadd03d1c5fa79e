//! quorum's own rule pack: semgrep rules written for the defect classes its corpora and
//! fixtures hold (`config/semgrep/`), embedded in the binary so an installed quorum has them
//! without its source tree. The CLI writes them into the data dir and names that directory
//! `{rules}` in the analyzer catalog's arguments.
//!
//! Each rule has positive (`ruleid:`) and negative (`ok:`) test lines in `tests/semgrep/`,
//! checked by `semgrep --test` in the suite; a test here fails when a file of
//! `config/semgrep/` is missing from [`RULE_PACK`].

/// The placeholder an analyzer's arguments use for the directory holding the pack.
pub const RULES_PLACEHOLDER: &str = "{rules}";

/// (path under the rules directory, contents), in path order.
pub const RULE_PACK: &[(&str, &str)] = &[
    (
        "semgrep/debug-mode.yaml",
        include_str!("../../../../config/semgrep/debug-mode.yaml"),
    ),
    (
        "semgrep/mutable-default-argument.yaml",
        include_str!("../../../../config/semgrep/mutable-default-argument.yaml"),
    ),
    (
        "semgrep/non-constant-time-compare.yaml",
        include_str!("../../../../config/semgrep/non-constant-time-compare.yaml"),
    ),
    (
        "semgrep/path-traversal.yaml",
        include_str!("../../../../config/semgrep/path-traversal.yaml"),
    ),
    (
        "semgrep/resource-leak.yaml",
        include_str!("../../../../config/semgrep/resource-leak.yaml"),
    ),
    (
        "semgrep/shared-counter-without-lock.yaml",
        include_str!("../../../../config/semgrep/shared-counter-without-lock.yaml"),
    ),
    (
        "semgrep/shell-injection.yaml",
        include_str!("../../../../config/semgrep/shell-injection.yaml"),
    ),
    (
        "semgrep/sql-built-from-strings.yaml",
        include_str!("../../../../config/semgrep/sql-built-from-strings.yaml"),
    ),
    (
        "semgrep/unsafe-deserialization.yaml",
        include_str!("../../../../config/semgrep/unsafe-deserialization.yaml"),
    ),
    (
        "semgrep/weak-password-hash.yaml",
        include_str!("../../../../config/semgrep/weak-password-hash.yaml"),
    ),
];

/// A short content hash of the whole pack: the directory it is written to, so a changed pack
/// is never mixed with an older one on disk.
pub fn rule_pack_digest() -> String {
    let mut h = blake3::Hasher::new();
    for (path, text) in RULE_PACK {
        h.update(path.as_bytes());
        h.update(&[0]);
        h.update(text.as_bytes());
        h.update(&[0]);
    }
    h.finalize().to_hex()[..16].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_config_semgrep_is_in_the_pack_and_nothing_else() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/semgrep");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| format!("semgrep/{}", e.unwrap().file_name().to_string_lossy()))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = RULE_PACK.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(
            embedded, on_disk,
            "list every rule file in RULE_PACK, in path order"
        );
    }

    #[test]
    fn every_rule_names_a_stable_rule_id_and_a_category() {
        for (path, text) in RULE_PACK {
            let doc: serde_yaml::Value = serde_yaml::from_str(text).unwrap();
            let rules = doc["rules"].as_sequence().unwrap();
            assert!(!rules.is_empty(), "{path}");
            for r in rules {
                let id = r["id"].as_str().unwrap();
                // semgrep prefixes a local rule's id with its directory; the parser reads
                // metadata.rule_id instead, so it must be the id itself.
                assert_eq!(r["metadata"]["rule_id"].as_str(), Some(id), "{path}: {id}");
                assert!(
                    r["metadata"]["category"]
                        .as_str()
                        .is_some_and(|c| c.contains('/')),
                    "{path}: {id} needs metadata.category AREA/CLASS"
                );
            }
        }
    }

    #[test]
    fn the_digest_changes_with_the_pack() {
        assert_eq!(rule_pack_digest().len(), 16);
        assert_eq!(rule_pack_digest(), rule_pack_digest());
    }
}
