//! `load_token` precedence and errors. One test function on purpose: it sets environment
//! variables, and doing that from parallel test threads would race with other readers.

use quorum_api::{load_token, ApiError};

#[test]
fn load_token_prefers_the_environment_then_the_file_and_never_returns_empty() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "  from-file\n").unwrap();
    let var = "QUORUM_API_TEST_TOKEN_LOAD";

    // The environment wins over the file.
    std::env::set_var(var, "from-env");
    assert_eq!(load_token(var, Some(&file)).unwrap(), "from-env");
    assert_eq!(load_token(var, None).unwrap(), "from-env");

    // A blank variable counts as unset; the file's contents are trimmed.
    std::env::set_var(var, "   ");
    assert_eq!(load_token(var, Some(&file)).unwrap(), "from-file");
    std::env::remove_var(var);
    assert_eq!(load_token(var, Some(&file)).unwrap(), "from-file");

    // Nothing anywhere.
    let err = load_token(var, None).unwrap_err();
    assert_eq!(
        err,
        ApiError::InvalidArgument(format!("no api token: set {var} or pass --token-file"))
    );

    // An empty file is no token.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n \n").unwrap();
    let err = load_token(var, Some(&empty)).unwrap_err();
    assert!(
        matches!(err, ApiError::InvalidArgument(ref m) if m.starts_with("no api token") && m.contains("empty")),
        "{err:?}"
    );

    // A missing file is named.
    let missing = dir.path().join("missing");
    let err = load_token(var, Some(&missing)).unwrap_err();
    assert!(
        matches!(err, ApiError::InvalidArgument(ref m) if m.contains(&missing.display().to_string())),
        "{err:?}"
    );
}
