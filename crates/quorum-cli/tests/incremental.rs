//! Incremental reviews with the `quorum` binary: a review records every specialist result under
//! its content key; a later `--incremental` review of the tree with one file changed asks the
//! model only for the tasks that were given or read that file, carries the other findings
//! (`carried_from`) and grounds them again against today's files (a moved line is re-anchored,
//! a deleted one is gone), reuses verifier votes on unchanged claims, says per task why it ran
//! (`--explain-cache`), and a changed model or persona, or `--no-cache`, runs everything again.

mod common;

use common::*;
use quorum_testkit::{RecordedRequest, Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;

const TASKS: usize = 6;
const OTHER_MODEL: &str = "other-model";

/// `src/mN.py`: twenty lines, the defect on line 10 (`eval(user_input_N)`).
fn module(n: usize, shift: usize) -> String {
    let mut lines: Vec<String> = (0..shift).map(|k| format!("# added line {k}")).collect();
    for k in 1..=20 {
        lines.push(if k == 10 {
            format!("    eval(user_input_{n})")
        } else {
            format!("def m{n}_helper_{k}(): return {k}")
        });
    }
    lines.join("\n") + "\n"
}

/// `src/shared.py`, given to no task: t4 and t5 report on it without reading it, so their
/// results are reused while it changes, and only grounding sees the change.
fn shared(shift: usize, keep_doomed: bool) -> String {
    let mut lines: Vec<String> = (0..shift).map(|k| format!("# header {k}")).collect();
    for k in 1..=14 {
        lines.push(match k {
            5 => "moved_danger(request.args)".to_string(),
            12 if keep_doomed => "doomed_danger(request.args)".to_string(),
            _ => format!("value_{k} = {k}"),
        });
    }
    lines.join("\n") + "\n"
}

fn tree(root: &Path) {
    for n in 1..=TASKS {
        write(root, &format!("src/m{n}.py"), &module(n, 0));
    }
    write(root, "src/shared.py", &shared(0, true));
}

fn task_finding(n: usize) -> Value {
    let (file, line, evidence) = match n {
        4 => (
            "src/shared.py".to_string(),
            12,
            "doomed_danger(request.args)".to_string(),
        ),
        5 => (
            "src/shared.py".to_string(),
            5,
            "moved_danger(request.args)".to_string(),
        ),
        // t6 was given m6.py and reads m1.py through a tool.
        6 => (
            "src/m6.py".to_string(),
            10,
            "eval(user_input_6)".to_string(),
        ),
        n => (format!("src/m{n}.py"), 10, format!("eval(user_input_{n})")),
    };
    json!({"findings": [finding(&format!("Defect of task {n}"), "P2", 0.9, &file, line, &evidence)]})
}

/// Six tasks of one persona, one module each; t6 also reads m1.py with `file_read`.
fn script() -> Script {
    let tasks: Vec<Value> = (1..=TASKS)
        .map(|n| {
            let mut t = json!({"id": format!("t{n}"), "persona": "security_sentinel",
                "files": [format!("src/m{n}.py")],
                "mandate": format!("Check module {n} for code execution flaws.")});
            if n == 6 {
                t["tools"] = json!(["file_read"]);
            }
            t
        })
        .collect();
    let mut s = Script::new()
        .models([MODEL, OTHER_MODEL])
        .rule(scout_rule())
        .rule(
            Rule::new("planner")
                .when_system(["You are the planner"])
                .reply(Reply::json(&json!({ "tasks": tasks }))),
        )
        // t2 reports a new defect once m2.py holds one.
        .rule(
            Rule::new("t2-new")
                .when_system(["You are security_sentinel"])
                .when_all(["## Task t2\n", "new_danger(x)"])
                .reply(Reply::json(&json!({"findings": [finding(
                    "New defect of task 2", "P1", 0.9, "src/m2.py", 1, "new_danger(x)")]}))),
        )
        .rule(
            Rule::new("t6-read")
                .when_system(["You are security_sentinel"])
                .when_all(["## Task t6\n"])
                .turn(0)
                .reply(Reply::tool("file_read", json!({"path": "src/m1.py"}))),
        );
    for n in 1..=TASKS {
        s = s.rule(
            Rule::new(format!("t{n}"))
                .when_system(["You are security_sentinel"])
                .when_all([format!("## Task t{n}\n")])
                .reply(Reply::json(&task_finding(n))),
        );
    }
    s.rule(verifier_confirms()).rule(synthesizer_rule())
}

struct Run {
    report: Value,
    requests: Vec<RecordedRequest>,
    stderr: String,
}

async fn review(work: &Path, target: &Path, out: &str, extra: &[&str]) -> Run {
    review_with(work, target, out, MODEL, extra).await
}

async fn review_with(work: &Path, target: &Path, out: &str, model: &str, extra: &[&str]) -> Run {
    let server = ScriptedServer::start(script()).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.join(out);
    let mut args = vec![
        "review",
        target.to_str().unwrap(),
        "--backend",
        &backend,
        "--model",
        model,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--fail-on",
        "none",
        // The verifier is pinned so that a run with another finder model keeps the same one.
        "--verifier-model",
        MODEL,
    ];
    args.extend_from_slice(extra);
    let o = quorum(&args, work).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    Run {
        report: read_json(&out.join("report.json")),
        requests: server.requests(),
        stderr: stderr(&o),
    }
}

/// The specialist tasks that asked the model.
fn asked(run: &Run) -> BTreeSet<String> {
    run.requests.iter().filter_map(task_of).collect()
}

fn verifier_calls(run: &Run) -> usize {
    run.requests
        .iter()
        .filter(|r| r.system.contains("You are an independent verifier"))
        .count()
}

fn finding_of<'a>(report: &'a Value, title: &str) -> Option<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["title"] == title)
}

fn task<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id}: {}", report["tasks"]))
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_review_asks_the_model_only_for_what_changed_and_carries_the_rest() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    tree(&target);

    // A cold review records every result; nothing is reused yet, and it says why.
    let first = review(work.path(), &target, "out1", &["--incremental"]).await;
    let first_flow = first.report["flow_id"].as_str().unwrap().to_string();
    assert_eq!(asked(&first), set(&["t1", "t2", "t3", "t4", "t5", "t6"]));
    assert_eq!(first.report["findings"].as_array().unwrap().len(), TASKS);
    assert!(
        task(&first.report, "t2")["cache"]
            .as_str()
            .unwrap()
            .starts_with("ran: not run before"),
        "{}",
        task(&first.report, "t2")
    );
    assert!(first.report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f.get("carried_from").is_none()));

    // One line added at the top of m1.py (given to t1, read by t6); in shared.py (given to no
    // task) t5's line moves down two and t4's line is deleted.
    write(&target, "src/m1.py", &module(1, 1));
    write(&target, "src/shared.py", &shared(2, false));
    let second = review(
        work.path(),
        &target,
        "out2",
        &["--incremental", "--explain-cache"],
    )
    .await;
    assert_eq!(
        asked(&second),
        set(&["t1", "t6"]),
        "only the tasks that were given or read m1.py ask the model"
    );
    let t1 = task(&second.report, "t1");
    assert_eq!(
        t1["cache"],
        format!("ran: changed since {first_flow}: src/m1.py (edited)"),
        "{t1}"
    );
    let t6 = task(&second.report, "t6");
    assert_eq!(
        t6["cache"], "ran: a tool read returns something else now: file_read src/m1.py",
        "{t6}"
    );
    for id in ["t2", "t3", "t4", "t5"] {
        let t = task(&second.report, id);
        assert_eq!(t["reused_from"], first_flow.as_str(), "{t}");
        assert_eq!(t["tokens_in"], 0, "no model call: {t}");
    }
    // Carried findings are marked and keep their anchors; t5's moved line is re-anchored;
    // t4's deleted evidence is gone (grounding, no model call).
    for n in [2, 3] {
        let title = format!("Defect of task {n}");
        let now = finding_of(&second.report, &title).unwrap();
        let then = finding_of(&first.report, &title).unwrap();
        assert_eq!(now["carried_from"], first_flow.as_str(), "{now}");
        assert_eq!(now["anchor"], then["anchor"]);
        assert_eq!(now["line_start"], 10);
    }
    let moved = finding_of(&second.report, "Defect of task 5").expect("t5's finding survives");
    assert_eq!(moved["carried_from"], first_flow.as_str());
    assert_eq!(
        moved["line_start"], 7,
        "re-anchored to where the line is now: {moved}"
    );
    assert!(
        finding_of(&second.report, "Defect of task 4").is_none(),
        "evidence deleted: {}",
        second.report["findings"]
    );
    assert!(second.report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["title"] == "Defect of task 4" && d["removed_by"] == "grounding"));
    let rerun = finding_of(&second.report, "Defect of task 1").unwrap();
    assert!(rerun.get("carried_from").is_none(), "{rerun}");
    // Votes on unchanged claims are reused: only t1's finding (its line is now 11, the
    // scripted finder still says 10 and grounding corrects it) and t5's re-anchored one
    // changed what the verifier sees. The first review asked about all six.
    assert_eq!(verifier_calls(&first), TASKS);
    assert_eq!(verifier_calls(&second), 2);
    // --explain-cache says it, per task, on stderr; report.md carries the same account.
    assert!(
        second
            .stderr
            .contains("quorum: cache: 4 of 6 keyed tasks took a recorded result; 2 ran"),
        "{}",
        second.stderr
    );
    assert!(second
        .stderr
        .contains(&format!("t3 (security_sentinel): reused from {first_flow}")));
    let md = std::fs::read_to_string(work.path().join("out2/report.md")).unwrap();
    assert!(md.contains("#### Incremental review"), "{md}");
    // With --incremental and no --since, the last completed review of the target is the
    // baseline: what it reported and is still there is seen before.
    assert!(first.report.get("since").is_none());
    assert_eq!(second.report["since"]["flow_id"], first_flow.as_str());
    assert_eq!(
        finding_of(&second.report, "Defect of task 2").unwrap()["seen_before"],
        format!(
            "{first_flow} {}",
            finding_of(&first.report, "Defect of task 2").unwrap()["id"]
                .as_str()
                .unwrap()
        )
    );

    // Another model shaped every prompt's answer: everything runs again, and says why.
    let third = review_with(
        work.path(),
        &target,
        "out3",
        OTHER_MODEL,
        &["--incremental"],
    )
    .await;
    assert_eq!(asked(&third).len(), TASKS);
    let t2 = task(&third.report, "t2");
    assert!(
        t2["cache"]
            .as_str()
            .unwrap()
            .contains(&format!("the model changed ({MODEL} -> {OTHER_MODEL})")),
        "{t2}"
    );

    // The persona changed (one directive reworded in a copy of the catalog): every task it
    // shaped runs again, and says its prompt changed; same model as the review before, so the
    // prompt is the only thing that differs.
    let catalog = work.path().join("personas-edited");
    copy_dir(&repo_root().join("personas"), &catalog);
    let persona = catalog.join("security_sentinel.yaml");
    let yaml = std::fs::read_to_string(&persona).unwrap();
    let edited = yaml.replacen(
        "List the entry points in your assigned files before reading anything else",
        "Before reading anything else, list the entry points in your assigned files",
        1,
    );
    assert_ne!(
        yaml, edited,
        "the directive to reword is in the shipped persona"
    );
    std::fs::write(&persona, edited).unwrap();
    let reworded = review_with(
        work.path(),
        &target,
        "out3b",
        OTHER_MODEL,
        &["--incremental", "--personas", catalog.to_str().unwrap()],
    )
    .await;
    assert_eq!(asked(&reworded).len(), TASKS);
    let t2 = task(&reworded.report, "t2");
    let third_flow = third.report["flow_id"].as_str().unwrap();
    assert!(
        t2["cache"]
            .as_str()
            .unwrap()
            .starts_with(&format!("ran: its prompt changed since {third_flow}")),
        "{t2}"
    );

    // --no-cache: a full review, nothing reused.
    let fourth = review(work.path(), &target, "out4", &["--no-cache"]).await;
    assert_eq!(asked(&fourth).len(), TASKS);
    assert_eq!(verifier_calls(&fourth), TASKS - 1);
    assert!(fourth.report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t.get("reused_from").is_none()));

    // `flows gc` deletes the reviews and the results they recorded: nothing left to reuse.
    let o = quorum(&["flows", "gc", "--older-than", "0"], work.path()).await;
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let said = stdout(&o);
    let pruned: usize = said
        .lines()
        .find_map(|l| {
            l.strip_prefix("pruned ")?
                .strip_suffix(" recorded results of deleted reviews")
        })
        .unwrap_or_else(|| panic!("{said}"))
        .parse()
        .unwrap();
    assert!(pruned >= 2 * TASKS, "{said}");
    let fifth = review(work.path(), &target, "out5", &["--incremental"]).await;
    assert_eq!(asked(&fifth).len(), TASKS);

    // The repository asks for incremental reviews itself: no flag, nothing changed, no task
    // asks a model.
    write(&target, ".quorum.toml", "incremental = true\n");
    let sixth = review(work.path(), &target, "out6", &[]).await;
    assert!(asked(&sixth).is_empty(), "{:?}", asked(&sixth));
}

fn titles_of(report: &Value, list: &str) -> Vec<String> {
    report[list]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["title"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn since_marks_what_was_reported_before_and_keeps_it_out_of_what_ci_posts() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    tree(&target);
    let formats = ["--format", "json,md,sarif,rdjson,gitlab"];
    let first = review(work.path(), &target, "out1", &formats).await;
    let id_of = |title: &str| {
        finding_of(&first.report, title).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The author will not fix task 3's finding.
    let dispositions = work.path().join("dispositions.yaml");
    std::fs::write(
        &dispositions,
        format!(
            "{}:\n  disposition: wont_fix\n  comment: accepted risk\n",
            id_of("Defect of task 3")
        ),
    )
    .unwrap();
    // The next push: m1.py's lines move, m2.py gains a new defect, t4's evidence is deleted.
    write(&target, "src/m1.py", &module(1, 1));
    write(
        &target,
        "src/m2.py",
        &format!("new_danger(x)\n{}", module(2, 0)),
    );
    write(&target, "src/shared.py", &shared(0, false));
    let since = work.path().join("out1/report.json");
    let mut extra = vec![
        "--since",
        since.to_str().unwrap(),
        "--dispositions",
        dispositions.to_str().unwrap(),
    ];
    extra.extend_from_slice(&formats);
    let second = review(work.path(), &target, "out2", &extra).await;
    let r = &second.report;
    let first_flow = first.report["flow_id"].as_str().unwrap();
    assert_eq!(r["since"]["flow_id"], first_flow);
    assert_eq!(r["since"]["new"], 1, "{}", r["since"]);
    assert_eq!(r["since"]["still_present"], 3, "{}", r["since"]);
    assert_eq!(r["since"]["dismissed"], 1, "{}", r["since"]);
    let fixed: Vec<&str> = r["since"]["fixed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(fixed, [id_of("Defect of task 4")]);
    let not_reported: Vec<&str> = r["since"]["not_reported"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(not_reported, [id_of("Defect of task 2")]);
    // Seen before: t1's (moved a line), t5's and t6's; the new one is not.
    for title in ["Defect of task 1", "Defect of task 5", "Defect of task 6"] {
        let f = finding_of(r, title).unwrap();
        assert_eq!(
            f["seen_before"],
            format!("{first_flow} {}", id_of(title)),
            "{f}"
        );
    }
    assert!(finding_of(r, "New defect of task 2")
        .unwrap()
        .get("seen_before")
        .is_none());
    // The dismissed finding is not raised again: dropped, saying why.
    assert!(!titles_of(r, "findings").contains(&"Defect of task 3".to_string()));
    let dismissed = r["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["title"] == "Defect of task 3")
        .expect("dismissed finding listed as dropped");
    assert_eq!(dismissed["removed_by"], "dismissed");
    assert!(dismissed["reason"]
        .as_str()
        .unwrap()
        .contains("accepted risk"));
    // What CI posts: SARIF marks the baseline, rdjson and GitLab carry the new finding only.
    let out = work.path().join("out2");
    let sarif = read_json(&out.join("report.sarif"));
    let mut states: Vec<String> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["baselineState"].as_str().unwrap().to_string())
        .collect();
    states.sort();
    assert_eq!(states, ["new", "unchanged", "unchanged", "unchanged"]);
    let rdjson = read_json(&out.join("report.rdjson"));
    let posted = rdjson["diagnostics"].as_array().unwrap();
    assert_eq!(posted.len(), 1, "{rdjson}");
    assert!(posted[0]["message"]
        .as_str()
        .unwrap()
        .contains("New defect of task 2"));
    let gitlab = read_json(&out.join("gl-code-quality-report.json"));
    assert_eq!(gitlab.as_array().unwrap().len(), 1, "{gitlab}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains(&format!(
            "Since review {first_flow}: **1 new**, 3 still present"
        )),
        "{md}"
    );
    assert!(md.contains("Fixed since:"), "{md}");
}

/// A voter of a three-node control plane (n1, n2, n3) serving the incremental script.
async fn voter(name: &str, work: &Path, join: Option<&str>) -> (Node, ScriptedServer) {
    let server = ScriptedServer::start(script()).await.unwrap();
    let data = work.join(format!("data-{name}"));
    let backend = format!("ollama={}", server.ollama_url());
    let mut args = vec![
        "--name",
        name,
        "--listen",
        "127.0.0.1:0",
        "--api",
        "127.0.0.1:0",
        "--backend",
        &backend,
        "--model",
        MODEL,
        "--data-dir",
        data.to_str().unwrap(),
        "--voters",
        "n1,n2,n3",
        "--heartbeat-ms",
        "100",
        "--deadline-ms",
        "1000",
    ];
    if let Some(j) = join {
        args.extend(["--join", j]);
    }
    let node =
        spawn_node(node_command(&args, work).env("QUORUM_COOKIE", "incremental-cookie")).await;
    (node, server)
}

/// The specialist tasks that asked any of the nodes' models since `from` (per server).
fn asked_since(servers: &[ScriptedServer], from: &[usize]) -> BTreeSet<String> {
    servers
        .iter()
        .zip(from)
        .flat_map(|(s, &n)| s.requests().into_iter().skip(n).filter_map(|r| task_of(&r)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_recorded_in_a_review_conducted_on_one_node_is_reused_by_a_review_conducted_on_another(
) {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    tree(&target);
    let (n1, s1) = voter("n1", work.path(), None).await;
    let join = n1.cluster().to_string();
    let (n2, s2) = voter("n2", work.path(), Some(&join)).await;
    let (n3, s3) = voter("n3", work.path(), Some(&join)).await;
    // The control plane formed: one leader among the three voters (bounded poll).
    let api = quorum_api::ApiClient::connect(n1.api(), NODE_TOKEN)
        .await
        .unwrap();
    let mut formed = false;
    for _ in 0..600 {
        let st = api.cluster_status().await.unwrap();
        if st.iter().filter(|n| n.alive && n.voter).count() == 3
            && st.iter().filter(|n| n.leader).count() == 1
        {
            formed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(formed, "the control plane never formed");
    let servers = [s1, s2, s3];
    let counts = |servers: &[ScriptedServer; 3]| servers.each_ref().map(|s| s.requests().len());

    let through = |node: &Node, out: &str, extra: &[&str]| {
        let out = work.path().join(out);
        let mut args = vec![
            "review".to_string(),
            target.display().to_string(),
            "--cluster".into(),
            node.api().to_string(),
            "--out".into(),
            out.display().to_string(),
            "--quiet".into(),
            "--fail-on".into(),
            "none".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        (args, out)
    };

    // Conducted on n1: every task asks a model somewhere in the cluster.
    let before = counts(&servers);
    let (args, out) = through(&n1, "out1", &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = client(&args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let first = read_json(&out.join("report.json"));
    let first_flow = first["flow_id"].as_str().unwrap().to_string();
    assert_eq!(asked_since(&servers, &before).len(), TASKS);

    // One file changed; conducted on n2 with --incremental: only t1 and t6 ask a model, the
    // rest take what n1's review recorded and replicated.
    write(&target, "src/m1.py", &module(1, 1));
    let before = counts(&servers);
    let (args, out) = through(&n2, "out2", &["--incremental", "--explain-cache"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = client(&args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let second = read_json(&out.join("report.json"));
    assert_ne!(second["flow_id"], first["flow_id"]);
    assert_eq!(asked_since(&servers, &before), set(&["t1", "t6"]));
    for id in ["t2", "t3", "t4", "t5"] {
        assert_eq!(task(&second, id)["reused_from"], first_flow.as_str());
    }
    assert!(
        stderr(&o).contains("quorum: cache: 4 of 6 keyed tasks took a recorded result; 2 ran"),
        "{}",
        stderr(&o)
    );
    drop(n3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incremental_review_killed_mid_flight_resumes_without_asking_for_what_it_reused() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    tree(&target);
    let data = work.path().join("data");
    let data_arg = data.to_str().unwrap().to_string();
    let first = review(work.path(), &target, "out1", &["--data-dir", &data_arg]).await;
    let first_flow = first.report["flow_id"].as_str().unwrap().to_string();
    write(&target, "src/m1.py", &module(1, 1));

    // t1 and t6 (the tasks that must run) are held; the third slot takes t2..t5's recorded
    // results, in plan order, before t6 is started: once both held requests arrived, those
    // four are stored as done. Then kill -9.
    let mut held = script();
    for rule in &mut held.rules {
        if rule.name == "t1" || rule.name == "t6-read" {
            rule.replies = rule.replies.drain(..).map(Reply::held).collect();
        }
    }
    let server = ScriptedServer::start(held).await.unwrap();
    let mut feed = server.subscribe();
    let backend = format!("ollama={}", server.ollama_url());
    let mut child = command(
        &[
            "review",
            target.to_str().unwrap(),
            "--backend",
            &backend,
            "--model",
            MODEL,
            "--verifier-model",
            MODEL,
            "--incremental",
            "--max-concurrent",
            "3",
            "--data-dir",
            &data_arg,
            "--quiet",
        ],
        work.path(),
    )
    .spawn()
    .unwrap();
    let mut seen = BTreeSet::new();
    let waited = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(r) = feed.recv().await {
            if let Some(t) = task_of(&r) {
                seen.insert(t);
                if seen.contains("t1") && seen.contains("t6") {
                    break;
                }
            }
        }
    })
    .await;
    assert!(waited.is_ok(), "t1 and t6 were never asked: {seen:?}");
    assert_eq!(seen, set(&["t1", "t6"]), "the other tasks were reused");
    child.kill().await.unwrap(); // SIGKILL
    let _ = child.wait().await;
    server.release();
    let flow = quorum_store::DataDir::new(&data)
        .list_flows()
        .unwrap()
        .into_iter()
        .find(|f| f.flow_id != first_flow)
        .unwrap()
        .flow_id;

    // Resumed against a server that answers: only t1 and t6 ask, and the report still says
    // which tasks took the first review's results.
    let server = ScriptedServer::start(script()).await.unwrap();
    let backend = format!("ollama={}", server.ollama_url());
    let out = work.path().join("out2");
    let o = quorum(
        &[
            "resume",
            &flow,
            "--data-dir",
            &data_arg,
            "--backend",
            &backend,
            "--out",
            out.to_str().unwrap(),
        ],
        work.path(),
    )
    .await;
    assert!(matches!(code(&o), 0 | 1), "{}", text(&o));
    let resumed = Run {
        report: read_json(&out.join("report.json")),
        requests: server.requests(),
        stderr: stderr(&o),
    };
    assert_eq!(asked(&resumed), set(&["t1", "t6"]), "{}", resumed.stderr);
    for id in ["t2", "t3", "t4", "t5"] {
        assert_eq!(
            task(&resumed.report, id)["reused_from"],
            first_flow.as_str()
        );
    }
    assert_eq!(resumed.report["status"], "completed");
    assert_eq!(
        finding_of(&resumed.report, "Defect of task 3").unwrap()["carried_from"],
        first_flow.as_str()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_diff_reuse_is_per_file_of_the_change() {
    let work = tempfile::tempdir().unwrap();
    let target = work.path().join("project");
    tree(&target);
    git(&target, &["init", "-q", "-b", "main"]);
    git(&target, &["add", "-A"]);
    git(&target, &["commit", "-q", "-m", "base"]);
    git(&target, &["checkout", "-q", "-b", "feature"]);
    // The change touches m1.py and m2.py.
    write(&target, "src/m1.py", &module(1, 1));
    write(&target, "src/m2.py", &module(2, 1));
    git(&target, &["commit", "-qam", "push 1"]);
    let first = review(
        work.path(),
        &target,
        "out1",
        &["--diff", "main..feature", "--incremental"],
    )
    .await;
    let asked_first = asked(&first);
    assert!(
        asked_first.contains("t1") && asked_first.contains("t2"),
        "{asked_first:?}"
    );
    // The next push changes m2.py again; m1.py's content and hunks are as they were.
    write(&target, "src/m2.py", &module(2, 2));
    git(&target, &["commit", "-qam", "push 2"]);
    let second = review(
        work.path(),
        &target,
        "out2",
        &[
            "--diff",
            "main..feature",
            "--incremental",
            "--explain-cache",
        ],
    )
    .await;
    let asked_second = asked(&second);
    assert!(
        asked_second.contains("t2"),
        "m2.py changed: {asked_second:?}"
    );
    assert!(
        !asked_second.contains("t1"),
        "m1.py's task is reused: {asked_second:?}"
    );
    let first_flow = first.report["flow_id"].as_str().unwrap();
    assert_eq!(task(&second.report, "t1")["reused_from"], first_flow);
}
