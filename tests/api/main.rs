//! Black-box tests: the real server on port 0 with a temporary data dir.
#![allow(
    clippy::too_many_lines,
    reason = "a scenario reads best as one story; the 100-line rule is for src/"
)]

mod accounts;
mod admin;
mod analytics;
mod binary;
mod cli;
mod collector;
mod contacts;
mod crash;
mod dashboard;
mod deletion;
mod disk;
mod enrich;
mod erasure;
mod errors;
mod events;
mod fleet;
mod fleet_views;
mod form_client;
mod helpers;
mod ideas;
mod lake;
mod paths;
mod populate;
mod quota;
mod retention;
mod sdk;
mod security;
mod segment;
mod slow;
mod surveys;
mod webhook_events;
mod webhooks;
mod webhooks_page;
