//! `quorum fix --cluster` with real `quorum node` processes on loopback, each with its own
//! scripted model server: the nodes share the fix attempts, each builds the agent's prompt from
//! the tree it was shipped, a node's own test policy decides whether it runs the tests, and a
//! node killed (kill -9) while an attempt of its is in flight costs the finding nothing — the
//! attempt is placed again and kept.

mod common;

use common::fixing::*;
use common::*;
use quorum_testkit::{Reply, Rule, Script, ScriptedServer};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

const COOKIE: &str = "fix-cluster-cookie";
/// Findings in the project, one per file.
const FLAGS: usize = 6;

/// The project: `m{i}.py` each holding one flag a finding names, and a test that fails when
/// any file is broken. A git repository with one commit.
fn flag_project(work: &Path) -> PathBuf {
    let target = work.join("project");
    for i in 0..FLAGS {
        write(
            &target,
            &format!("m{i}.py"),
            &format!("import os\n\nBAD_{i} = True\n\n\ndef use():\n    return BAD_{i}\n"),
        );
    }
    write(
        &target,
        "tests.sh",
        "if grep -q BROKEN m*.py; then echo 'test tests::intact ... FAILED'; exit 1; fi\necho 'test tests::intact ... ok'\n",
    );
    git(&target, &["init", "-q"]);
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "base"]);
    target
}

fn title(i: usize) -> String {
    format!("Flag {i} is left set")
}

/// The review that reports one finding per file.
fn flag_review() -> Script {
    let files: Vec<String> = (0..FLAGS).map(|i| format!("m{i}.py")).collect();
    let findings: Vec<Value> = (0..FLAGS)
        .map(|i| {
            finding(
                &title(i),
                "P1",
                0.9,
                &format!("m{i}.py"),
                3,
                &format!("BAD_{i} = True"),
            )
        })
        .collect();
    scripted_review(
        json!([{"id": "t1", "persona": "security_sentinel", "files": files,
                "mandate": "Check the flags."}]),
        &[("security_sentinel", Value::Array(findings))],
    )
}

/// What every node's model answers: the fix of the finding its prompt names (so a prompt that
/// lost its finding gets no fix). `held`: every answer waits for the test's release.
fn fixer_script(held: bool) -> Script {
    let mut script =
        Script::new()
            .models([MODEL])
            .rule(
                Rule::new("blind-verifier")
                    .when_system([BLIND])
                    .reply(Reply::json(
                        &json!({"still_holds": false, "reason": "the flag is cleared"}),
                    )),
            );
    for i in 0..FLAGS {
        let answer = Reply::json(&json!({
            "edits": [{"path": format!("m{i}.py"), "old": format!("BAD_{i} = True"), "new": format!("BAD_{i} = False")}],
            "summary": "cleared the flag"
        }));
        script = script.rule(
            Rule::new(format!("fix-{i}"))
                .when_system([FIXER])
                .when_all([title(i)])
                .reply(if held { Reply::held(answer) } else { answer }),
        );
    }
    script
}

struct FixNode {
    name: String,
    node: Node,
    server: ScriptedServer,
}

/// One `quorum node` named `name` with its own scripted fixer (`script`), two attempts at once,
/// joining `join` when given; `extra` are more arguments.
async fn fix_node(
    work: &Path,
    name: &str,
    script: Script,
    join: Option<&str>,
    extra: &[&str],
) -> FixNode {
    let server = ScriptedServer::start(script).await.unwrap();
    let data = work.join(format!("data-{name}"));
    let backend = format!("ollama={}", server.ollama_url());
    let data = data.display().to_string();
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
        &data,
        "--heartbeat-ms",
        "100",
        "--deadline-ms",
        "1000",
    ];
    if let Some(j) = join {
        args.extend(["--join", j]);
    }
    args.extend_from_slice(extra);
    let node = spawn_node(
        node_command(&args, work)
            .env("QUORUM_COOKIE", COOKIE)
            .env("QUORUM_MAX_CONCURRENT", "2"),
    )
    .await;
    FixNode {
        name: name.to_string(),
        node,
        server,
    }
}

/// Nodes `names`, joined in one cluster, each with its own scripted fixer (`held[i]`: its
/// answers wait for the test's release); `extra[i]` are more arguments for node i. Returns
/// once every node sees every one alive with its API.
async fn fix_cluster(
    work: &Path,
    names: &[&str],
    extra: &[&[&str]],
    held: &[bool],
) -> Vec<FixNode> {
    let mut nodes: Vec<FixNode> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let join = nodes.first().map(|n| n.node.cluster().to_string());
        let node = fix_node(work, name, fixer_script(held[i]), join.as_deref(), extra[i]).await;
        nodes.push(node);
    }
    let mut clients = Vec::new();
    for n in &nodes {
        clients.push(
            quorum_api::ApiClient::connect(n.node.api(), NODE_TOKEN)
                .await
                .unwrap(),
        );
    }
    'poll: for _ in 0..600 {
        for c in &clients {
            let st = c.cluster_status().await.unwrap();
            if st
                .iter()
                .filter(|n| n.alive && !n.api_url.is_empty())
                .count()
                != names.len()
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue 'poll;
            }
        }
        return nodes;
    }
    panic!("the nodes never all saw each other");
}

fn fix_args<'a>(
    target: &'a Path,
    report: &'a Path,
    out: &'a Path,
    cluster: &'a str,
    backend: &'a str,
) -> Vec<&'a str> {
    vec![
        "fix",
        target.to_str().unwrap(),
        "--from",
        report.to_str().unwrap(),
        "--cluster",
        cluster,
        // The conductor's own model: with no agent here and the blind verifier off, it is
        // never asked while a node takes attempts.
        "--backend",
        backend,
        "--model",
        MODEL,
        "--no-verifier",
        "--out",
        out.to_str().unwrap(),
        "--test-cmd",
        "bash tests.sh",
        "--unsandboxed",
    ]
}

fn fixes(out: &Path) -> Vec<Value> {
    read_json(&out.join("fix-report.json"))["fixes"]
        .as_array()
        .unwrap()
        .clone()
}

/// Three nodes share six fix attempts: every node's model is asked, for the findings placed
/// there, with the finding and the shipped file's lines in its prompt; every fix is kept on the
/// branch, one commit each, in one attempt each. The node started with --fix-tests ran the
/// tests of the first change judged on its tree, when it is the one judged first; the others
/// run no target code and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_share_the_fix_attempts_and_every_fix_is_kept() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let head_before = git_out(&target, &["rev-parse", "HEAD"]);
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    assert_eq!(
        read_json(&report)["findings"].as_array().unwrap().len(),
        FLAGS
    );
    let nodes = fix_cluster(
        work.path(),
        &["n1", "n2", "n3"],
        &[&["--fix-tests"], &[], &[]],
        &[false, false, false],
    )
    .await;
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    // The blind verifier on: each node's judges the changes it made.
    let args: Vec<&str> = fix_args(&target, &report, &out, nodes[1].node.api(), &backend)
        .into_iter()
        .filter(|a| *a != "--no-verifier")
        .collect();
    let o = client(&args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains("fix attempts go to n1 (2), n2 (2), n3 (2)"),
        "{}",
        text(&o)
    );

    let fixes = fixes(&out);
    assert_eq!(fixes.len(), FLAGS);
    let mut placed = std::collections::BTreeMap::<String, usize>::new();
    for f in &fixes {
        assert_eq!(f["status"], "kept", "{f}");
        let attempts = f["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{f}");
        let node = attempts[0]["node"]
            .as_str()
            .expect("made on a node")
            .to_string();
        *placed.entry(node).or_default() += 1;
        // Only a node that allows tests ran them; only on the tree the fix was kept into.
        if let Some(on) = attempts[0]["tested_on"].as_str() {
            assert_eq!(on, "n1", "{f}");
            assert_eq!(attempts[0]["node"], "n1", "{f}");
        }
        assert_eq!(attempts[0]["oracles"]["tests"]["passed"], true, "{f}");
    }
    assert_eq!(
        placed.values().copied().collect::<Vec<_>>(),
        vec![2, 2, 2],
        "{placed:?}"
    );
    // Each node's model was asked for exactly the findings placed there, with the shipped
    // file's lines in the prompt.
    for n in &nodes {
        let reqs = n.server.requests();
        let asked = fixer_requests(&reqs);
        assert_eq!(asked.len(), placed[&n.name], "{}", n.name);
        // Its blind verifier judged each change it made, from the diff and the finding.
        let blind: Vec<_> = reqs.iter().filter(|r| r.system.contains(BLIND)).collect();
        assert_eq!(blind.len(), placed[&n.name], "{}", n.name);
        assert!(
            blind.iter().all(|r| !r.text.contains("cleared the flag")),
            "never the fixer's words"
        );
        for r in asked {
            let i = (0..FLAGS)
                .find(|i| r.text.contains(&title(*i)))
                .expect("the finding in the prompt");
            let lines = delimited(&r.text, &format!("m{i}.py")).expect("the file's lines");
            assert!(lines.contains(&format!("BAD_{i} = True")), "{lines}");
        }
    }
    assert!(
        text(&o).contains("node n2 runs no test commands"),
        "{}",
        text(&o)
    );
    let here_asked = here.requests();
    assert!(fixer_requests(&here_asked).is_empty(), "no agent ran here");
    assert!(
        !here_asked.iter().any(|r| r.system.contains(BLIND)),
        "no verifier call here"
    );
    for f in &fixes {
        let v = &f["attempts"][0]["oracles"]["verifier"];
        assert_eq!(v["reason"], "the flag is cleared", "{f}");
        // Each node serves one model: its verifier is its fixer's own, and the record says so.
        assert_eq!(v["model"], MODEL, "{f}");
        assert!(
            v["not_independent"]
                .as_str()
                .unwrap()
                .contains("the fixer's own model"),
            "{f}"
        );
    }
    let branch = read_json(&out.join("fix-report.json"))["branch"]
        .as_str()
        .unwrap()
        .to_string();
    let log = git_out(
        &target,
        &["log", "--format=%s", &format!("{head_before}..{branch}")],
    );
    assert_eq!(log.lines().count(), FLAGS, "{log}");
    for i in 0..FLAGS {
        let fixed = git_out(&target, &["show", &format!("{branch}:m{i}.py")]);
        assert!(fixed.contains(&format!("BAD_{i} = False")), "{fixed}");
    }
}

/// A node killed (kill -9) while the attempts placed on it wait for its model: they are handed
/// back and placed on the node left, at no cost — every finding is kept in one attempt, and the
/// dead node's attempts appear as made on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_attempt_costs_no_attempt() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    // n1's model holds every answer; n2 answers at once.
    let mut nodes = fix_cluster(work.path(), &["n1", "n2"], &[&[], &[]], &[true, false]).await;
    let mut asked = nodes[0].server.subscribe();
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let args = fix_args(&target, &report, &out, nodes[1].node.api(), &backend);
    let child = command(&args, work.path())
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .spawn()
        .unwrap();
    // An attempt reached n1's model (and waits there): kill n1.
    let first = tokio::time::timeout(HUNG, asked.recv())
        .await
        .expect("an attempt reached n1")
        .unwrap();
    assert!(first.system.contains(FIXER), "{}", first.system);
    nodes[0].node.child.start_kill().unwrap();
    let _ = nodes[0].node.child.wait().await;
    let o = tokio::time::timeout(HUNG, child.wait_with_output())
        .await
        .expect("the fix run ends")
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("handed back: n1 is lost"), "{}", text(&o));
    for f in fixes(&out) {
        assert_eq!(f["status"], "kept", "{f}");
        let attempts = f["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "not charged for the dead node: {f}");
        assert_eq!(attempts[0]["node"], "n2", "{f}");
    }
    assert_eq!(
        fixer_requests(&nodes[1].server.requests()).len(),
        FLAGS,
        "n2 made every fix"
    );
}

/// A node's own test policy decides: started with --fix-tests (and able to sandbox), it runs
/// the tests of the one change it made, on the tree the change is kept into, and the
/// conductor takes its run; the fix report says where the tests ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_allows_tests_runs_them_on_the_tree_the_fix_is_kept_into() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report_path = reviewed_by(&target, work.path(), flag_review()).await;
    let first = read_json(&report_path)["findings"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nodes = fix_cluster(work.path(), &["n1"], &[&["--fix-tests"]], &[false]).await;
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let mut args = fix_args(&target, &report_path, &out, nodes[0].node.api(), &backend);
    args.extend(["--findings", first.as_str()]);
    let o = client(&args, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    let fixes = fixes(&out);
    let attempt = &fixes[0]["attempts"][0];
    assert_eq!(fixes[0]["status"], "kept", "{}", fixes[0]);
    // The node's policy asks the same question: can bubblewrap make the sandbox here?
    let sandbox = quorum_fix::sandbox::Isolation::detect().await.is_some();
    if sandbox {
        assert_eq!(attempt["tested_on"], "n1", "{attempt}");
        assert_eq!(attempt["oracles"]["tests"]["passed"], true, "{attempt}");
    } else {
        // No sandbox on this machine: the node refuses, whatever the flag, and the conductor
        // tests.
        assert!(attempt.get("tested_on").is_none(), "{attempt}");
        assert!(
            text(&o).contains("node n1 cannot sandbox test commands"),
            "{}",
            text(&o)
        );
    }
}

/// The conductor killed (kill -9) mid-run while one node holds its attempts and the other's
/// fixes were kept, then that node lost too: `--resume`, with one node left, re-applies the
/// kept fixes from the journal without asking any node for them again, and places the attempts
/// that were in flight again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_conductor_resumes_without_redoing_a_kept_fix() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    // n1's model holds every answer until released; n2 answers at once.
    let mut nodes = fix_cluster(work.path(), &["n1", "n2"], &[&[], &[]], &[true, false]).await;
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let n2_api = nodes[1].node.api().to_string();
    let args = fix_args(&target, &report, &out, &n2_api, &backend);
    let mut child = command(&args, work.path())
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .spawn()
        .unwrap();
    // Wait until n2's three fixes are kept (journalled), n1's three still held.
    let journal = out.join("fix-journal.jsonl");
    let deadline = std::time::Instant::now() + HUNG;
    loop {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        if text.lines().filter(|l| l.contains("\"Judged\"")).count() >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no fix was judged: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().await.unwrap();
    let kept_before: Vec<String> = fixer_requests(&nodes[1].server.requests())
        .iter()
        .filter_map(|r| (0..FLAGS).find(|i| r.text.contains(&title(*i))).map(title))
        .collect();
    assert_eq!(kept_before.len(), 3, "{kept_before:?}");
    // n1 is gone too: the resumed run has one node where the first had two, and still
    // replays every recorded decision (the loop's never depend on the places).
    nodes[0].node.child.start_kill().unwrap();
    let _ = nodes[0].node.child.wait().await;
    let mut resume = args.clone();
    resume.push("--resume");
    let o = client(&resume, work.path()).await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains("resumed: 3 fix(es) kept before the interruption are re-applied"),
        "{}",
        text(&o)
    );
    for f in fixes(&out) {
        assert_eq!(f["status"], "kept", "{f}");
    }
    assert!(
        fixer_requests(&nodes[1].server.requests()).len() == FLAGS,
        "n2 made the other three on the resume"
    );
    // No kept fix was asked for again, on either node.
    let requests: Vec<quorum_testkit::RecordedRequest> =
        nodes.iter().flat_map(|n| n.server.requests()).collect();
    let asked_after = fixer_requests(&requests);
    for t in &kept_before {
        let asked = asked_after
            .iter()
            .filter(|r| r.text.contains(t.as_str()))
            .count();
        assert_eq!(asked, 1, "{t} was asked again");
    }
}

/// A node that joins the cluster while a fix run works takes attempts from then on: n1 holds
/// every answer and has as many attempts as it takes; n2 starts, joins, and the waiting
/// attempts go to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_mid_run_takes_the_waiting_attempts() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    let mut nodes = fix_cluster(work.path(), &["n1"], &[&[]], &[true]).await;
    let mut asked = nodes[0].server.subscribe();
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let args = fix_args(&target, &report, &out, nodes[0].node.api(), &backend);
    let child = command(&args, work.path())
        .env("QUORUM_API_TOKEN", NODE_TOKEN)
        .spawn()
        .unwrap();
    // n1 runs two and holds two more (capacity 2): four of the six reach it, held.
    for _ in 0..2 {
        tokio::time::timeout(HUNG, asked.recv())
            .await
            .expect("n1 was asked")
            .unwrap();
    }
    // n2 joins.
    let n2 = fix_node(
        work.path(),
        "n2",
        fixer_script(false),
        Some(nodes[0].node.cluster()),
        &[],
    )
    .await;
    // n2 makes the two attempts that waited; then n1's answers go out.
    let mut n2_asked = n2.server.subscribe();
    for _ in 0..2 {
        tokio::time::timeout(HUNG, n2_asked.recv())
            .await
            .expect("n2 was given the waiting attempts")
            .unwrap();
    }
    nodes[0].server.release();
    let o = tokio::time::timeout(HUNG, child.wait_with_output())
        .await
        .expect("the fix run ends")
        .unwrap();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("n2 joined this run"), "{}", text(&o));
    let mut placed = std::collections::BTreeMap::<String, usize>::new();
    for f in fixes(&out) {
        assert_eq!(f["status"], "kept", "{f}");
        *placed
            .entry(f["attempts"][0]["node"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(placed.get("n2"), Some(&2), "{placed:?}");
    drop(n2);
    nodes.clear();
}

/// A node whose listed API leads to another node from here (`--api-url` set to n1's, as a
/// loopback API behind a proxy would list): the run says so and leaves it out, and none of
/// its attempts go to the node that answers there in its name. The URL a node lists is the
/// one its operator gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_listed_api_answers_as_another_is_left_out() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    let nodes = fix_cluster(work.path(), &["n1"], &[&[]], &[false]).await;
    let n1_api = nodes[0].node.api().to_string();
    let n2 = fix_node(
        work.path(),
        "n2",
        fixer_script(false),
        Some(nodes[0].node.cluster()),
        &["--api-url", &n1_api],
    )
    .await;
    let c = quorum_api::ApiClient::connect(&n1_api, NODE_TOKEN)
        .await
        .unwrap();
    let mut listed = false;
    for _ in 0..600 {
        let st = c.cluster_status().await.unwrap();
        if st.iter().any(|n| n.name == "n2" && n.alive) {
            let n2_entry = st.iter().find(|n| n.name == "n2").unwrap();
            assert_eq!(n2_entry.api_url, n1_api, "the URL its operator gave");
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed, "n2 never joined");
    assert_eq!(c.answered_by().await.unwrap(), "n1");

    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let o = client(
        &fix_args(&target, &report, &out, &n1_api, &backend),
        work.path(),
    )
    .await;
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains(&format!(
            "node n2 is left out of this run: its listed API {n1_api} answers here as node n1"
        )),
        "{}",
        text(&o)
    );
    assert!(
        text(&o).contains("fix attempts go to n1 (2)"),
        "{}",
        text(&o)
    );
    for f in fixes(&out) {
        assert_eq!(f["status"], "kept", "{f}");
        assert_eq!(f["attempts"][0]["node"], "n1", "{f}");
    }
    assert!(fixer_requests(&n2.server.requests()).is_empty());
}

/// The blind verifier model the user names holds on nodes too: a node that does not serve it
/// gives no verdict of a model of its own choosing, and this machine's verifier — the named
/// model — judges every change a node made. A verdict records its model and, as an
/// independent one, no `not_independent`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_verifier_model_is_honoured_for_changes_made_on_nodes() {
    const OTHER: &str = "llama3.2:1b";
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    let nodes = fix_cluster(work.path(), &["n1"], &[&[]], &[false]).await;
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false).models([MODEL, OTHER]))
        .await
        .unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    let mut args: Vec<&str> = fix_args(&target, &report, &out, nodes[0].node.api(), &backend)
        .into_iter()
        .filter(|a| *a != "--no-verifier")
        .collect();
    args.extend(["--verifier-model", OTHER]);
    let o = client(&args, work.path()).await;
    assert_eq!(
        code(&o),
        0,
        "{}\n{}",
        text(&o),
        std::fs::read_to_string(out.join("fix-report.json")).unwrap_or_default()
    );
    let node_reqs = nodes[0].server.requests();
    assert!(
        !fixer_requests(&node_reqs).is_empty(),
        "the node made the fixes"
    );
    assert!(
        !node_reqs.iter().any(|r| r.system.contains(BLIND)),
        "the node verified with a model the user did not name"
    );
    let blind: Vec<_> = here
        .requests()
        .into_iter()
        .filter(|r| r.system.contains(BLIND))
        .collect();
    assert_eq!(
        blind.len(),
        FLAGS,
        "this machine's named verifier judged each change"
    );
    assert!(
        blind.iter().all(|r| r.body["model"] == OTHER),
        "{:?}",
        blind[0].body["model"]
    );
    for f in fixes(&out) {
        let v = &f["attempts"][0]["oracles"]["verifier"];
        assert_eq!(v["model"], OTHER, "{f}");
        assert!(v.get("not_independent").is_none(), "{f}");
    }
}

/// On a cluster as here: a test command the reviewed tree's `.quorum.toml` names is never
/// shipped to a node (not even one started with --fix-tests) without the user's consent — the
/// run is refused before any node is asked — and with `--trust-repo-config` it is the command
/// the node runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_runs_a_repository_test_command_only_with_the_users_consent() {
    let work = tempfile::tempdir().unwrap();
    let target = flag_project(work.path());
    write(&target, ".quorum.toml", "[fix]\ntest = \"bash tests.sh\"\n");
    git(&target, &["add", "."]);
    git(&target, &["commit", "-qm", "repo config"]);
    let report = reviewed_by(&target, work.path(), flag_review()).await;
    let first = read_json(&report)["findings"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let nodes = fix_cluster(work.path(), &["n1"], &[&["--fix-tests"]], &[false]).await;
    let out = work.path().join("fix-out");
    let here = ScriptedServer::start(fixer_script(false)).await.unwrap();
    let backend = format!("ollama={}", here.ollama_url());
    // fix_args names a test command of its own: without it, the tree's is the one in play.
    let base: Vec<&str> = fix_args(&target, &report, &out, nodes[0].node.api(), &backend)
        .into_iter()
        .filter(|a| !matches!(*a, "--test-cmd" | "bash tests.sh" | "--unsandboxed"))
        .chain(["--findings", first.as_str()])
        .collect();
    let o = client(&base, work.path()).await;
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(stderr(&o).contains("--trust-repo-config"), "{}", text(&o));
    assert!(
        fixer_requests(&nodes[0].server.requests()).is_empty(),
        "a node was asked before the refusal"
    );

    // Unsandboxed here only so the run needs no bubblewrap on this machine: the node's own
    // policy (--fix-tests, its own sandbox) is untouched by it.
    let mut trusted = base.clone();
    trusted.extend(["--trust-repo-config", "--unsandboxed"]);
    let o = client(&trusted, work.path()).await;
    assert!(matches!(code(&o), 0 | 1), "{}", text(&o));
    let fr = read_json(&out.join("fix-report.json"));
    assert_eq!(fr["test_command"], "bash tests.sh", "{fr}");
}
