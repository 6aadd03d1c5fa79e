//! `quorum review PATH`: here (prepared and driven by `local`), continuing an interrupted
//! review with `--resume`, or with `--cluster` snapshotted here and run through a node's API.

use super::resume::resume;
use crate::args::ReviewArgs;
use crate::client::{api_token, connect_any, follow, other_api_urls, review_inputs, source_files};
use crate::exit::{incomplete, ExitCode};
use crate::local::drive::drive;
use crate::local::prepare::{prepare_review, Prepared};
use crate::outcome::{exit_for, print_outcome, write_reports_or_say};
use crate::settings;
use crate::setup::load_settings;
use anyhow::{bail, Context, Result};
use quorum_api::pb;
use quorum_core::report::Report;

pub async fn review(args: ReviewArgs) -> Result<ExitCode> {
    if !args.cluster.is_empty() {
        if args.apply_safe_fixes.is_some() {
            bail!("--apply-safe-fixes needs the target on this machine: drop --cluster, or apply the fixes listed in the report by hand");
        }

        let urls = args.cluster.clone();
        return review_remote(args, &urls).await;
    }
    match prepare_review(&args).await? {
        Prepared::Resume(r) => resume(r).await,
        Prepared::Run(l) => {
            drive(
                &l.data,
                l.ctx,
                None,
                &l.params,
                args.out.as_deref(),
                args.quiet,
            )
            .await
        }
    }
}

/// `quorum review PATH --cluster URL[,URL...]`: snapshot locally (the same exclusions as a
/// local review), upload, follow (across reconnects), and write the same reports with the same
/// exit codes.
pub async fn review_remote(args: ReviewArgs, urls: &[String]) -> Result<ExitCode> {
    let settings = load_settings(args.backend.common.config.as_deref())?;
    crate::client::set_api_keepalive(settings.api.keepalive());
    let fail_on_text = args
        .fail_on
        .clone()
        .unwrap_or_else(|| settings.fail_on.clone());
    let fail_on = settings::parse_fail_on(&fail_on_text)?;
    let formats = args
        .format
        .clone()
        .unwrap_or_else(|| settings.formats.clone());
    settings::check_formats(&formats, "--format")?;
    let verification = quorum_core::flows::flow::Overrides::parse(
        args.verifiers,
        args.verify_threshold.as_deref(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Checked here so a bad value is refused before the upload; the node checks the flow.
    let coverage = settings.coverage_mode(args.coverage.as_deref())?;
    let target = &args.path;
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory to review",
            target.display()
        );
    }
    let root = target
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", target.display()))?;
    // The same snapshot and scope as a local review: the directory, or with --diff the head
    // tree and the change; the repository's excludes, guidance and profile. The scope travels
    // with the pack; the node checks it.
    let (pack, scope) = crate::target::snapshot(
        &root,
        &settings,
        args.diff.as_deref(),
        args.profile.as_deref(),
    )?;
    let client_scope = quorum_core::scope::ClientScope::of(&scope);
    let scope_json = (!client_scope.is_default())
        .then(|| serde_json::to_string(&client_scope))
        .transpose()
        .context("cannot encode the review's scope")?;
    let flow_yaml = match &args.flow {
        Some(f) if std::path::Path::new(f).is_file() => {
            Some(std::fs::read_to_string(f).with_context(|| format!("cannot read flow {f}"))?)
        }
        _ => None,
    };
    let since = match &args.since {
        Some(p) if args.prior.is_some() => bail!(
            "--since compares with an earlier review, and --prior already names one: drop --since ({})",
            p.display()
        ),
        Some(p) => Some(crate::target::read_since(p, args.dispositions.as_deref())?),
        None => None,
    };
    let (spec, prior) = review_inputs(
        args.spec.as_deref(),
        args.prior.as_deref(),
        args.dispositions.as_deref().filter(|_| since.is_none()),
        &root,
        &pack,
    )?;
    let req = pb::SubmitReviewRequest {
        target_name: root.display().to_string(),
        head_sha: pack.head_sha.clone(),
        files: source_files(&pack),
        spec,
        prior,
        scope_json,
        flow: args
            .flow
            .clone()
            .filter(|_| flow_yaml.is_none())
            .unwrap_or_default(),
        flow_yaml,
        options: Some(pb::ReviewOptions {
            model: args.backend.model.clone().unwrap_or_default(),
            fail_on: fail_on_text,
            max_concurrent: args.max_concurrent.unwrap_or(0) as u32,
            sensitive: args.sensitive || settings.sensitive,
            verifier_model: args.verifier_model.clone().unwrap_or_default(),
            no_analyzers: args.no_analyzers,
            no_memory: args.no_memory,
            verifiers: verification.verifiers.unwrap_or(0) as u32,
            verify_threshold: verification
                .verify_threshold
                .map(|t| t.as_str().to_string())
                .unwrap_or_default(),
            coverage: coverage.map(|m| m.as_str().to_string()).unwrap_or_default(),
            cache: if args.no_cache {
                "off"
            } else if args.incremental {
                "reuse"
            } else {
                ""
            }
            .to_string(),
        }),
    };
    let token = api_token(args.token_file.as_deref())?;
    let (client, url) = connect_any(urls, &token).await?;
    let flow_id = client
        .submit(req)
        .await
        .map_err(|e| anyhow::anyhow!("the cluster refused the review: {e}"))?;
    if !args.quiet {
        eprintln!(
            "quorum: review {flow_id} submitted to {url} ({} files)",
            pack.len()
        );
    }
    // Where else the review can be followed if this node goes silent: every node serves it
    // from the replicated facts.
    let learned = other_api_urls(&client, urls).await;
    let client = follow(
        urls,
        learned,
        &token,
        client,
        &flow_id,
        args.quiet,
        false,
        args.events.as_deref(),
    )
    .await?;
    let r = client
        .report(&flow_id)
        .await
        .map_err(|e| incomplete(format!("cannot fetch the report of {flow_id}: {e}")))?;
    let mut report: Report =
        serde_json::from_str(&r.report_json).context("the cluster sent an unreadable report")?;
    // The comparison is the client's: it has the snapshot the cluster reviewed.
    if let Some(baseline) = &since {
        report.compare_since(baseline, &pack);
    }
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("quorum-out").join(&flow_id));
    write_reports_or_say(&report, &out_dir, &formats)?;
    print_outcome(&report, &out_dir, &formats);
    if args.explain_cache {
        let mode = crate::local::params::CacheMode::chosen(args.no_cache, true, args.incremental);
        crate::local::drive::explain_cache(&report, mode);
    }
    // The same gate as a local review: a conformance review's readiness and a finish review's
    // standing findings decide it too.
    Ok(exit_for(&report, fail_on, args.fail_on_unverified))
}
