//! Dashboard accounts: password rules, removing members, ending sessions, changing a password.

use reqwest::StatusCode;

use crate::dashboard::{owner, Browser, OWNER_EMAIL, PASSWORD};
use crate::helpers::*;

/// Adds an account from the Team page; returns the answer's status.
async fn add(b: &mut Browser<'_>, email: &str, password: &str, role: &str) -> StatusCode {
    b.submit(
        "/dashboard/team",
        "/dashboard/team",
        &[
            ("name", "Mel Member"),
            ("email", email),
            ("password", password),
            ("role", role),
        ],
    )
    .await
    .status
}

/// Adds the member Mel (`mel@example.com`, the usual password) from the Team page.
async fn add_mel(b: &mut Browser<'_>) {
    assert_eq!(add(b, "mel@example.com", PASSWORD, "member").await, 200);
}

/// The id of the account `email`, read from the Team page's forms.
async fn id_of(b: &mut Browser<'_>, email: &str) -> String {
    let page = b.get("/dashboard/team").await.body;
    let row = &page[page.find(email).expect("listed")..];
    let at = row.find("/dashboard/team/").unwrap() + 16;
    row[at..].split('/').next().unwrap().to_owned()
}

#[tokio::test]
async fn blank_or_control_character_passwords_are_refused_and_normal_forms_sign_in_alike() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    let tabs = "\t".repeat(10);
    for bad in ["          ", tabs.as_str(), "long enough\0password"] {
        assert_eq!(
            add(&mut b, "bad@example.com", bad, "member").await,
            400,
            "{bad:?}"
        );
    }
    let (nfd, nfc) = (
        "A\u{30a}sa-a\u{30a}ngstro\u{308}m",
        "\u{c5}sa-\u{e5}ngstr\u{f6}m",
    );
    assert_eq!(add(&mut b, "asa@example.com", nfd, "member").await, 200);
    let mut m = Browser::new(&app);
    assert_eq!(m.sign_in("asa@example.com", nfc).await.status, 303);
}

#[tokio::test]
async fn an_owner_removes_a_member_whose_sessions_end_but_never_the_last_owner() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    add_mel(&mut b).await;
    let mut m = Browser::new(&app);
    assert_eq!(m.sign_in("mel@example.com", PASSWORD).await.status, 303);
    assert_eq!(m.get("/dashboard/apps").await.status, 200);
    let mel = id_of(&mut b, "mel@example.com").await;
    // A member cannot remove anyone; a form without its token is refused.
    let csrf = m.get("/dashboard/apps").await.csrf();
    let me = id_of(&mut b, OWNER_EMAIL).await;
    let refused = m
        .post(&format!("/dashboard/team/{me}/remove"), &[("csrf", &csrf)])
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        b.post(&format!("/dashboard/team/{mel}/remove"), &[])
            .await
            .status,
        403
    );
    let last = b
        .submit(
            "/dashboard/team",
            &format!("/dashboard/team/{me}/remove"),
            &[],
        )
        .await;
    assert_eq!(last.status, 409, "the last owner stays");
    let removed = b
        .submit(
            "/dashboard/team",
            &format!("/dashboard/team/{mel}/remove"),
            &[],
        )
        .await;
    assert_eq!(removed.status, 200);
    assert!(!removed.body.contains("mel@example.com</td>"));
    assert_eq!(m.get("/dashboard/apps").await.status, 303, "signed out");
    assert_eq!(m.sign_in("mel@example.com", PASSWORD).await.status, 401);
}

#[tokio::test]
async fn an_owner_ends_another_accounts_sessions() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    add_mel(&mut b).await;
    let mut m = Browser::new(&app);
    m.sign_in("mel@example.com", PASSWORD).await;
    let mel = id_of(&mut b, "mel@example.com").await;
    let ended = b
        .submit(
            "/dashboard/team",
            &format!("/dashboard/team/{mel}/sign-out"),
            &[],
        )
        .await;
    assert_eq!(ended.status, 200);
    assert_eq!(m.get("/dashboard/apps").await.status, 303);
    assert_eq!(
        b.get("/dashboard/apps").await.status,
        200,
        "the owner stays in"
    );
    assert_eq!(m.sign_in("mel@example.com", PASSWORD).await.status, 303);
}

#[tokio::test]
async fn a_member_changes_their_password_with_the_current_one_and_other_sessions_end() {
    let app = spawn_app();
    let mut b = owner(&app).await;
    add_mel(&mut b).await;
    let (mut here, mut there) = (Browser::new(&app), Browser::new(&app));
    here.sign_in("mel@example.com", PASSWORD).await;
    there.sign_in("mel@example.com", PASSWORD).await;
    let new = "a brand new passphrase";
    let change = |current: &'static str, confirm: &'static str| {
        [
            ("current", current),
            ("password", new),
            ("confirm", confirm),
        ]
    };
    let wrong = here
        .submit(
            "/dashboard/account",
            "/dashboard/account/password",
            &change("not it at all", new),
        )
        .await;
    assert_eq!(wrong.status, 400);
    assert!(wrong.body.contains("is not your password"));
    let mismatch = here
        .submit(
            "/dashboard/account",
            "/dashboard/account/password",
            &change(PASSWORD, "other"),
        )
        .await;
    assert_eq!(mismatch.status, 400);
    let done = here
        .submit(
            "/dashboard/account",
            "/dashboard/account/password",
            &change(PASSWORD, new),
        )
        .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(
        here.get("/dashboard/apps").await.status,
        200,
        "this browser stays"
    );
    assert_eq!(
        there.get("/dashboard/apps").await.status,
        303,
        "the other one is out"
    );
    let mut again = Browser::new(&app);
    assert_eq!(again.sign_in("mel@example.com", PASSWORD).await.status, 401);
    assert_eq!(again.sign_in("mel@example.com", new).await.status, 303);
}
