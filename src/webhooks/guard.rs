//! The SSRF guard: no delivery to an address inside the operator's network unless
//! `webhooks.allow_private`. Checked on the URL when an endpoint is saved, and again at every
//! delivery AFTER DNS resolution: the HTTP client resolves through [`GuardedResolver`], which
//! refuses a name with any refused address, so the connection goes only to checked addresses
//! (an IP literal never reaches a resolver: [`check_literal`] before sending). No redirects are
//! followed and no proxy is used (`deliver.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Why an address is refused (`None`: public, allowed).
pub fn refused(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refused_v4(v4),
        IpAddr::V6(v6) => refused_v6(v6),
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match () {
        _ if a == 0 => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if ip.is_private() => "private",
        _ if ip.is_link_local() => "link-local",
        _ if a == 100 && (64..128).contains(&b) => "CGNAT (shared address space)",
        _ if ip.is_multicast() => "multicast",
        _ if a >= 240 => "reserved or broadcast",
        _ => return None,
    })
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return refused_v4(v4);
    }
    let s = ip.segments();
    // NAT64 (64:ff9b::/96) reaches the IPv4 address it embeds.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [a, b] = s[6].to_be_bytes();
        let [c, d] = s[7].to_be_bytes();
        return refused_v4(Ipv4Addr::new(a, b, c, d));
    }
    Some(match () {
        _ if ip.is_unspecified() => "unspecified",
        _ if ip.is_loopback() => "loopback",
        _ if s[0] & 0xfe00 == 0xfc00 => "unique local (ULA)",
        _ if s[0] & 0xffc0 == 0xfe80 => "link-local",
        _ if s[0] & 0xffc0 == 0xfec0 => "site-local",
        _ if ip.is_multicast() => "multicast",
        // ::a.b.c.d (IPv4-compatible, deprecated) and the rest of ::/96.
        _ if s[..6] == [0; 6] => "IPv4-compatible",
        _ => return None,
    })
}

/// The refusal message of `ip`.
fn message(ip: IpAddr, why: &str) -> String {
    format!("{ip}, a {why} address (set webhooks.allow_private to allow it)")
}

/// The host of `url` when it is an IP address.
fn literal(url: &reqwest::Url) -> Option<IpAddr> {
    url.host_str()?.trim_matches(['[', ']']).parse().ok()
}

/// An IP-literal host of `url` that is refused (`Some(why)`); a name is the resolver's.
pub fn check_literal(url: &reqwest::Url, allow_private: bool) -> Result<(), String> {
    let Some(ip) = literal(url) else {
        return Ok(());
    };
    match refused(ip).filter(|_| !allow_private) {
        Some(why) => Err(message(ip, why)),
        None => Ok(()),
    }
}

/// Resolves `host` and checks every address (`allow_private`: none refused).
pub async fn resolve(host: &str, allow_private: bool) -> Result<Vec<SocketAddr>, String> {
    let found = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::lookup_host((host.trim_matches(['[', ']']), 0)),
    )
    .await
    .map_err(|_| format!("{host} did not resolve in time"))?
    .map_err(|e| format!("{host} does not resolve: {e}"))?;
    let addrs: Vec<SocketAddr> = found.collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    if !allow_private {
        for a in &addrs {
            if let Some(why) = refused(a.ip()) {
                return Err(format!("{host} resolves to {}", message(a.ip(), why)));
            }
        }
    }
    Ok(addrs)
}

/// Whether an endpoint's URL may be saved: its literal address, or every address its name
/// resolves to now, allowed (with `allow_private`, nothing is checked).
pub async fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    let url = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
    check_literal(&url, false)?;
    match (literal(&url), url.host_str()) {
        (None, Some(name)) => resolve(name, false).await.map(|_| ()),
        _ => Ok(()),
    }
}

/// The delivery client's resolver: a name with any refused address fails to resolve.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow_private;
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = resolve(&name, allow)
                .await
                .map_err(Box::<dyn std::error::Error + Send + Sync>::from)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_and_special_addresses_are_refused_and_public_ones_pass() {
        let refused_ones = [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.0.9",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.254",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "::127.0.0.1",
        ];
        for ip in refused_ones {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(refused(ip).is_some(), "{ip} must be refused");
        }
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "2606:4700:4700::1111",
            "2001:db9::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ];
        for ip in public {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(refused(ip), None, "{ip} is public");
        }
    }

    #[test]
    fn an_ip_literal_is_checked_before_any_resolver() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        for u in [
            "http://127.0.0.1:8080/x",
            "http://[::1]/",
            "https://[::ffff:192.168.0.1]/",
            "http://169.254.169.254/latest/meta-data",
            "http://0x7f000001/",
            "http://2130706433/",
        ] {
            assert!(check_literal(&url(u), false).is_err(), "{u}");
            assert!(check_literal(&url(u), true).is_ok(), "{u} allowed");
        }
        assert!(check_literal(&url("https://93.184.216.34/"), false).is_ok());
        assert!(check_literal(&url("https://hooks.example.com/"), false).is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_is_refused_unless_allowed() {
        let e = check_url("http://localhost:9/hook", false)
            .await
            .unwrap_err();
        assert!(e.contains("loopback"), "{e}");
        assert!(check_url("http://localhost:9/hook", true).await.is_ok());
        assert!(check_url("http://[::1]:9/", false).await.is_err());
    }
}
