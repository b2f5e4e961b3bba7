//! The Contacts section: `table.rs` (the table, a contact's page, the CSV export) and
//! `import.rs` (CSV in).

pub mod import;
pub mod table;
