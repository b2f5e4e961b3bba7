//! The visitor's user agent, judged at the edge before the WAL: browser and version, OS, device
//! class and a bot flag, the lake's `browser`, `browser_version`, `os`, `device_class` and
//! `is_bot` columns (and `is_bot` keeps a row out of the traffic rollups, unless
//! `collector.count_bots`).
//!
//! The user agent judged is the visitor's browser: `context.userAgent` when an SDK forwards one,
//! else the request's `User-Agent`. A server's HTTP library (`analytics-node`, `python-requests`,
//! `Go-http-client`, `curl`...) is no visitor: its events get no agent columns and are never
//! flagged. Parsing is woothee's (regular expressions: about 3.5 µs for a browser's agent, half
//! the collector's whole cost per event), so verdicts are kept per HTTP worker thread by
//! user-agent string, at most [`CACHE_ENTRIES`] of them: a batch costs one hash lookup per
//! distinct agent (about 0.1 µs) and the events borrow the verdict's text ([`Verdicts`]).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use super::event::{Event, Text};

/// Distinct user agents remembered per thread (at most about 700 bytes each, so at most about
/// 1.4 MB per HTTP worker); when full, the cache starts again empty.
pub const CACHE_ENTRIES: usize = 2048;

/// The longest user agent judged (longer ones are left unjudged: browsers send about 150).
const MAX_AGENT_BYTES: usize = 512;

/// What a user agent says about its visitor. All `None` when it is no visitor's browser (a
/// server library, nothing sent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agent {
    pub browser: Option<Arc<str>>,
    pub browser_version: Option<Arc<str>>,
    pub os: Option<Arc<str>>,
    /// `desktop`, `mobile`, `tablet`, `bot` or `other`.
    pub device_class: Option<Arc<str>>,
    pub is_bot: Option<bool>,
}

/// Prefixes (lowercase) of the HTTP libraries and SDKs that send events from servers.
const SERVER_LIBRARIES: &[&str] = &[
    "analytics-node",
    "analytics-python",
    "analytics-ruby",
    "analytics-go",
    "analytics-java",
    "analytics-php",
    "rudder",
    "segment",
    "python-requests",
    "python-urllib",
    "python-httpx",
    "aiohttp",
    "node-fetch",
    "node",
    "undici",
    "axios",
    "got ",
    "got/",
    "go-http-client",
    "okhttp",
    "curl/",
    "wget/",
    "java/",
    "apache-httpclient",
    "ruby",
    "faraday",
    "guzzlehttp",
    "php/",
    "libwww-perl",
    "dart:io",
    "dart/",
    "reqwest",
    "hyper/",
    "insomnia",
    "postmanruntime",
    "httpie",
];

/// Markers (lowercase) of headless browsers and automation, which woothee reads as the
/// browser they embed.
const AUTOMATION_MARKERS: &[&str] = &[
    "headlesschrome",
    "phantomjs",
    "slimerjs",
    "lighthouse",
    "puppeteer",
    "playwright",
    "selenium",
    "webdriver",
    "cypress",
    "electron-headless",
    "prerender",
    "facebookexternalhit",
    "pingdom",
    "uptimerobot",
];

static PARSER: LazyLock<woothee::parser::Parser> = LazyLock::new(woothee::parser::Parser::new);

/// Whether `ua` is a server's HTTP library rather than a visitor's browser.
fn is_server_library(lower: &str) -> bool {
    SERVER_LIBRARIES.iter().any(|p| lower.starts_with(p))
}

fn text(s: &str) -> Option<Arc<str>> {
    (!s.is_empty() && s != woothee::woothee::VALUE_UNKNOWN).then(|| s.into())
}

/// The OS family, with the device's name folded in (woothee says `iPhone`, `Mac OSX`,
/// `Windows 10`).
fn os_family(os: &str) -> &str {
    match os {
        "iPhone" | "iPad" | "iPod" => "iOS",
        "Mac OSX" | "Mac OS Classic" => "macOS",
        _ if os.starts_with("Windows") => "Windows",
        _ => os,
    }
}

/// Parses one user agent (no cache).
pub fn judge(ua: &str) -> Agent {
    let lower = ua.trim().to_ascii_lowercase();
    if lower.is_empty() || lower.len() > MAX_AGENT_BYTES || is_server_library(&lower) {
        return Agent::default();
    }
    let automated = AUTOMATION_MARKERS.iter().any(|m| lower.contains(m));
    let Some(r) = PARSER.parse(ua) else {
        // Not a browser woothee knows: a bot if it says so, else nothing is judged.
        return match automated {
            true => bot(None, None, None),
            false => Agent::default(),
        };
    };
    if r.name == "HTTP Library" {
        return Agent::default();
    }
    let browser = text(r.name);
    let version = text(r.version);
    let os = text(os_family(r.os));
    if automated || r.category == "crawler" {
        return bot(browser, version, os);
    }
    let class = match r.category {
        "pc" => "desktop",
        "smartphone" if r.os == "iPad" => "tablet",
        "smartphone" if r.os == "Android" && !ua.contains("Mobile") => "tablet",
        "smartphone" | "mobilephone" => "mobile",
        _ => "other",
    };
    Agent {
        browser,
        browser_version: version,
        os,
        device_class: Some(class.into()),
        is_bot: Some(false),
    }
}

fn bot(browser: Option<Arc<str>>, version: Option<Arc<str>>, os: Option<Arc<str>>) -> Agent {
    Agent {
        browser,
        browser_version: version,
        os,
        device_class: Some("bot".into()),
        is_bot: Some(true),
    }
}

/// [`judge`], remembered per thread by user-agent string (at most [`CACHE_ENTRIES`]).
pub fn judged(ua: &str) -> Arc<Agent> {
    thread_local! {
        static CACHE: RefCell<HashMap<Box<str>, Arc<Agent>, ahash::RandomState>> =
            RefCell::new(HashMap::default());
    }
    CACHE.with(|cache| {
        let Ok(mut cache) = cache.try_borrow_mut() else {
            return Arc::new(judge(ua));
        };
        if let Some(a) = cache.get(ua) {
            return a.clone();
        }
        if cache.len() >= CACHE_ENTRIES {
            cache.clear();
        }
        let a = Arc::new(judge(ua));
        cache.insert(ua.into(), a.clone());
        a
    })
}

/// The verdicts on the user agents of a request's events (one per distinct agent in a row),
/// kept while the events borrow their text from them.
#[derive(Debug, Default)]
pub struct Verdicts {
    agents: Vec<Arc<Agent>>,
    /// Per event: its agent's index in `agents`, or none.
    of_event: Vec<Option<usize>>,
}

/// Judges the `user_agent` of each event (the visitor's, see the module comment): one verdict
/// per distinct agent of the batch, from the per-thread cache.
pub fn judge_all(events: &[Event<'_>]) -> Verdicts {
    let mut out = Verdicts {
        agents: Vec::new(),
        of_event: Vec::with_capacity(events.len()),
    };
    let mut last: Option<&str> = None;
    for e in events {
        let index = e.user_agent.as_deref().map(|ua| {
            if last != Some(ua) {
                out.agents.push(judged(ua));
                last = Some(ua);
            }
            out.agents.len() - 1
        });
        out.of_event.push(index);
    }
    out
}

impl Verdicts {
    /// Fills the agent columns of the events judged (in the same order), borrowing the text.
    pub fn fill<'v>(&'v self, events: &mut [Event<'v>]) {
        for (e, index) in events.iter_mut().zip(&self.of_event) {
            let Some(agent) = index.map(|i| &self.agents[i]) else {
                continue;
            };
            let text = |t: &'v Option<Arc<str>>| t.as_deref().map(Text::Borrowed);
            e.browser = text(&agent.browser);
            e.browser_version = text(&agent.browser_version);
            e.os = text(&agent.os);
            e.device_class = text(&agent.device_class);
            e.is_bot = agent.is_bot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESKTOP_CHROME: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
    const IPHONE_SAFARI: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
    const ANDROID_CHROME: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36";
    const GOOGLEBOT: &str =
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";

    /// `browser version os class bot`, `-` for what is not known.
    fn row(a: &Agent) -> String {
        let bot = a.is_bot.map(|b| b.to_string());
        [&a.browser, &a.browser_version, &a.os, &a.device_class]
            .map(|v| v.as_deref().unwrap_or("-").to_owned())
            .join(" ")
            + " "
            + bot.as_deref().unwrap_or("-")
    }

    #[test]
    fn browsers_oses_and_devices_are_read() {
        assert_eq!(
            row(&judge(DESKTOP_CHROME)),
            "Chrome 124.0.0.0 Windows desktop false"
        );
        assert_eq!(row(&judge(IPHONE_SAFARI)), "Safari 17.4 iOS mobile false");
        assert_eq!(
            row(&judge(ANDROID_CHROME)),
            "Chrome 124.0.6367.82 Android mobile false"
        );
        let ipad = "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1";
        assert_eq!(judge(ipad).device_class.as_deref(), Some("tablet"));
        let tab = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
        assert_eq!(judge(tab).device_class.as_deref(), Some("tablet"));
        let mac = "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15";
        assert_eq!(judge(mac).os.as_deref(), Some("macOS"));
    }

    #[test]
    fn crawlers_and_headless_browsers_are_bots() {
        let g = judge(GOOGLEBOT);
        assert_eq!(
            (g.device_class.as_deref(), g.is_bot),
            (Some("bot"), Some(true))
        );
        assert_eq!(g.browser.as_deref(), Some("Googlebot"));
        for ua in [
            "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/124.0.0.0 Safari/537.36",
            "Mozilla/5.0 (Unknown; Linux x86_64) AppleWebKit/538.1 (KHTML, like Gecko) PhantomJS/2.1.1 Safari/538.1",
            "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)",
            "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        ] {
            assert_eq!(judge(ua).is_bot, Some(true), "{ua}");
        }
    }

    #[test]
    fn server_libraries_are_no_visitors() {
        for ua in [
            "analytics-node-next/latest",
            "python-requests/2.32.3",
            "node-fetch/1.0 (+https://github.com/bitinn/node-fetch)",
            "axios/1.7.2",
            "Go-http-client/1.1",
            "curl/8.5.0",
            "node",
            "RudderLabs/node-sdk",
            "",
        ] {
            assert_eq!(judge(ua), Agent::default(), "{ua}");
        }
    }

    #[test]
    fn verdicts_are_shared_within_a_batch_and_cached() {
        let ua: Arc<str> = IPHONE_SAFARI.into();
        let mut events: Vec<Event> = (0..3)
            .map(|i| Event {
                user_agent: Some(Text::Borrowed(&ua)),
                ..Event::example("a", &format!("m{i}"), "v", 0)
            })
            .collect();
        events[1].user_agent = None;
        let verdicts = judge_all(&events);
        verdicts.fill(&mut events);
        assert_eq!(events[0].os.as_deref(), Some("iOS"));
        assert_eq!(events[1].os, None);
        assert_eq!(events[2].device_class.as_deref(), Some("mobile"));
        assert!(Arc::ptr_eq(&judged(IPHONE_SAFARI), &judged(IPHONE_SAFARI)));
    }
}
