//! Shared test support: scripted reviews of the fixtures under tests/fixtures.
//!
//! Included by the runtime and CLI integration tests with `#[path]`. Rules match on what each
//! prompt must contain (the stage's instructions, the persona's identity, the turn), so a prompt
//! that loses its identifying section stops matching and the test fails on the server's
//! "no rule matched" 500 instead of passing by accident.

#![allow(dead_code)]

use quorum_testkit::{RecordedRequest, Reply, Rule, Script};
use serde_json::json;
use serde_json::Value;
use std::path::PathBuf;

pub const MODEL: &str = "scripted-model";

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

pub fn scout_rule() -> Rule {
    Rule::new("scout")
        .when_system(["You are the scout"])
        .reply(Reply::json(&json!({
            "domain": "software",
            "languages": ["python"],
            "frameworks": ["flask"],
            "content_types": ["http api", "database access"],
            "review_focus": ["sql injection", "authentication", "file handling"]
        })))
}

pub fn verifier_confirms() -> Rule {
    Rule::new("verifier")
        .when_system(["You are an independent verifier"])
        .reply(Reply::json(
            &json!({"verdict": "CONFIRMED", "reason": "the cited lines show it"}),
        ))
}

pub fn synthesizer_rule() -> Rule {
    Rule::new("synthesizer").when_system(["You are the synthesizer"]).reply(Reply::json(&json!({
        "summary": "The inventory service has an exploitable SQL injection and a committed signing key.",
        "action_items": ["F001: parameterise the search query", "F002: load the key from the environment"]
    })))
}

/// The plan for code_project: three valid tasks, one with an unknown persona, one with a file
/// outside the pack (dropped), one with an empty mandate.
pub fn code_plan() -> serde_json::Value {
    json!({"tasks": [
        {"id": "t1", "persona": "security_sentinel", "files": ["src/db.py", "src/auth.py"],
         "mandate": "Find injection and secret-handling flaws in the data and auth layers.",
         "tools": ["file_read", "file_grep"], "verification": "check the SQL construction"},
        {"id": "t2", "persona": "software_developer", "files": ["src/utils.py", "../../etc/passwd"],
         "mandate": "Check resource handling and shared state in the utilities.",
         "verification": "read the helper functions"},
        {"id": "t3", "persona": "test_engineer", "files": ["tests/test_app.py"],
         "mandate": "Find gaps in the tests of the delete and search endpoints."},
        {"id": "t4", "persona": "chaos_monkey", "files": ["src/app.py"], "mandate": "Break things."},
        {"id": "t5", "persona": "tech_writer", "files": ["README.md"], "mandate": ""}
    ]})
}

/// Findings the security specialist reports after one file_read: two real (grounded) and one
/// whose evidence is not in the file (dropped by grounding without a model call).
pub fn security_findings() -> String {
    let v = json!({"findings": [
        {"title": "SQL injection in item search", "severity": "P0", "confidence": 0.95,
         "category": "security/injection", "file": "src/db.py", "line_start": 53, "line_end": 54,
         "symbol": "search_items", "evidence": "name LIKE '%{term}%'",
         "why_it_matters": "q=' OR 1=1 -- dumps every row", "suggested_fix": "use bound parameters"},
        {"title": "Hard-coded signing key", "severity": "P1", "confidence": 0.9,
         "category": "security/secrets", "file": "src/auth.py", "line_start": 15, "line_end": 15,
         "symbol": "SECRET_KEY", "evidence": "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"",
         "why_it_matters": "anyone with the repo can forge tokens", "suggested_fix": "read it from the environment"},
        {"title": "Command injection via os.system", "severity": "P0", "confidence": 0.9,
         "category": "security/injection", "file": "src/db.py", "line_start": 10, "line_end": 12,
         "evidence": "os.system(user_input)",
         "why_it_matters": "remote code execution", "suggested_fix": "remove it"}
    ]});
    // Fenced and wrapped in prose, as real models answer.
    format!(
        "Here is what I found:\n```json\n{}\n```\nLet me know if you need more.",
        v
    )
}

/// The software developer reports the counter race (low confidence) and the unclosed file.
pub fn developer_findings() -> serde_json::Value {
    json!({"findings": [
        {"title": "Unsynchronised global request counter", "severity": "P3", "confidence": 0.4,
         "category": "correctness/race", "file": "src/utils.py", "line_start": 20, "line_end": 20,
         "symbol": "record_request", "evidence": "_request_count += 1",
         "why_it_matters": "lost updates under threads", "suggested_fix": "use a lock"},
        {"title": "Settings file handle never closed", "severity": "P3", "confidence": 0.45,
         "category": "reliability/resource-leak", "file": "src/utils.py", "line_start": 12, "line_end": 14,
         "symbol": "load_settings", "evidence": "fh = open(path, encoding=\"utf-8\")",
         "why_it_matters": "leaks descriptors", "suggested_fix": "use a with block"}
    ]})
}

/// The test engineer independently reports the same race (same symbol): corroboration
/// promotes it over the gate; the lone resource leak stays a residual concern.
pub fn test_engineer_findings() -> serde_json::Value {
    json!({"findings": [
        {"title": "Request counter is not thread-safe", "severity": "P2", "confidence": 0.3,
         "category": "correctness/race", "file": "src/utils.py", "line_start": 20, "line_end": 20,
         "symbol": "record_request", "evidence": "_request_count += 1",
         "why_it_matters": "the metrics test is flaky", "suggested_fix": "guard with threading.Lock"}
    ]})
}

/// The whole scripted review of tests/fixtures/code_project.
pub fn code_review_script() -> Script {
    Script::new()
        .models([MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&code_plan())),
        )
        .rule(
            Rule::new("security-explore")
                .when_system(["You are security_sentinel"])
                .turn(0)
                .reply(Reply::tool(
                    "file_read",
                    json!({"path": "src/db.py", "start": 40, "end": 60}),
                )),
        )
        .rule(
            Rule::new("security-answer")
                .when_system(["You are security_sentinel"])
                .when_last_user(["search_items"])
                .reply(Reply::text(security_findings())),
        )
        .rule(
            Rule::new("developer")
                .when_system(["You are software_developer"])
                .reply(Reply::json(&developer_findings())),
        )
        .rule(
            Rule::new("test-engineer")
                .when_system(["You are test_engineer"])
                .reply(Reply::json(&test_engineer_findings())),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

pub const SIX_TASKS: usize = 6;

/// Six specialist tasks, each reporting one real finding in a different place; specialists take
/// `delay_ms` so a kill lands between tasks. `flaky` puts 500s in front of them.
pub fn six_task_script(delay_ms: u64, flaky: bool) -> Script {
    six_task_script_answering(flaky, |finding| Reply::delay(delay_ms, finding))
}

/// The six-task script whose specialist answers wait for [`ScriptedServer::release`]: a test
/// keeps a node's slots busy for exactly as long as it needs, however slow the machine.
///
/// [`ScriptedServer::release`]: quorum_testkit::ScriptedServer::release
pub fn held_six_task_script() -> Script {
    six_task_script_answering(false, Reply::held)
}

fn six_task_script_answering(flaky: bool, answer: impl Fn(Reply) -> Reply) -> Script {
    let lines = [
        ("src/db.py", 53, "name LIKE '%{term}%'"),
        (
            "src/auth.py",
            15,
            "SECRET_KEY = \"inv-prod-7f3a9c2e51b84d06\"",
        ),
        ("src/db.py", 43, "offset = page * per_page"),
        ("src/utils.py", 12, "fh = open(path, encoding=\"utf-8\")"),
        ("src/utils.py", 20, "_request_count += 1"),
        (
            "src/auth.py",
            28,
            "user[\"password_hash\"] == hash_password(password)",
        ),
    ];
    // One file each: tasks of one persona over overlapping files would be merged into one
    // by the plan's fit (flows::fit), and these six must stay six.
    let files = [
        "src/db.py",
        "src/auth.py",
        "src/utils.py",
        "src/app.py",
        "tests/test_app.py",
        "README.md",
    ];
    let tasks: Vec<Value> = (1..=SIX_TASKS)
        .map(|i| {
            json!({"id": format!("t{i}"), "persona": "security_sentinel", "files": [files[i - 1]],
                        "mandate": format!("Check area number {i} for defects.")})
        })
        .collect();
    let mut s = Script::new().models([MODEL]).rule(scout_rule()).rule(
        Rule::new("planner")
            .when_system(["You are the planner"])
            .reply(Reply::json(&json!({"tasks": tasks}))),
    );
    if flaky {
        s = s.rule(
            Rule::new("flaky")
                .when_system(["You are security_sentinel"])
                .reply(Reply::status(500))
                .times(3),
        );
    }
    for (i, (file, line, evidence)) in lines.iter().enumerate() {
        let n = i + 1;
        let finding = json!({"findings": [{"title": format!("Defect in area {n}"), "severity": "P2", "confidence": 0.9,
            "category": format!("correctness/area-{n}"), "file": file, "line_start": line, "line_end": line,
            "evidence": evidence, "why_it_matters": "it breaks", "suggested_fix": "fix it"}]});
        s = s.rule(
            Rule::new(format!("t{n}"))
                .when_system(["You are security_sentinel"])
                .when_last_user([format!("## Task t{n}\n")])
                .reply(answer(Reply::json(&finding))),
        );
    }
    s.rule(verifier_confirms()).rule(synthesizer_rule())
}

/// The specialist task id ("t3") a recorded request belongs to, if it is a specialist call.
pub fn task_of(r: &RecordedRequest) -> Option<String> {
    if !r.system.contains("You are security_sentinel") {
        return None;
    }
    let i = r.text.find("## Task t")?;
    r.text[i + 8..].split_whitespace().next().map(String::from)
}

/// Copy a directory tree (fixtures into a scratch target the test may change).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

// ---- flows beyond the default review ----

/// A specialist answer with no findings, for personas a test does not script individually.
pub fn no_findings_rule() -> Rule {
    Rule::new("no-findings")
        .when_system(["## Output format (required)"])
        .reply(Reply::json(&json!({"findings": []})))
}

pub const PLAN_DOC: &str = "offline_sync_plan.md";

fn doc_finding(
    title: &str,
    severity: &str,
    confidence: f64,
    section: &str,
    lines: (u32, u32),
    evidence: &str,
    route: (&str, &str, &str),
) -> Value {
    json!({"title": title, "severity": severity, "confidence": confidence,
           "category": "document", "file": PLAN_DOC, "line_start": lines.0, "line_end": lines.1,
           "symbol": section, "evidence": evidence, "why_it_matters": format!("{title} matters"),
           "suggested_fix": format!("address: {title}"),
           "autofix_class": route.0, "owner": route.1, "stance": route.2})
}

/// The only safe_auto fix the document review reports: a terminology correction whose old text
/// occurs exactly once in the plan.
pub const SAFE_OLD: &str = "preserved as a draft job ticket";
pub const SAFE_NEW: &str = "preserved as a draft work order";

/// The scripted document review of tests/fixtures/plan_doc. The planner proposes only a
/// scope_guardian task (its signals are absent from the plan, so it is refused) and a
/// product_lens task; it omits the always-on coherence and feasibility reviewers. Feasibility
/// and product_lens take opposite stances on 6.5; feasibility and security_lens report the same
/// problem in 6.1 with different evidence; design_lens' low-confidence concern on 6.3 is
/// corroborated by coherence's finding there.
pub fn doc_review_script() -> Script {
    let mut safe = doc_finding(
        "Terminology drift: draft job ticket and work order name one thing",
        "P3",
        0.9,
        "6.4 Conflict resolution",
        (73, 73),
        "edits, and the technician's edits are preserved as a draft job ticket that the technician can",
        ("safe_auto", "review-fixer", "change"),
    );
    safe["autofix"] = json!({"old": SAFE_OLD, "new": SAFE_NEW});
    let coherence = json!({"findings": [safe, doc_finding(
        "New sync-gateway service contradicts the non-goals", "P1", 0.85, "6.3 Sync", (65, 65),
        "go through a new sync-gateway service that batches operations from many devices, deduplicates them",
        ("manual", "human", "change"))]});
    let feasibility = json!({"findings": [
        doc_finding("p99 under 50 ms on 3G cannot be met", "P1", 0.8, "6.5 Performance targets", (78, 78),
            "- p99 sync round trip under 50 ms on a 3G connection.", ("gated_auto", "human", "remove")),
        doc_finding("Session token stored unencrypted on the device", "P1", 0.7, "6.1 Local storage", (54, 54),
            "start offline. Encryption of the local database is deferred to a later release.",
            ("gated_auto", "downstream-resolver", "change"))]});
    let product = json!({"findings": [
        doc_finding("The 50 ms target is the promise customers renew on", "P2", 0.7, "6.5 Performance targets",
            (78, 78), "- p99 sync round trip under 50 ms on a 3G connection.", ("manual", "human", "keep"))]});
    let security = json!({"findings": [
        doc_finding("Session token stored unencrypted on the device", "P0", 0.9, "6.1  local storage", (52, 52),
            "as files in the app sandbox and referenced from the database. The session token and the customer",
            ("gated_auto", "downstream-resolver", "change"))]});
    let design = json!({"findings": [
        doc_finding("Sync progress is invisible to the technician", "P3", 0.4, "6.3 Sync", (64, 64),
            "When connectivity returns, a background task uploads pending operations in sequence order. Uploads",
            ("advisory", "human", "add"))]});
    let plan = json!({"tasks": [
        {"id": "t1", "persona": "scope_guardian", "files": [PLAN_DOC], "mandate": "Check the scope boundaries."},
        {"id": "t2", "persona": "product_lens", "files": [PLAN_DOC], "mandate": "Challenge the premise and the targets."}
    ]});
    Script::new()
        .models([MODEL])
        .rule(
            Rule::new("scout")
                .when_system(["You are the scout"])
                .reply(Reply::json(&json!({
            "domain": "documentation", "languages": ["english"], "frameworks": [],
            "content_types": ["product plan"], "review_focus": ["sync design", "targets"]}))),
        )
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&plan)),
        )
        .rule(
            Rule::new("coherence")
                .when_system(["You are coherence"])
                .reply(Reply::json(&coherence)),
        )
        .rule(
            Rule::new("feasibility")
                .when_system(["You are feasibility"])
                .reply(Reply::json(&feasibility)),
        )
        .rule(
            Rule::new("product")
                .when_system(["You are product_lens"])
                .reply(Reply::json(&product)),
        )
        .rule(
            Rule::new("security")
                .when_system(["You are security_lens"])
                .reply(Reply::json(&security)),
        )
        .rule(
            Rule::new("design")
                .when_system(["You are design_lens"])
                .reply(Reply::json(&design)),
        )
        .rule(verifier_confirms())
        .rule(synthesizer_rule())
}

// ---- deterministic analyzers ----

/// The planted hit: a real line of src/db.py no scripted specialist reports.
pub const PLANTED_LINE: u32 = 9;
pub const PLANTED_TEXT: &str = "_local = threading.local()";
pub const PLANTED_MESSAGE: &str = "module-level connection cache shared by every request thread";

/// Write an executable shell script `name` into `dir`. It may use shell builtins only: the
/// PATH it runs with holds nothing but `dir`.
pub fn script(dir: &std::path::Path, name: &str, body: &str) {
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A ruff stand-in printing ruff's JSON (absolute file names, as ruff writes them): the
/// planted hit, one on a line src/db.py does not have, and one inside the SQL injection the
/// scripted specialists report (line 53), which merges into their finding. The codes carry
/// bugbear's `B` prefix, correctness in the shipped catalog's harm map, so they are review
/// leads: a style code would be counted in the report's lint line, never reviewed.
pub fn fake_ruff(dir: &std::path::Path) {
    let hit = |code: &str, row: u32, msg: &str| {
        format!(
            "{{\"code\": \"{code}\", \"filename\": \"$PWD/src/db.py\", \"location\": {{\"row\": {row}, \"column\": 1}}, \
             \"end_location\": {{\"row\": {row}, \"column\": 10}}, \"message\": \"{msg}\", \"fix\": null, \"url\": null}}"
        )
    };
    let json = format!(
        "[{}, {}, {}]",
        hit("B991", PLANTED_LINE, PLANTED_MESSAGE),
        hit("B992", 999, "a hit past the end of the file"),
        hit("B993", 53, "query built from a formatted string")
    );
    script(
        dir,
        "ruff",
        &format!("printf '%s\\n' \"{}\"", json.replace('"', "\\\"")),
    );
}
