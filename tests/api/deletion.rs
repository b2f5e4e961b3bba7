//! `DELETE /admin/v1/apps/{appId}`: the app's keys stop at once, the job removes everything of
//! it (sled, live rollups, lake) and nothing of another app; 404, 401, a repeat; the dashboard's
//! form and the CLI. The kill -9 and S3 cases are in the interop tests.

use reqwest::Method;
use serde_json::json;

use crate::events::*;
use crate::helpers::*;
use crate::populate::*;

#[tokio::test]
async fn deleting_an_app_removes_everything_of_it_and_nothing_of_another() {
    let mut app = spawn_app_with(|s| s.collector.max_file_age_ms = 100);
    let a = full_app(&app, "Doomed", "a", 3).await;
    let b = full_app(&app, "Kept", "b", 3).await;
    traffic_shows(&app, &a, 6).await;
    traffic_shows(&app, &b, 6).await;
    let b_before = snapshot(&app, &b).await;
    assert_eq!(b_before["contacts"].as_array().unwrap().len(), 3);

    let del = app
        .admin(Method::DELETE, &format!("/apps/{}", a.id), None)
        .await;
    assert_eq!(del.status, 202, "{}", del.body);
    let job = del.data()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        del.header("location"),
        Some(format!("/admin/v1/jobs/{job}").as_str())
    );
    assert_eq!(del.data()["kind"], "app_deletion");
    assert_eq!(del.data()["appId"], json!(a.id));
    // Right after the answer, none of its keys works.
    app.api(&a.key, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.collect(&a.ik, tracks("late", 1))
        .await
        .assert_error(401, "UNAUTHORIZED");

    let done = finished_job(&app, &job).await;
    assert_eq!(done["state"], "done", "{done}");
    let report = &done["report"];
    assert_eq!(report["apps"], 1, "{done}");
    assert_eq!(
        report["keys"], 2,
        "the API key and the integration key: {done}"
    );
    assert!(report["contacts"].as_u64().unwrap() >= 3, "{done}");
    assert!(report["lakeFiles"].as_u64().unwrap() >= 1, "{done}");
    app.admin(Method::GET, &format!("/apps/{}", a.id), None)
        .await
        .assert_error(404, "NOT_FOUND");
    let listed = app.admin(Method::GET, "/apps", None).await;
    assert!(!listed.body.to_string().contains(&a.id));
    // A repeat is 404: the app is gone.
    app.admin(Method::DELETE, &format!("/apps/{}", a.id), None)
        .await
        .assert_error(404, "NOT_FOUND");
    // The other app shows exactly what it showed.
    assert_eq!(snapshot(&app, &b).await, b_before);

    app.stop().await;
    let lake = app.data_dir.join("lake/events");
    assert!(
        !lake.join(format!("app_id={}", a.id)).exists(),
        "the lake prefix is gone"
    );
    assert!(lake.join(format!("app_id={}", b.id)).exists());
    assert_eq!(
        sled_traces(&app.data_dir, &a.id),
        [("jobs".to_owned(), job.clone())],
        "nothing of the app in sled but its deletion's record"
    );
    assert!(sled_traces(&app.data_dir, &b.id).len() > 20);
}

#[tokio::test]
async fn delete_answers_404_for_an_unknown_app_401_without_the_token_and_the_same_job_twice() {
    let app = spawn_app_with(slow_files);
    app.admin(Method::DELETE, "/apps/0123456789abcdef01234567", None)
        .await
        .assert_error(404, "NOT_FOUND");
    app.admin(Method::GET, "/jobs/job_0123456789abcdef01234567", None)
        .await
        .assert_error(404, "NOT_FOUND");
    let (id, _) = app.create_app("free").await;
    let (key_id, _) = app.create_key(&id, &["contacts:read"]).await;
    let path = format!("/admin/v1/apps/{id}");
    app.send(Method::DELETE, &path, &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    app.send(
        Method::DELETE,
        &path,
        &[("authorization", "Bearer wrong-token-of-some-length")],
        None,
    )
    .await
    .assert_error(401, "UNAUTHORIZED");
    app.send(Method::DELETE, &path, &[("x-api-key", "tk_x_y")], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(
        app.admin(Method::GET, &format!("/apps/{id}"), None)
            .await
            .status,
        200
    );
    let first = app
        .admin(Method::DELETE, &format!("/apps/{id}"), None)
        .await;
    assert_eq!(first.status, 202, "{}", first.body);
    // From the 202 on, the app itself is gone from the admin API (its job is what is followed):
    // not shown, not changed, no new integration key.
    let gone = [
        (Method::GET, format!("/apps/{id}"), None),
        (
            Method::PATCH,
            format!("/apps/{id}"),
            Some(json!({"name": "Back"})),
        ),
        (Method::POST, format!("/apps/{id}/integration-key"), None),
        (Method::GET, format!("/apps/{id}/keys"), None),
        (
            Method::PATCH,
            format!("/apps/{id}/keys/{key_id}"),
            Some(json!({"permissions": ["contacts:read"]})),
        ),
    ];
    for (method, path, body) in gone {
        app.admin(method.clone(), &path, body)
            .await
            .assert_error(404, "NOT_FOUND");
    }
    let again = app
        .admin(Method::DELETE, &format!("/apps/{id}"), None)
        .await;
    // While it runs, a repeat answers the same job; once done, the app is gone (404).
    match again.status.as_u16() {
        202 => assert_eq!(again.data()["id"], first.data()["id"]),
        404 => again.assert_error(404, "NOT_FOUND"),
        s => panic!("{s}: {}", again.body),
    }
    let job = first.data()["id"].as_str().unwrap();
    assert_eq!(finished_job(&app, job).await["state"], "done");
    // A job is followed with the admin token only.
    app.send(Method::GET, &format!("/admin/v1/jobs/{job}"), &[], None)
        .await
        .assert_error(401, "UNAUTHORIZED");
}

#[tokio::test]
async fn the_dashboard_deletes_an_app_once_its_name_is_typed() {
    let app = spawn_app_with(slow_files);
    let (id, ik) = app.create_app("free").await;
    let mut owner = crate::dashboard::owner(&app).await;
    let page = owner.get("/dashboard/apps").await;
    assert!(page.body.contains(&format!("/dashboard/apps/{id}/delete")));
    let path = format!("/dashboard/apps/{id}/delete");
    // Without the CSRF token: refused, nothing happens.
    let refused = owner.post(&path, &[("confirm", "Test app")]).await;
    assert_eq!(refused.status, 403);
    // A wrong name: the page says so, the app stays.
    let wrong = owner
        .submit("/dashboard/apps", &path, &[("confirm", "Test")])
        .await;
    assert_eq!(wrong.status, 400);
    assert!(wrong.body.contains("was not deleted"), "{}", wrong.body);
    assert_eq!(app.collect(&ik, tracks("x", 1)).await.status, 200);
    let done = owner
        .submit("/dashboard/apps", &path, &[("confirm", "Test app")])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    app.collect(&ik, tracks("y", 1))
        .await
        .assert_error(401, "UNAUTHORIZED");
    // The Apps page shows the deletion until the app is gone.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let page = owner.get("/dashboard/apps").await;
        if !page.body.contains(&format!("app-{id}")) {
            break;
        }
        assert!(page.body.contains("Being deleted"), "{}", page.body);
        assert!(
            std::time::Instant::now() < deadline,
            "the app is never gone"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        owner
            .get(&format!("/dashboard/apps/{id}/contacts"))
            .await
            .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_killed_right_after_its_202_completes_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = crate::binary::start(dir.path());
    let app = TestApp::remote(&server.base, dir.path().to_owned());
    let a = full_app(&app, "Doomed", "a", 2).await;
    let b = full_app(&app, "Kept", "b", 2).await;
    let b_before = snapshot(&app, &b).await;
    let del = app
        .admin(Method::DELETE, &format!("/apps/{}", a.id), None)
        .await;
    assert_eq!(del.status, 202, "{}", del.body);
    server.kill_9();
    let mut server = crate::binary::start(dir.path());
    let app = TestApp::remote(&server.base, dir.path().to_owned());
    let job = del.data()["id"].as_str().unwrap();
    assert_eq!(finished_job(&app, job).await["state"], "done");
    app.api(&a.key, Method::GET, "/acq/v1/contacts", None)
        .await
        .assert_error(401, "UNAUTHORIZED");
    assert_eq!(snapshot(&app, &b).await, b_before);
    server.terminate().await;
    let lake = dir.path().join(format!("lake/events/app_id={}", a.id));
    assert!(!lake.exists(), "the lake prefix is gone");
    assert_eq!(
        sled_traces(dir.path(), &a.id),
        [("jobs".to_owned(), job.to_owned())]
    );
}
