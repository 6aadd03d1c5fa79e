//! Injected faults: statuses with Retry-After, delays, held replies released by the test, hangs
//! that block only their own request, truncated bodies.

use super::*;

#[tokio::test]
async fn status_replies_carry_retry_after_and_api_shaped_bodies() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("limited")
                        .when_all(["busy"])
                        .reply(Reply::rate_limited(7))
                        .then(Reply::text("ok now")),
                )
                .rule(
                    Rule::new("custom")
                        .when_all(["custom"])
                        .reply(Reply::status_body(503, "overloaded, go away")),
                )
                .fallback(Reply::status(500)),
        )
        .await
        .unwrap();

        let answer = openai(&server, user("busy")).await;
        assert_eq!(answer.status, 429);
        assert_eq!(answer.headers["retry-after"], "7");
        assert_eq!(answer.json()["error"]["type"], "rate_limit_error");
        assert_eq!(openai(&server, user("busy")).await.content(), "ok now");

        let answer = ollama(&server, user("custom")).await;
        assert_eq!(answer.status, 503);
        assert_eq!(answer.body, "overloaded, go away");
        assert!(answer.headers.get("retry-after").is_none());

        let answer = ollama(&server, user("other")).await;
        assert_eq!(answer.status, 500);
        assert!(answer.json()["error"].as_str().unwrap().contains("500"));
    })
    .await;
}

#[tokio::test]
async fn delay_then_answers_with_the_inner_reply() {
    bounded(async {
        let server = ScriptedServer::start(Script::new().rule(
            Rule::new("slow").reply(Reply::delay(30, Reply::delay(20, Reply::text("late")))),
        ))
        .await
        .unwrap();
        let answer = ollama(&server, user("x")).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.content(), "late");
    })
    .await;
}

#[tokio::test]
async fn held_replies_wait_for_release_then_answer() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(
                    Rule::new("held")
                        .when_all(["wait"])
                        .reply(Reply::held(Reply::text("released"))),
                )
                .fallback(Reply::text("fine")),
        )
        .await
        .unwrap();
        let base = server.ollama_url();
        let held = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("wait for it")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        server.wait_for_requests(1).await;
        assert_eq!(ollama(&server, user("other")).await.content(), "fine");
        assert!(!held.is_finished(), "a held reply answered before release");
        server.release();
        let answer = held.await.unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(answer.json()["message"]["content"], "released");
        // Once released, later held replies answer at once.
        assert_eq!(
            ollama(&server, user("wait again")).await.content(),
            "released"
        );
    })
    .await;
}

#[tokio::test]
async fn hang_blocks_only_its_own_request_and_shutdown_releases_it() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new()
                .rule(Rule::new("hang").when_all(["hang"]).reply(Reply::hang()))
                .rule(
                    Rule::new("slow")
                        .when_all(["slow"])
                        .reply(Reply::delay(600_000, Reply::text("never"))),
                )
                .fallback(Reply::text("fine")),
        )
        .await
        .unwrap();
        let base = server.ollama_url();
        let hanging = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("please hang")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        let slow = tokio::spawn({
            let body = json!({"model": "scripted-model", "messages": user("slow")});
            let url = format!("{base}/api/chat");
            async move { post(url, &body).await }
        });
        let seen = server.wait_for_requests(2).await;
        assert_eq!(seen.len(), 2);

        // Other requests are served while two are parked.
        assert_eq!(ollama(&server, user("normal")).await.content(), "fine");
        assert!(!hanging.is_finished());

        let addr = server.addr();
        server.shutdown();
        let released = hanging.await.unwrap();
        assert_eq!(released.status, 503);
        let released = slow.await.unwrap();
        assert_eq!(released.status, 503);

        // The port stops accepting once every connection is gone.
        let refused = loop {
            match tokio::net::TcpStream::connect(addr).await {
                Err(_) => break true,
                Ok(_) => tokio::task::yield_now().await,
            }
        };
        assert!(refused);
    })
    .await;
}

#[tokio::test]
async fn truncated_reply_is_a_200_with_broken_json() {
    bounded(async {
        let server = ScriptedServer::start(
            Script::new().rule(Rule::new("cut").reply(Reply::truncated("a fine answer"))),
        )
        .await
        .unwrap();
        for answer in [
            ollama(&server, user("x")).await,
            openai(&server, user("x")).await,
        ] {
            assert_eq!(answer.status, 200);
            assert_eq!(answer.headers["content-type"], "application/json");
            assert!(answer.body.starts_with('{'));
            assert!(serde_json::from_str::<Value>(&answer.body).is_err());
        }
    })
    .await;
}
