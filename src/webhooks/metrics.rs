//! The webhooks in `/metrics`, read at each scrape from the engine's counters
//! (a `collector::metrics::Section`: no sled on the scrape; the gauges are read by the engine
//! every second).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::engine::Counters;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// The section of `/metrics`.
#[derive(Debug)]
pub struct WebhookSection(pub Arc<Counters>);

impl crate::collector::metrics::Section for WebhookSection {
    fn fill(&self, r: &mut Registry) {
        let c = &self.0;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let gauge = |n: u64| {
            let g: Gauge = Gauge::default();
            g.set(n.try_into().unwrap_or(i64::MAX));
            g
        };
        let events: Counter = Counter::default();
        events.inc_by(load(&c.events));
        let deliveries = Family::<ResultLabel, Counter>::default();
        for (result, n) in [
            ("delivered", &c.delivered),
            ("failed", &c.failed),
            ("given_up", &c.given_up),
        ] {
            deliveries
                .get_or_create(&ResultLabel { result })
                .inc_by(load(n));
        }
        r.register(
            "tributary_webhook_events",
            "Changes fanned out to webhook deliveries (or dropped: no endpoint wanted them)",
            events,
        );
        r.register(
            "tributary_webhook_deliveries",
            "Webhook delivery attempts by result: delivered (2xx), failed (to be retried or given up), given_up (no retry left, or dropped with its disabled endpoint)",
            deliveries,
        );
        r.register(
            "tributary_webhook_pending",
            "Webhook deliveries waiting (to be sent or retried)",
            gauge(load(&c.pending)),
        );
        r.register(
            "tributary_webhook_changes_pending",
            "Changes not yet fanned out to webhook deliveries",
            gauge(load(&c.changes_pending)),
        );
        r.register(
            "tributary_webhook_endpoints_disabled",
            "Webhook endpoints disabled after failing for their whole retry schedule",
            gauge(load(&c.endpoints_disabled)),
        );
    }
}
