//! The survey response export opens in Python's `csv` module with one row per response.

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
    let a = app
        .admin(
            Method::POST,
            &format!("/apps/{app_id}/surveys"),
            Some(survey),
        )
        .await;
    let id = a.data()["id"].as_str().unwrap().to_owned();
    app.admin(
        Method::POST,
        &format!("/apps/{app_id}/surveys/{id}/transition"),
        Some(json!({"status": "active"})),
    )
    .await;
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
    let res = app
        .client
        .get(format!("{}/api/v1/surveys/{id}/responses.csv", app.base))
        .header("x-api-key", &key)
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
    let rows: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
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
