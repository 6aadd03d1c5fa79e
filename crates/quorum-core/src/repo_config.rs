//! `.quorum.toml`: review configuration a repository carries at its root — excluded globs,
//! the owner's instructions for reviewers, per-path instructions and a review profile.
//!
//! This is the reviewed repository's file, not the operator's `quorum.toml` (which configures
//! quorum itself). It is parsed from text here (the caller reads it from disk or from a git
//! tree) and every error names the file and line. Nothing in it can widen a specialist's tools
//! or change the output format: it becomes a [`Guidance`] that prompts show as delimited data.
//! The file's name is [`crate::pack::REPO_CONFIG_FILE`], beside the rules that leave it out
//! of every pack.

use crate::error::RepoConfigError;
use crate::pack::{glob_matcher, REPO_CONFIG_FILE};
use crate::scope::{Guidance, PathGuidance, Profile};
use serde::Deserialize;

/// What `.quorum.toml` says, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RepoConfig {
    /// gitignore-syntax globs relative to the target root: those files never enter the pack.
    pub exclude: Vec<String>,
    pub guidance: Guidance,
    pub profile: Option<Profile>,
    /// `incremental = true`: reviews of this repository reuse the results of earlier ones
    /// whose inputs have not changed (as `quorum review --incremental`).
    pub incremental: bool,
    /// `[fix] test = "..."`: the project's test command, which `quorum fix` runs (sandboxed)
    /// to judge each fix.
    pub fix_test: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    exclude: Vec<toml::Spanned<String>>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    profile: Option<toml::Spanned<String>>,
    #[serde(default)]
    review: Option<RawReview>,
    #[serde(default)]
    incremental: bool,
    #[serde(default)]
    fix: Option<RawFix>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFix {
    #[serde(default)]
    test: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReview {
    #[serde(default)]
    paths: Vec<RawPath>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    glob: toml::Spanned<String>,
    instructions: String,
}

impl RepoConfig {
    /// Parse `.quorum.toml` from its bytes. `file` names it in errors.
    pub fn parse(bytes: &[u8], file: &str) -> Result<RepoConfig, RepoConfigError> {
        let err = |line: Option<usize>, message: String| match line {
            Some(line) => RepoConfigError::At {
                file: file.to_string(),
                line,
                message,
            },
            None => RepoConfigError::File {
                file: file.to_string(),
                message,
            },
        };
        let text = std::str::from_utf8(bytes)
            .map_err(|_| err(None, "is not valid UTF-8 text".to_string()))?;
        let line_of = |offset: usize| -> usize {
            text.as_bytes()[..offset.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        };
        let raw: Raw = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(s.start));
            err(line, e.message().trim().replace('\n', " "))
        })?;
        let mut exclude = Vec::new();
        for g in &raw.exclude {
            let glob = g.get_ref().trim();
            if glob.is_empty() || glob_matcher(glob).is_none() {
                return Err(err(
                    Some(line_of(g.span().start)),
                    format!("exclude: invalid glob {:?}", g.get_ref()),
                ));
            }
            exclude.push(glob.to_string());
        }
        let profile = match &raw.profile {
            None => None,
            Some(p) => Some(Profile::parse(p.get_ref()).ok_or_else(|| {
                err(
                    Some(line_of(p.span().start)),
                    format!(
                        "profile: unknown profile {:?} (use {})",
                        p.get_ref(),
                        Profile::NAMES
                    ),
                )
            })?),
        };
        let mut paths = Vec::new();
        for p in raw.review.map(|r| r.paths).unwrap_or_default() {
            let glob = p.glob.get_ref().trim();
            let line = Some(line_of(p.glob.span().start));
            if glob.is_empty() || glob_matcher(glob).is_none() {
                return Err(err(
                    line,
                    format!("review.paths: invalid glob {:?}", p.glob.get_ref()),
                ));
            }
            if p.instructions.trim().is_empty() {
                return Err(err(
                    line,
                    format!("review.paths: glob {glob:?} has empty instructions"),
                ));
            }
            paths.push(PathGuidance {
                glob: glob.to_string(),
                instructions: p.instructions.trim().to_string(),
            });
        }
        Ok(RepoConfig {
            exclude,
            guidance: Guidance {
                source: REPO_CONFIG_FILE.to_string(),
                instructions: raw.instructions.unwrap_or_default().trim().to_string(),
                paths,
            },
            profile,
            incremental: raw.incremental,
            fix_test: raw
                .fix
                .and_then(|f| f.test)
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
exclude = ["vendor/**", "*.generated.py"]
instructions = """
We care about tenant isolation above all.
"""
profile = "chill"
incremental = true

[[review.paths]]
glob = "src/api/**"
instructions = "Every handler must check the tenant id."

[[review.paths]]
glob = "*.sql"
instructions = "Migrations must be reversible."

[fix]
test = "python3 -m pytest -q"
"#;

    #[test]
    fn parses_every_key() {
        let c = RepoConfig::parse(GOOD.as_bytes(), ".quorum.toml").unwrap();
        assert_eq!(c.exclude, vec!["vendor/**", "*.generated.py"]);
        assert!(c.incremental);
        assert_eq!(c.fix_test.as_deref(), Some("python3 -m pytest -q"));
        assert_eq!(
            c.guidance.instructions,
            "We care about tenant isolation above all."
        );
        assert_eq!(c.profile, Some(Profile::Chill));
        assert_eq!(c.guidance.paths.len(), 2);
        assert_eq!(c.guidance.paths[1].glob, "*.sql");
        assert_eq!(c.guidance.source, ".quorum.toml");
        assert_eq!(
            RepoConfig::parse(b"", "x").unwrap(),
            RepoConfig {
                guidance: Guidance {
                    source: REPO_CONFIG_FILE.into(),
                    ..Guidance::default()
                },
                ..RepoConfig::default()
            }
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = RepoConfig::parse(
            b"exclude = [\"a\"]\n\ninstructions = 3\n",
            "repo/.quorum.toml",
        )
        .unwrap_err();
        assert_eq!(e.line(), Some(3), "{e}");
        assert!(e.to_string().starts_with("repo/.quorum.toml:3: "), "{e}");

        let e = RepoConfig::parse(b"\nunknown_key = 1\n", "f").unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");
        assert!(e.to_string().contains("unknown_key"), "{e}");

        let e = RepoConfig::parse(b"x = [\n", "f").unwrap_err();
        assert!(e.line().is_some(), "{e}");

        let e = RepoConfig::parse(b"profile = \"lax\"\n", "f").unwrap_err();
        assert_eq!(e.line(), Some(1));
        assert!(e.to_string().contains("chill"), "{e}");

        let e = RepoConfig::parse(
            b"[[review.paths]]\nglob = \"a/**\"\ninstructions = \" \"\n",
            "f",
        )
        .unwrap_err();
        assert_eq!(e.line(), Some(2), "{e}");

        let e = RepoConfig::parse(b"[[review.paths]]\nglob = \"src/**\"\n", "f").unwrap_err();
        assert!(e.to_string().contains("instructions"), "{e}");

        let e = RepoConfig::parse(&[0xff, 0xfe], "f").unwrap_err();
        assert_eq!(e.line(), None);
    }
}
