//! Consent for commands the reviewed tree chose: a test command named in its `.quorum.toml`
//! runs only when the user agreed — `--trust-repo-config`, `[fix] trust_repo_config = true`
//! in the user's own config file (never a file in the tree or the working directory), or a
//! yes at a terminal. Without a terminal it is refused with the line that says what allows it.

use anyhow::{bail, Result};
use std::io::{BufRead, IsTerminal, Write};

/// How the user answered for a command the reviewed tree names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consent {
    /// Run it.
    Given,
    /// The user said no at the prompt: run no test command.
    Declined,
}

/// Whether the user's own config file trusts repository config (`[fix] trust_repo_config`).
fn trusted_in_user_config() -> bool {
    let Some(path) = crate::settings::user_config_path() else {
        return false;
    };
    config::Config::builder()
        .add_source(
            config::File::from(path)
                .format(config::FileFormat::Toml)
                .required(false),
        )
        .build()
        .ok()
        .and_then(|c| c.get_bool("fix.trust_repo_config").ok())
        .unwrap_or(false)
}

/// Ask for consent to run `command`, which the reviewed tree's `source` names.
pub(crate) fn repo_command(command: &str, source: &str, trusted_by_flag: bool) -> Result<Consent> {
    let trusted = trusted_by_flag || trusted_in_user_config();
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    decide(command, source, trusted, interactive, || {
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "quorum: the reviewed tree's {source} asks to run `{command}` as its test command (sandboxed). Run it? [y/N] "
        );
        let _ = err.flush();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).ok()?;
        Some(line)
    })
}

/// The decision, with the terminal (`ask`) swapped for tests.
fn decide(
    command: &str,
    source: &str,
    trusted: bool,
    interactive: bool,
    ask: impl FnOnce() -> Option<String>,
) -> Result<Consent> {
    if trusted {
        eprintln!("quorum: running the test command `{command}` from {source} (repository config trusted)");
        return Ok(Consent::Given);
    }
    if !interactive {
        bail!(
            "the reviewed tree's {source} names a test command (`{command}`), and quorum runs a command the tree chose only with your consent: pass --trust-repo-config to run it, --test-cmd CMD to run your own, or set [fix] trust_repo_config = true in your own config file"
        );
    }
    match ask() {
        Some(a) if matches!(a.trim().to_ascii_lowercase().as_str(), "y" | "yes") => {
            Ok(Consent::Given)
        }
        _ => {
            eprintln!("quorum: not running `{command}`: no test oracle (pass --test-cmd CMD to use your own)");
            Ok(Consent::Declined)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_command_runs_only_with_consent() {
        let never = || -> Option<String> { panic!("asked without a terminal") };
        assert_eq!(
            decide("make test", ".quorum.toml", true, false, never).unwrap(),
            Consent::Given
        );
        let refused = decide("make test", ".quorum.toml", false, false, never)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("--trust-repo-config") && refused.contains("`make test`"),
            "{refused}"
        );
        assert_eq!(
            decide("make test", ".quorum.toml", false, true, || Some(
                "y\n".into()
            ))
            .unwrap(),
            Consent::Given
        );
        for answer in [Some("\n".to_string()), Some("no\n".into()), None] {
            assert_eq!(
                decide("make test", ".quorum.toml", false, true, || answer).unwrap(),
                Consent::Declined
            );
        }
    }
}
