//! Taking the snapshot of a review target and deciding its scope: the directory as it is, or
//! (with `--diff`) the head commit's tree and the change against the base; the repository's
//! `.quorum.toml`; the profile. Every failure here is an input error (exit 2), before anything
//! ran.

use crate::settings::Settings;
use anyhow::{anyhow, bail, Result};
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::repo_config::{RepoConfig, FILE_NAME};
use quorum_core::scope::{Profile, ReviewScope};
use std::path::Path;

/// Parse a profile name from a flag or a config key.
pub fn parse_profile(value: &str, what: &str) -> Result<Profile> {
    Profile::parse(value).ok_or_else(|| anyhow!("invalid {what} {value:?}: use {}", Profile::NAMES))
}

/// `.quorum.toml` at the root of a directory target, if there is one.
pub fn repo_config_on_disk(root: &Path) -> Result<Option<RepoConfig>> {
    let path = root.join(FILE_NAME);
    match std::fs::read(&path) {
        Ok(bytes) => RepoConfig::parse(&bytes, &path.display().to_string())
            .map(Some)
            .map_err(|e| anyhow!("invalid review configuration: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => bail!(
            "cannot read {}: {e}; fix its permissions or remove it",
            path.display()
        ),
    }
}

/// The operator's pack options plus the repository's own excludes.
pub fn pack_options(settings: &Settings, repo: Option<&RepoConfig>) -> PackOptions {
    let mut opts = settings.pack.clone();
    if let Some(c) = repo {
        opts.exclude.extend(c.exclude.iter().cloned());
    }
    opts
}

/// Snapshot `root` and decide the review's scope. `profile_flag` wins over `.quorum.toml`'s
/// `profile`, which wins over the operator's configuration.
pub fn snapshot(
    root: &Path,
    settings: &Settings,
    diff: Option<&str>,
    profile_flag: Option<&str>,
) -> Result<(ContextPack, ReviewScope)> {
    let (pack, change, repo) = match diff {
        None => {
            let repo = repo_config_on_disk(root)?;
            let pack = ContextPack::snapshot(root, &pack_options(settings, repo.as_ref()))
                .map_err(|e| anyhow!("cannot snapshot the target: {e}"))?;
            (pack, None, repo)
        }
        Some(spec) => {
            let git = |e: quorum_git::GitError| anyhow!("cannot review the change: {e}");
            let repo_git = quorum_git::Repo::discover(root).map_err(git)?;
            let range = repo_git.resolve(spec).map_err(git)?;
            // The configuration of the revision under review, like everything else reviewed.
            let repo = match repo_git.read_at(range.head, FILE_NAME).map_err(git)? {
                None => None,
                Some(bytes) => {
                    let head = range.head.to_string();
                    let label = format!(
                        "{} (at {})",
                        root.join(FILE_NAME).display(),
                        &head[..head.len().min(12)]
                    );
                    Some(
                        RepoConfig::parse(&bytes, &label)
                            .map_err(|e| anyhow!("invalid review configuration: {e}"))?,
                    )
                }
            };
            let (pack, change) = repo_git
                .read_change(&range, &pack_options(settings, repo.as_ref()))
                .map_err(git)?;
            (pack, Some(change), repo)
        }
    };
    let profile = match (profile_flag, repo.as_ref().and_then(|r| r.profile)) {
        (Some(flag), _) => parse_profile(flag, "--profile")?,
        (None, Some(p)) => p,
        (None, None) => parse_profile(&settings.profile, "configuration: profile")?,
    };
    Ok((
        pack,
        ReviewScope {
            change,
            guidance: repo.map(|r| r.guidance).unwrap_or_default(),
            profile,
            analyzers: Default::default(),
        },
    ))
}
