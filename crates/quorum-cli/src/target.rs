//! Taking the snapshot of a review target and deciding its scope: the directory as it is, or
//! (with `--diff`) the head commit's tree and the change against the base; the repository's
//! `.quorum.toml`; the profile. Every failure here is an input error (exit 2), before anything
//! ran.

use crate::settings::{parse_profile, Settings};
use anyhow::{anyhow, bail, Result};
use quorum_core::pack::REPO_CONFIG_FILE as FILE_NAME;
use quorum_core::pack::{ContextPack, PackOptions};
use quorum_core::repo_config::RepoConfig;
use quorum_core::scope::ReviewScope;
use std::path::Path;

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
            spec: None,
            prior: None,
            analyzers: Default::default(),
            memory: None,
        },
    ))
}

/// Read `--spec` for a flow: required by a flow with a conformance stage, refused by any other
/// (it would be silently ignored). The spec may live anywhere, but it must be a readable UTF-8
/// text file of at most 1 MiB with something in it, and never a secrets file: its whole text
/// goes into model prompts.
pub fn read_spec(
    flow: &quorum_core::flows::flow::Flow,
    spec: Option<&Path>,
) -> Result<Option<quorum_core::judging::conformance::Spec>> {
    let path = match (flow.uses_spec(), spec) {
        (true, None) => bail!(
            "flow {} judges the target against a spec: pass --spec FILE (acceptance criteria as a markdown checklist, numbered requirements or MUST/SHALL lines)",
            flow.name
        ),
        (false, Some(_)) => bail!(
            "--spec is only read by a flow with a conformance stage, and flow {} has none: use --flow conformance, or drop --spec",
            flow.name
        ),
        (false, None) => return Ok(None),
        (true, Some(p)) => p,
    };
    read_spec_file(path).map(Some)
}

/// Read a spec file as `--spec` names it: a readable UTF-8 text file of at most 1 MiB with
/// something in it, and never a secrets file (its whole text goes into model prompts).
pub fn read_spec_file(path: &Path) -> Result<quorum_core::judging::conformance::Spec> {
    use quorum_core::judging::conformance::{Spec, MAX_SPEC_BYTES};
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| anyhow!("cannot read the spec {shown}: {e}; pass the spec's file"))?;
    if !meta.is_file() {
        bail!("the spec {shown} is not a file: pass the spec's file");
    }
    let names = [
        path.file_name().map(|n| n.to_string_lossy().into_owned()),
        std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
    ];
    if names
        .iter()
        .flatten()
        .any(|n| quorum_core::pack::is_secret_file_name(n))
    {
        bail!("the spec {shown} is a secrets file, and its text would be sent to models: pass the spec's own file");
    }
    if meta.len() > MAX_SPEC_BYTES {
        bail!(
            "the spec {shown} is {} bytes, over the limit of {MAX_SPEC_BYTES}: pass only the acceptance criteria",
            meta.len()
        );
    }
    let bytes = std::fs::read(path).map_err(|e| anyhow!("cannot read the spec {shown}: {e}"))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow!("the spec {shown} is not UTF-8 text: pass a text (markdown) file"))?;
    Spec::from_text(&shown.to_string(), text).map_err(|e| anyhow!("{e}"))
}

/// Note where the spec is in the pack when it lies inside the target, so the judge neither
/// sees it as material nor accepts it as evidence.
pub fn place_spec(
    mut spec: quorum_core::judging::conformance::Spec,
    root: &Path,
    pack: &ContextPack,
) -> quorum_core::judging::conformance::Spec {
    spec.pack_path = std::fs::canonicalize(&spec.path)
        .ok()
        .and_then(|p| {
            p.strip_prefix(root)
                .ok()
                .map(|r| r.to_string_lossy().replace('\\', "/"))
        })
        .filter(|rel| pack.get(rel).is_some());
    spec
}

/// Read `--prior` (and `--dispositions`) for a flow: required by a flow with an adjudicator
/// stage, refused by any other (they would be silently ignored). The prior report must be a
/// quorum report.json; the dispositions file (YAML or JSON) may only name its findings. Each
/// failure is one line saying which file and what to do.
pub fn read_prior(
    flow: &quorum_core::flows::flow::Flow,
    prior: Option<&Path>,
    dispositions: Option<&Path>,
) -> Result<Option<quorum_core::judging::adjudication::Prior>> {
    let path = match (flow.uses_prior(), prior) {
        (true, None) => bail!(
            "flow {} adjudicates a prior review: pass --prior REPORT.json (the report.json of that review)",
            flow.name
        ),
        (false, Some(_)) => bail!(
            "--prior is only read by a flow with an adjudicator stage, and flow {} has none: use --flow finish-review, or drop --prior",
            flow.name
        ),
        (false, None) if dispositions.is_some() => bail!(
            "--dispositions is only read with --prior by a flow with an adjudicator stage: use --flow finish-review --prior REPORT.json, or drop --dispositions"
        ),
        (false, None) => return Ok(None),
        (true, Some(p)) => p,
    };
    read_prior_files(path, dispositions).map(Some)
}

/// The texts of a `--prior` report and its `--dispositions` file, as read from disk, before
/// anyone parses them (a cluster node parses them again: it trusts no client).
pub struct PriorFiles {
    pub path: String,
    pub report: String,
    pub dispositions: Option<(String, String)>,
}

impl PriorFiles {
    pub fn read(prior: &Path, dispositions: Option<&Path>) -> Result<PriorFiles> {
        Ok(PriorFiles {
            path: prior.display().to_string(),
            report: read_small_text(prior, "prior report")?,
            dispositions: match dispositions {
                Some(d) => Some((
                    d.display().to_string(),
                    read_small_text(d, "dispositions file")?,
                )),
                None => None,
            },
        })
    }

    /// Parse them as a finish review does, each failure one line naming the file.
    pub fn parse(&self) -> Result<quorum_core::judging::adjudication::Prior> {
        use quorum_core::error::PriorError;
        let dispositions = self
            .dispositions
            .as_ref()
            .map(|(p, t)| (p.as_str(), t.as_str()));
        quorum_core::judging::adjudication::Prior::from_texts(&self.path, &self.report, dispositions)
            .map_err(|e| match &e {
                PriorError::Report(_) => anyhow!(
                    "{e} ({}): pass the report.json a quorum review wrote",
                    self.path
                ),
                PriorError::Dispositions(_) => anyhow!(
                    "{e} ({}): map each prior finding id to {{disposition: fixed|wont_fix|deferred|disputed, comment: ...}}",
                    dispositions.map(|(p, _)| p).unwrap_or_default()
                ),
            })
    }
}

fn read_prior_files(
    path: &Path,
    dispositions: Option<&Path>,
) -> Result<quorum_core::judging::adjudication::Prior> {
    PriorFiles::read(path, dispositions)?.parse()
}

fn read_small_text(path: &Path, what: &str) -> Result<String> {
    use quorum_core::judging::adjudication::MAX_PRIOR_BYTES;
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| anyhow!("cannot read the {what} {shown}: {e}"))?;
    if !meta.is_file() {
        bail!("the {what} {shown} is not a file");
    }
    if meta.len() > MAX_PRIOR_BYTES {
        bail!(
            "the {what} {shown} is {} bytes, over the limit of {MAX_PRIOR_BYTES}",
            meta.len()
        );
    }
    let bytes = std::fs::read(path).map_err(|e| anyhow!("cannot read the {what} {shown}: {e}"))?;
    String::from_utf8(bytes).map_err(|_| anyhow!("the {what} {shown} is not UTF-8 text"))
}

/// Read `--since REPORT.json` (and `--dispositions`): the earlier review a report is compared
/// with. Each failure is one line naming the file.
pub fn read_since(
    report: &Path,
    dispositions: Option<&Path>,
) -> Result<quorum_core::report::since::Baseline> {
    let files = PriorFiles::read(report, dispositions)?;
    files.parse()?;
    quorum_core::report::since::Baseline::from_texts(
        &files.path,
        &files.report,
        files
            .dispositions
            .as_ref()
            .map(|(p, t)| (p.as_str(), t.as_str())),
    )
    .map_err(|e| {
        anyhow!(
            "{e} ({}): pass the report.json a quorum review wrote",
            files.path
        )
    })
}

/// The last completed review of `root` in this data dir, as a baseline (`--incremental`
/// without `--since`); none when there is none or its report cannot be read.
pub fn last_completed_review(
    data: &quorum_store::DataDir,
    root: &Path,
    dispositions: Option<&Path>,
) -> Result<Option<quorum_core::report::since::Baseline>> {
    let target = root.display().to_string();
    let Ok(flows) = data.list_flows() else {
        return Ok(None);
    };
    let Some(last) = flows
        .into_iter()
        .find(|s| s.target_path == target && s.status == quorum_store::DerivedStatus::Completed)
    else {
        return Ok(None);
    };
    let Some(json) = data
        .open_flow(&last.flow_id)
        .ok()
        .and_then(|store| store.report().ok().flatten())
    else {
        return Ok(None);
    };
    let dispositions = match dispositions {
        Some(d) => Some((
            d.display().to_string(),
            read_small_text(d, "dispositions file")?,
        )),
        None => None,
    };
    let label = format!("review {}", last.flow_id);
    Ok(quorum_core::report::since::Baseline::from_texts(
        &label,
        &json,
        dispositions.as_ref().map(|(p, t)| (p.as_str(), t.as_str())),
    )
    .ok())
}
