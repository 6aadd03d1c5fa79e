//! Where the data dir defaults to. Alone in its binary because it changes the environment,
//! which is not safe while other threads may read it.

use quorum_store::DataDir;
use std::path::PathBuf;

#[test]
fn default_location_is_the_environment_then_the_user_data_dir() {
    std::env::set_var("QUORUM_DATA_DIR", "/srv/quorum-data");
    assert_eq!(
        DataDir::default_location(),
        PathBuf::from("/srv/quorum-data")
    );
    // Set but empty counts as unset.
    std::env::set_var("QUORUM_DATA_DIR", "");
    let fallback = dirs::data_dir()
        .map(|d| d.join("quorum"))
        .unwrap_or_else(|| PathBuf::from(".quorum"));
    assert_eq!(DataDir::default_location(), fallback);
    std::env::remove_var("QUORUM_DATA_DIR");
    assert_eq!(DataDir::default_location(), fallback);
}
