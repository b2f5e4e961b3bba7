//! Retention as the Apps page shows it: each app's plan's days per kind of data (the sweep
//! itself runs in the interop tests, on a local lake and on S3).

use crate::dashboard::owner;
use crate::helpers::*;

#[tokio::test]
async fn the_apps_page_shows_each_apps_retention_by_its_plan() {
    let app = spawn_app_with(|s| s.plans.pro.retention.hourly_rollup_days = 45);
    let (free, _) = app.create_app("free").await;
    let (pro, _) = app.create_app("pro").await;
    let mut b = owner(&app).await;
    let page = b.get("/dashboard/apps").await;
    assert_eq!(page.status, 200);
    let card = |id: &str| -> String {
        let at = page
            .body
            .find(&format!("id=\"app-{id}\""))
            .expect("the app's card");
        let end = page.body[at..].find("</article>").unwrap();
        page.body[at..at + end].to_owned()
    };
    let kept = |card: &str, what: &str| -> String {
        let at = card
            .find(&format!("<dt>{what}</dt>"))
            .unwrap_or_else(|| panic!("{what}"));
        let dd = &card[at..];
        let start = dd.find("<dd>").unwrap() + 4;
        dd[start..start + dd[start..].find("</dd>").unwrap()].to_owned()
    };
    let (free, pro) = (card(&free), card(&pro));
    assert_eq!(kept(&free, "Events in the lake"), "kept 365 days");
    assert_eq!(kept(&free, "Hourly traffic"), "kept 31 days");
    assert_eq!(kept(&free, "Daily traffic"), "kept 730 days");
    assert_eq!(kept(&free, "Survey responses"), "kept 365 days");
    assert_eq!(kept(&free, "Lake file records"), "kept 2 days");
    assert_eq!(
        kept(&pro, "Hourly traffic"),
        "kept 45 days",
        "from the configuration"
    );
    assert_eq!(kept(&pro, "Daily traffic"), "kept for ever");
}
