//! The page shell (sidebar navigation, header, content), shared form pieces, and the two static
//! assets (`app.css`, `app.js`) compiled into the binary.
//!
//! Navigation is one table, `NAV`: a section that gets a page adds a row there and a route in
//! `mod.rs`.

use actix_web::http::header;
use actix_web::{HttpResponse, HttpResponseBuilder};
use maud::{html, Markup, PreEscaped, DOCTYPE};

use super::viewer::Viewer;
use crate::api::error::Enveloped;
use crate::tenants::App;
use crate::validation::FieldError;

const CSS: &str = include_str!("assets/app.css");
const JS: &str = include_str!("assets/app.js");

/// The sections of the sidebar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Apps,
    Traffic,
    Surveys,
    Ideas,
    Keys,
    Contacts,
    Team,
    Fleet,
    Webhooks,
    /// The signed-in member's own account (reached from their name, not from the sidebar).
    Account,
}

struct NavItem {
    section: Section,
    label: &'static str,
    href: &'static str,
    /// Drawn as a small SVG path (24x24 viewBox).
    icon: &'static str,
    owner_only: bool,
}

/// The sidebar, in order; a new page adds a row here and a route in `mod.rs`.
const NAV: &[NavItem] = &[
    NavItem {
        section: Section::Apps,
        label: "Apps",
        href: "/dashboard/apps",
        icon: "M4 4h7v7H4zM13 4h7v7h-7zM4 13h7v7H4zM13 13h7v7h-7z",
        owner_only: false,
    },
    NavItem {
        section: Section::Traffic,
        label: "Traffic",
        href: "/dashboard/traffic",
        icon: "M4 19h16M5 15l4-5 4 3 6-7",
        owner_only: false,
    },
    NavItem {
        section: Section::Surveys,
        label: "Surveys",
        href: "/dashboard/surveys",
        icon: "M5 4h14v12H9l-4 4zM9 9h6M9 12h4",
        owner_only: false,
    },
    NavItem {
        section: Section::Ideas,
        label: "Ideas",
        href: "/dashboard/ideas",
        icon: "M9 18h6M10 21h4M12 3a6 6 0 0 0-3.5 10.9c.6.5 1 1.2 1 2.1h5c0-.9.4-1.6 1-2.1A6 6 0 0 0 12 3z",
        owner_only: false,
    },
    NavItem {
        section: Section::Keys,
        label: "Keys",
        href: "/dashboard/keys",
        icon: "M14 10a4 4 0 1 0-3.9 4.9L12 17h2v2h2v2h4v-4l-6.1-6.1A4 4 0 0 0 14 10z",
        owner_only: true,
    },
    NavItem {
        section: Section::Contacts,
        label: "Contacts",
        href: "/dashboard/contacts",
        icon: "M16 19v-1a4 4 0 0 0-8 0v1M12 11a3 3 0 1 0 0-6 3 3 0 0 0 0 6zM20 19v-1a3 3 0 0 0-2-2.8M4 19v-1a3 3 0 0 1 2-2.8",
        owner_only: false,
    },
    NavItem {
        section: Section::Team,
        label: "Team",
        href: "/dashboard/team",
        icon: "M12 3l8 4v5c0 4.5-3.4 8.4-8 9-4.6-.6-8-4.5-8-9V7z",
        owner_only: true,
    },
    NavItem {
        section: Section::Webhooks,
        label: "Webhooks",
        href: "/dashboard/webhooks",
        icon: "M9 7a3 3 0 1 1 4.5 2.6L16 14M7 16a3 3 0 1 1 3-3h6M17 13a3 3 0 1 1-2.2 5",
        owner_only: true,
    },
    NavItem {
        section: Section::Fleet,
        label: "Fleet",
        href: "/dashboard/fleet",
        icon: "M10 3h4v4h-4zM3 17h4v4H3zM17 17h4v4h-4zM12 7v5M5 17v-5h14v5",
        owner_only: true,
    },
];

fn icon(path: &str) -> Markup {
    html! {
        svg.icon viewBox="0 0 24 24" aria-hidden="true" focusable="false" {
            path d=(path) {}
        }
    }
}

/// A whole HTML document around `body`.
pub fn document(title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · Tributary" }
                link rel="stylesheet" href="/dashboard/assets/app.css";
                script src="/dashboard/assets/app.js" defer {}
            }
            body { (body) }
        }
    }
}

/// The page of a signed-in member: sidebar, header with the title and `actions`, content.
pub struct Shell<'a> {
    pub viewer: &'a Viewer,
    pub section: Section,
    pub title: &'a str,
    /// The app the page is about, named under the title.
    pub app: Option<&'a App>,
}

impl Shell<'_> {
    /// A page about no app in particular, without header actions: `content` under `title`.
    pub fn plain(viewer: &Viewer, section: Section, title: &str, content: Markup) -> Markup {
        let shell = Shell {
            viewer,
            section,
            title,
            app: None,
        };
        shell.render(html! {}, content)
    }

    pub fn render(&self, actions: Markup, content: Markup) -> Markup {
        let role = self.viewer.user.role;
        let body = html! {
            a.skip href="#main" { "Skip to content" }
            div.layout {
                nav.sidebar aria-label="Main" { div.sidebar-inner {
                    a.brand href="/dashboard" {
                        span.logo aria-hidden="true" { "≋" } span { "Tributary" }
                    }
                    ul.nav {
                        @for item in NAV.iter().filter(|i| !i.owner_only || role.manages_keys()) {
                            li {
                                a href=(item.href)
                                    aria-current=[(item.section == self.section).then_some("page")] {
                                    (icon(item.icon)) span { (item.label) }
                                }
                            }
                        }
                    }
                    div.who {
                        span.avatar aria-hidden="true" { (initial(&self.viewer.user.name)) }
                        span.who-text {
                            strong { a href="/dashboard/account" title="Your account" { (self.viewer.user.name) } }
                            small { (self.viewer.user.role.name()) }
                        }
                        form method="post" action="/dashboard/sign-out" {
                            (csrf_field(&self.viewer.session.csrf))
                            button.link type="submit" { "Sign out" }
                        }
                    }
                } }
                main #main tabindex="-1" {
                    header.page-head {
                        div {
                            @if let Some(app) = self.app {
                                p.eyebrow { a href="/dashboard/apps" { "Apps" } " / " (app.name) }
                            }
                            h1 { (self.title) }
                        }
                        div.actions { (actions) }
                    }
                    (content)
                }
            }
        };
        document(self.title, body)
    }
}

fn initial(name: &str) -> String {
    name.chars()
        .next()
        .map(|c| c.to_uppercase().to_string())
        .unwrap_or_default()
}

/// 200 with an HTML page.
pub fn ok(page: Markup) -> HttpResponse {
    html_response(&mut HttpResponse::Ok(), page)
}

/// An HTML answer; pages are never cached (they show private data). Marked as carrying its own
/// error body, so the request middleware does not replace a 4xx page by the JSON envelope.
pub fn html_response(res: &mut HttpResponseBuilder, page: Markup) -> HttpResponse {
    let mut res = res
        .insert_header((header::CONTENT_TYPE, "text/html; charset=utf-8"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("x-frame-options", "DENY"))
        .insert_header(("referrer-policy", "same-origin"))
        .insert_header((
            "content-security-policy",
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
        ))
        .body(page.into_string());
    res.extensions_mut().insert(Enveloped);
    res
}

/// 303 to `to` (after a successful POST).
pub fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .finish()
}

/// The hidden CSRF input of every form.
pub fn csrf_field(token: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(token); }
}

/// The message for `field` among `errors`, if any.
pub fn error_for<'a>(errors: &'a [FieldError], field: &str) -> Option<&'a str> {
    errors
        .iter()
        .find(|e| e.field == field)
        .map(|e| e.message.as_str())
}

/// A labelled input with its error (if any) right under it, tied by `aria-describedby`;
/// `extra` (a hint) sits between them.
pub fn field(
    label: &str,
    name: &str,
    kind: &str,
    value: &str,
    errors: &[FieldError],
    extra: Markup,
) -> Markup {
    labelled(
        &format!("f-{name}"),
        label,
        (name, kind, value),
        errors,
        extra,
    )
}

/// `field` with its own element id, for pages with several forms holding the same names; the
/// label may be markup (a visible word and a screen-reader remainder).
pub fn field_with_id(
    id: &str,
    label: impl maud::Render,
    name: &str,
    kind: &str,
    value: &str,
    errors: &[FieldError],
) -> Markup {
    labelled(id, label, (name, kind, value), errors, html! {})
}

/// `field` and `field_with_id`: the input `(name, type, value)` with id `id`.
fn labelled(
    id: &str,
    label: impl maud::Render,
    (name, kind, value): (&str, &str, &str),
    errors: &[FieldError],
    extra: Markup,
) -> Markup {
    let err = error_for(errors, name);
    let err_id = format!("{id}-error");
    html! {
        div.field.invalid[err.is_some()] {
            label for=(id) { (label) }
            input #(id) name=(name) type=(kind) value=(value)
                aria-invalid=[err.map(|_| "true")]
                aria-describedby=[err.map(|_| err_id.as_str())];
            (extra)
            @if let Some(m) = err { p.field-error #(err_id) { (m) } }
        }
    }
}

/// A notice above a form: every error that belongs to no shown field.
pub fn form_errors(errors: &[FieldError], shown: &[&str]) -> Markup {
    let rest: Vec<&FieldError> = errors
        .iter()
        .filter(|e| !shown.contains(&e.field.as_str()))
        .collect();
    html! {
        @if !rest.is_empty() {
            div.notice.danger role="alert" {
                @for e in rest { p { (e.message) } }
            }
        }
    }
}

/// A secret shown once, with a copy button (`app.js`).
pub fn secret_box(id: &str, label: &str, secret: &str) -> Markup {
    html! {
        div.secret {
            label for=(id) { (label) }
            div.copy-row {
                input #(id) type="text" readonly value=(secret) spellcheck="false";
                button.button type="button" data-copy=(format!("#{id}")) { "Copy" }
            }
        }
    }
}

/// A usage bar: `used` of `limit` (unlimited when `None`), as an SVG drawn on the server.
pub fn usage_bar(label: &str, used: u64, limit: Option<u64>) -> Markup {
    let share = limit.map(|l| {
        if l == 0 {
            1.0
        } else {
            (used as f64 / l as f64).min(1.0)
        }
    });
    let width = share.map(|s| (s * 100.0).round()).unwrap_or(0.0);
    let tone = match share {
        Some(s) if s >= 0.9 => "bar-danger",
        Some(s) if s >= 0.7 => "bar-warn",
        _ => "bar-ok",
    };
    let text = match limit {
        Some(l) => format!("{} of {}", thousands(used), thousands(l)),
        None => format!("{} · unlimited", thousands(used)),
    };
    html! {
        div.usage {
            div.usage-text { span { (label) } span.muted { (text) } }
            svg.bar viewBox="0 0 100 6" preserveAspectRatio="none" role="img"
                aria-label=(format!("{label}: {text}")) {
                rect.bar-track x="0" y="0" width="100" height="6" rx="3" {}
                rect class=(tone) x="0" y="0" width=(width) height="6" rx="3" {}
            }
        }
    }
}

/// 1234567 as "1 234 567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

/// 1536 as "1.5 KiB".
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A timestamp as "2026-11-23 14:05 UTC".
pub fn when(t: crate::ids::Timestamp) -> String {
    t.time().format("%Y-%m-%d %H:%M UTC").to_string()
}

/// `GET /dashboard/assets/{name}`: the stylesheet and the script, cached for an hour.
pub async fn asset(name: actix_web::web::Path<String>) -> HttpResponse {
    let (body, kind) = match name.as_str() {
        "app.css" => (CSS, "text/css; charset=utf-8"),
        "app.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return HttpResponse::NotFound().finish(),
    };
    HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, kind))
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .body(body)
}

/// Markup from a trusted constant (inline SVG).
pub fn raw(s: &'static str) -> PreEscaped<&'static str> {
    PreEscaped(s)
}
