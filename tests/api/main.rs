//! Black-box tests: the real server on port 0 with a temporary data dir.

mod accounts;
mod admin;
mod analytics;
mod binary;
mod cli;
mod collector;
mod contacts;
mod crash;
mod dashboard;
mod errors;
mod events;
mod helpers;
mod ideas;
mod lake;
mod sdk;
mod security;
mod slow;
mod surveys;
