//! The client's place (country, and region and city when the database has them) looked up at
//! the edge in a MaxMind-format database (`.mmdb`, `collector.geoip_database`), from the full
//! address before `collector.ip_policy` cuts it: the lake's `country`, `region` and `city`.
//!
//! Both layouts in use are read: MaxMind's GeoIP2/GeoLite2 (`country.iso_code`,
//! `subdivisions[0].names.en`, `city.names.en`) and the ip-location-db packages'
//! (`country_code`, `state1`, `city`). The file is read into memory once, at start.

use std::net::IpAddr;
use std::sync::Arc;

use maxminddb::{PathElement, Reader};

use super::event::{Event, Text};

/// Where an address is, as far as the database knows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    /// ISO 3166-1 alpha-2 code, such as `US`.
    pub country: Option<Arc<str>>,
    pub region: Option<Arc<str>>,
    pub city: Option<Arc<str>>,
}

impl Place {
    /// Gives each event of a request its place.
    pub fn fill<'p>(&'p self, events: &mut [Event<'p>]) {
        let text = |t: &'p Option<Arc<str>>| t.as_deref().map(Text::Borrowed);
        for e in events {
            e.country = text(&self.country);
            e.region = text(&self.region);
            e.city = text(&self.city);
        }
    }
}

/// A loaded database.
pub struct Places {
    reader: Reader<Vec<u8>>,
}

use PathElement::{Index, Key};

const COUNTRY: [&[PathElement<'static>]; 2] =
    [&[Key("country"), Key("iso_code")], &[Key("country_code")]];
const REGION: [&[PathElement<'static>]; 2] = [
    &[Key("subdivisions"), Index(0), Key("names"), Key("en")],
    &[Key("state1")],
];
const CITY: [&[PathElement<'static>]; 2] =
    [&[Key("city"), Key("names"), Key("en")], &[Key("city")]];

impl Places {
    /// The database at `path`; `None` when no path is configured.
    pub fn open(path: &str) -> Result<Option<Places>, String> {
        if path.is_empty() {
            return Ok(None);
        }
        let reader = Reader::open_readfile(path)
            .map_err(|e| format!("collector.geoip_database {path}: {e}"))?;
        Ok(Some(Places { reader }))
    }

    /// The place of `ip` (all `None` where the database has nothing).
    pub fn lookup(&self, ip: IpAddr) -> Place {
        let Ok(found) = self.reader.lookup(ip) else {
            return Place::default();
        };
        if !found.has_data() {
            return Place::default();
        }
        // The first of `paths` that holds a non-empty string (another layout's path fails).
        let first = |paths: [&[PathElement<'_>]; 2]| -> Option<Arc<str>> {
            paths.iter().find_map(|p| {
                let s: String = found.decode_path(p).ok().flatten()?;
                (!s.is_empty()).then(|| s.into())
            })
        };
        Place {
            country: first(COUNTRY),
            region: first(REGION),
            city: first(CITY),
        }
    }
}
