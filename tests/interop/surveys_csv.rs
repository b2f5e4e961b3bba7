//! The survey response export opens in Python's `csv` module with one row per response, and
//! no cell of it is a formula a spreadsheet would run.

use std::process::Command;

use reqwest::Method;
use serde_json::json;

use crate::helpers::*;

#[tokio::test]
async fn the_csv_export_opens_in_pythons_csv_module() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let key = app.create_key(&app_id, &["responses:read"]).await.1;
    let survey = json!({"title": "Mixed", "type": "poll", "questions": [
        {"id": "one", "text": "Pick one, \"please\"", "type": "single_choice",
            "options": [{"id": "a", "label": "Alpha, first"}, {"id": "b", "label": "Beta"}]},
        {"id": "many", "text": "Pick many", "type": "multiple_choice", "required": false,
            "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}]}]});
    let id = active_survey(&app, &app_id, survey).await;
    for n in 0..25 {
        let mut answers =
            vec![json!({"questionId": "one", "value": if n % 2 == 0 { "a" } else { "b" }})];
        if n % 5 == 0 {
            answers.push(json!({"questionId": "many", "value": ["x", "y"]}));
        }
        let body = json!({"anonymousId": anon(&format!("v{n}")), "answers": answers});
        let a = app
            .send(
                Method::POST,
                &format!("/api/w/surveys/{id}/responses"),
                &[("x-app-key", &ik)],
                Some(body),
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.body);
    }
    let rows = exported_rows(&app, &key, &id).await;
    assert_eq!(
        rows[0],
        [
            "responseId",
            "createdAt",
            "updatedAt",
            "completed",
            "userId",
            "anonymousId",
            "Pick one, \"please\"",
            "Pick many"
        ]
    );
    assert_eq!(rows.len(), 26, "a header and one row per response");
    assert!(rows[1..]
        .iter()
        .all(|r| r.len() == 8 && r[0].starts_with("resp_")));
    let first = rows.iter().find(|r| r[5] == anon("v0")).unwrap();
    assert_eq!(first[6], "Alpha, first");
    assert_eq!(first[7], "X; Y");
    assert_eq!(first[3], "true");
    let odd = rows.iter().find(|r| r[5] == anon("v1")).unwrap();
    assert_eq!((odd[6].as_str(), odd[7].as_str()), ("Beta", ""));
}

#[tokio::test]
async fn formulas_posted_through_the_widget_reach_the_csv_as_text() {
    let app = spawn_app();
    let (app_id, ik) = app.create_app("pro").await;
    let key = app.create_key(&app_id, &["responses:read"]).await.1;
    let poll = json!({"title": "Injected", "type": "poll", "questions": [
        {"id": "pick", "text": "=cmd|' /C calc'!A0", "type": "single_choice",
            "options": [{"id": "a", "label": "@SUM(1+1)"}, {"id": "b", "label": "-2+3"}]}]});
    let open = json!({"title": "Why", "type": "open", "questions": [
        {"id": "why", "text": "Why?", "type": "text"}]});
    let (poll, open) = (
        active_survey(&app, &app_id, poll).await,
        active_survey(&app, &app_id, open).await,
    );
    let evil = [
        ("=1+2", "a", "=HYPERLINK(\"http://evil\")"),
        ("+1+2", "b", "+SUM(A1:A9)"),
        ("@me", "a", "-1+2"),
        ("-x", "b", "@cmd"),
    ];
    for (n, (user, pick, why)) in evil.iter().enumerate() {
        for (survey, answer) in [(&poll, ("pick", pick)), (&open, ("why", why))] {
            let body = json!({"anonymousId": anon(&format!("e{n}")), "userId": user,
                "answers": [{"questionId": answer.0, "value": answer.1}]});
            let a = app
                .send(
                    Method::POST,
                    &format!("/api/w/surveys/{survey}/responses"),
                    &[("x-app-key", &ik)],
                    Some(body),
                )
                .await;
            assert_eq!(a.status, 201, "{}", a.body);
        }
    }
    let (polled, opened) = (
        exported_rows(&app, &key, &poll).await,
        exported_rows(&app, &key, &open).await,
    );
    assert_eq!(polled[0][6], "'=cmd|' /C calc'!A0", "question texts too");
    for (n, (user, pick, why)) in evil.iter().enumerate() {
        let label = if *pick == "a" { "'@SUM(1+1)" } else { "'-2+3" };
        for (rows, answer) in [(&polled, label.to_owned()), (&opened, format!("'{why}"))] {
            assert_eq!(rows.len(), 1 + evil.len());
            let row = rows
                .iter()
                .find(|r| r[5] == anon(&format!("e{n}")))
                .unwrap();
            assert_eq!((&row[4], &row[6]), (&format!("'{user}"), &answer));
        }
    }
    let formula = |c: &&String| c.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let cells = || polled.iter().chain(&opened).flatten();
    assert_eq!(cells().filter(formula).count(), 0, "{polled:?} {opened:?}");
}

/// A survey made by the admin API and made active; its id.
async fn active_survey(app: &TestApp, app_id: &str, survey: serde_json::Value) -> String {
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/surveys"),
            Some(survey),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.body);
    let id = a.data()["id"].as_str().unwrap().to_owned();
    app.admin(
        Method::POST,
        &format!("/apps/{app_id}/surveys/{id}/transition"),
        Some(json!({"status": "active"})),
    )
    .await;
    id
}

/// `GET /api/v1/surveys/{id}/responses.csv` as Python's `csv` module reads it.
async fn exported_rows(app: &TestApp, key: &str, id: &str) -> Vec<Vec<String>> {
    let res = app
        .client
        .get(format!("{}/api/v1/surveys/{id}/responses.csv", app.base))
        .header("x-api-key", key)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-type"].to_str().unwrap(),
        "text/csv; charset=utf-8"
    );
    let text = res.text().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("responses.csv");
    std::fs::write(&file, &text).unwrap();
    let script = "import csv, json, sys\n\
        rows = list(csv.reader(open(sys.argv[1], newline='', encoding='utf-8')))\n\
        print(json.dumps(rows))";
    let out = Command::new(crate::python::venv_bin("python"))
        .args(["-c", script])
        .arg(&file)
        .output()
        .expect("python from .venv runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
