//! The times of an event: ISO 8601 read fast for what trackers send (chrono for the rest), the
//! range an event's time must fall in, and the clock-skew correction.

use chrono::DateTime;

/// The first instant after the latest time an event may carry (2100-01-01T00:00:00Z, µs).
pub const MAX_TIME: i64 = 4_102_444_800_000_000;

pub(super) fn parse_time(s: &str) -> Option<i64> {
    utc_time(s.as_bytes()).or_else(|| {
        DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_micros())
    })
}

/// The fast path of [`parse_time`], for what trackers send: `YYYY-MM-DDTHH:MM:SS[.f]Z` (1 to 9
/// fraction digits, truncated to µs as chrono does). `None` for any other form, which chrono
/// then reads (offsets, lower-case separators, leap seconds) or refuses.
fn utc_time(s: &[u8]) -> Option<i64> {
    fn num(s: &[u8]) -> Option<i64> {
        s.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
        })
    }
    let (head, tail) = s.split_at_checked(19)?;
    if [head[4], head[7], head[10], head[13], head[16]] != *b"--T::" {
        return None;
    }
    let (year, month, day) = (num(&head[..4])?, num(&head[5..7])?, num(&head[8..10])?);
    let (hour, minute, second) = (
        num(&head[11..13])?,
        num(&head[14..16])?,
        num(&head[17..19])?,
    );
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=days_in_month).contains(&day) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let micros = match tail {
        [b'Z'] => 0,
        [b'.', digits @ .., b'Z'] if (1..=9).contains(&digits.len()) => {
            let n = num(digits)?;
            let scale = 10i64.pow(9 - digits.len() as u32);
            n * scale / 1000
        }
        _ => return None,
    };
    // Days from 1970-01-01 to the date (the proleptic Gregorian calendar, H. Hinnant's method).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros)
}

/// The earliest time an event may carry (2000-01-01T00:00:00Z, µs); earlier is an error.
pub const MIN_TIME: i64 = 946_684_800_000_000;
/// A client clock may run this far ahead of the server before its timestamp is distrusted.
const MAX_AHEAD: i64 = 10 * 60 * 1_000_000;
/// The longest an event may wait in a client (offline, stored, retried) and still have its
/// time corrected for clock skew.
const MAX_CLIENT_DELAY: i64 = 30 * 86_400 * 1_000_000;

/// The event's time: `receivedAt - (sentAt - timestamp)` (clock-skew correction, as Segment and
/// Snowplow do) when the client's two clocks readings are consistent (sent after created, at
/// most 30 days apart); otherwise the client's timestamp when it is not in the future; else
/// `receivedAt`. The client's value is always kept in `original_timestamp`.
pub fn event_time(original: Option<i64>, sent_at: Option<i64>, received_at: i64) -> i64 {
    let Some(orig) = original else {
        return received_at;
    };
    if let Some(sent) = sent_at {
        let delay = sent.saturating_sub(orig);
        if (0..=MAX_CLIENT_DELAY).contains(&delay) {
            return received_at - delay;
        }
    }
    if orig <= received_at.saturating_add(MAX_AHEAD) {
        orig
    } else {
        received_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_time_path_reads_what_chrono_reads() {
        let chrono = |s: &str| {
            DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.timestamp_micros())
        };
        let mut cases: Vec<String> = [
            "2026-11-23T10:11:12Z",
            "2026-11-23T10:11:12.5Z",
            "2026-11-23T10:11:12.123456Z",
            "2026-11-23T10:11:12.123456789Z",
            "2026-11-23T10:11:12.1234567891Z",
            "2024-02-29T23:59:59.999Z",
            "2023-02-29T00:00:00Z",
            "2000-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999999Z",
            "2099-12-31T23:59:59Z",
            "2026-13-01T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:60:00Z",
            "2026-01-01T00:00:60Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00z",
            "2026-01-01t00:00:00Z",
            "2026-01-01T00:00:00+02:00",
            "2026-01-01 00:00:00Z",
            "2026-1-01T00:00:00Z",
            "+026-01-01T00:00:00Z",
            "2026-01-01T00:00:00",
            "",
        ]
        .map(String::from)
        .to_vec();
        // Every day of four years (a leap year and a century among them), at varied times.
        for (y, m, d) in (1999..2003)
            .chain([1900, 2100])
            .flat_map(|y| (1..=12).flat_map(move |m| (1..=31).map(move |d| (y, m, d))))
        {
            cases.push(format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                d % 24,
                m * 4,
                d + m,
                d * 7
            ));
        }
        for s in &cases {
            assert_eq!(parse_time(s), chrono(s), "{s}");
            if let Some(fast) = utc_time(s.as_bytes()) {
                assert_eq!(Some(fast), chrono(s), "{s}");
            }
        }
        assert_eq!(
            utc_time(b"2026-11-23T10:11:12.5Z"),
            chrono("2026-11-23T10:11:12.5Z")
        );
        assert!(utc_time(b"2026-11-23T10:11:12+00:00").is_none());
    }
}
