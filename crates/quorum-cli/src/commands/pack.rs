//! `quorum pack PATH`: what a review would read and leave out, without calling any model.

use crate::args::PackArgs;
use crate::exit::ExitCode;
use crate::setup::load_settings;
use anyhow::{bail, Context, Result};
use quorum_core::pack::ContextPack;

/// Entries per list in `quorum pack` text output before "... and N more".
const PACK_TEXT_LIMIT: usize = 40;

/// `quorum pack PATH`: the snapshot a review would take, with the same config layering and
/// `pack.*` settings, and a reason for everything it leaves out. No backend is touched.
pub fn pack(args: &PackArgs) -> Result<ExitCode> {
    let settings = load_settings(args.common.config.as_deref())?;
    let target = &args.path;
    if !target.exists() {
        bail!(
            "{} does not exist: pass the directory a review would read",
            target.display()
        );
    }
    if !target.is_dir() {
        bail!(
            "{} is not a directory: pass the directory a review would read",
            target.display()
        );
    }
    let listing = ContextPack::survey(target, &settings.pack)
        .map_err(|e| anyhow::anyhow!("cannot snapshot the target: {e}"))?
        .listing();
    let body = if args.format == "json" {
        let mut json =
            serde_json::to_string_pretty(&listing).context("cannot encode the listing")?;
        json.push('\n');
        json
    } else {
        listing.to_text((!args.all).then_some(PACK_TEXT_LIMIT))
    };
    let mut stdout = std::io::stdout().lock();
    match std::io::Write::write_all(&mut stdout, body.as_bytes())
        .and_then(|()| std::io::Write::flush(&mut stdout))
    {
        // `quorum pack . | head` is not an error.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(ExitCode::Clean),
    }
}
