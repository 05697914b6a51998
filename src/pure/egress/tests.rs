use super::*;

fn on(input: &str) -> Hosts {
    match EgressSetting::parse(input) {
        Ok(EgressSetting::On(h)) => h,
        other => panic!("{input:?}: {other:?}"),
    }
}

#[test]
fn the_input_is_off_the_registries_or_a_list_that_may_keep_them() {
    for off in ["", "  ", "false", "OFF", "\n"] {
        assert_eq!(EgressSetting::parse(off), Ok(EgressSetting::Off), "{off:?}");
    }
    let defaults = on("true");
    assert_eq!(defaults.len(), DEFAULT_HOSTS.len());
    assert_eq!(on("defaults"), defaults);
    assert!(defaults.admit("pypi.org", 443).is_ok());
    // Comma-separated or one per line; `defaults` keeps the registries.
    let own = on("api.example.com, *.corp.example\nPyPI.org.");
    assert_eq!(
        own.entries(),
        ["*.corp.example", "api.example.com", "pypi.org"]
    );
    assert!(own.admit("registry.npmjs.org", 443).is_err());
    let both = on("defaults\napi.example.com");
    assert_eq!(both.len(), DEFAULT_HOSTS.len() + 1);
    assert!(both.admit("registry.npmjs.org", 443).is_ok());
    assert!(both.admit("api.example.com", 443).is_ok());
    // Not a host: said with the input's name and how to write one.
    for bad in [
        "https://pypi.org",
        "pypi.org/simple",
        "*.",
        "*.com",
        "a_b.org",
        "-x.org",
    ] {
        let e = EgressSetting::parse(bad).unwrap_err();
        assert_eq!(e, SettingError::NotAHost(bad.into()), "{bad}");
        assert!(e.to_string().starts_with("the egress input: "), "{e}");
    }
}

#[test]
fn the_proxy_admits_listed_names_on_the_web_ports_only() {
    let h = on("pypi.org, *.example.com, 203.0.113.9");
    assert_eq!(h.admit("PYPI.ORG.", 443), Ok("pypi.org".into()));
    assert_eq!(h.admit("pypi.org", 80), Ok("pypi.org".into()));
    assert_eq!(
        h.admit("pypi.org", 22),
        Err(("pypi.org".into(), Refusal::Port(22)))
    );
    // A wildcard is every name below the domain, not the domain, nor a look-alike.
    assert!(h.admit("a.b.example.com", 443).is_ok());
    for refused in [
        "example.com",
        "badexample.com",
        "example.com.evil.org",
        "pypi.org.evil.org",
    ] {
        assert_eq!(
            h.admit(refused, 443),
            Err((refused.into(), Refusal::NotListed)),
            "{refused}"
        );
    }
    // An address is admitted only when listed as itself.
    assert!(h.admit("203.0.113.9", 443).is_ok());
    assert!(h.admit("[::1]", 443).is_err());
    // What a hostile client sends as a host is recorded made safe.
    let (name, why) = h.admit("evil\u{1b}[31m.org", 443).unwrap_err();
    assert_eq!(why, Refusal::NotListed);
    assert!(!name.contains('\u{1b}'), "{name:?}");
}

#[test]
fn only_public_addresses_are_reached_never_this_machine_or_a_private_network() {
    let refused = [
        "127.0.0.1",
        "127.8.9.10",
        "0.0.0.0",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "198.18.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "240.0.0.1",
        "::1",
        "::",
        "fd00::2",
        "fe80::1",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "64:ff9b::a00:1",
    ];
    for ip in refused {
        assert!(!public(ip.parse().unwrap()), "{ip} passed");
    }
    // The documentation ranges pass (a sandbox resolves its registries into one).
    for ip in [
        "151.101.0.223",
        "8.8.8.8",
        "2a04:4e42::223",
        "::ffff:151.101.0.223",
        "203.0.113.80",
        "2001:db8::1",
    ] {
        assert!(public(ip.parse().unwrap()), "{ip} refused");
    }
}

#[test]
fn a_request_head_is_a_tunnel_or_one_plain_request_rewritten_for_its_server() {
    let t =
        ProxyRequest::parse(b"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n").unwrap();
    assert!(t.tunnel);
    assert_eq!((t.host.as_str(), t.port), ("pypi.org", 443));
    let v6 = ProxyRequest::parse(b"CONNECT [2a04:4e42::223]:443 HTTP/1.1\r\n").unwrap();
    assert_eq!((v6.host.as_str(), v6.port), ("2a04:4e42::223", 443));
    let p = ProxyRequest::parse(
        b"GET http://deb.debian.org/debian/dists?x=1 HTTP/1.1\r\nHost: deb.debian.org\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n",
    )
    .unwrap();
    assert!(!p.tunnel);
    assert_eq!((p.host.as_str(), p.port), ("deb.debian.org", 80));
    assert_eq!(
        String::from_utf8(p.forward).unwrap(),
        "GET /debian/dists?x=1 HTTP/1.1\r\nHost: deb.debian.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    let q = ProxyRequest::parse(b"GET http://user@h.org:8080?q HTTP/1.0\r\n").unwrap();
    assert_eq!((q.host.as_str(), q.port), ("h.org", 8080));
    assert!(
        String::from_utf8(q.forward)
            .unwrap()
            .starts_with("GET /?q HTTP/1.0\r\n")
    );
    for bad in [
        &b"CONNECT pypi.org HTTP/1.1\r\n"[..],
        b"GET https://pypi.org/ HTTP/1.1\r\n",
        b"GET /local HTTP/1.1\r\n",
        b"CONNECT pypi.org:443 SPDY/3\r\n",
        b"CONNECT :443 HTTP/1.1\r\n",
        b"\xff\xfe",
    ] {
        assert!(ProxyRequest::parse(bad).is_err(), "{bad:?}");
    }
}

/// RFC 9112 §3.2.2: a proxy given an absolute-form target ignores the client's `Host` and
/// sends the target's own. Forwarded as written, `Host: other.example` on a request to a listed
/// name that shares its servers (a CDN) reached a host nobody listed.
#[test]
fn a_plain_request_reaches_the_host_its_target_names_whatever_its_host_header_says() {
    let p = ProxyRequest::parse(
        b"GET http://pypi.org/simple/ HTTP/1.1\r\nAccept: */*\r\nHost: evil.example\r\nhost : evil.example\r\n",
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(p.forward).unwrap(),
        "GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    let q = ProxyRequest::parse(b"GET http://u@h.org:8080/ HTTP/1.0\r\n").unwrap();
    assert!(
        String::from_utf8(q.forward)
            .unwrap()
            .starts_with("GET / HTTP/1.0\r\nHost: h.org:8080\r\n")
    );
    // A folded header line could carry a second Host past the check: refused whole.
    assert!(
        ProxyRequest::parse(
            b"GET http://pypi.org/ HTTP/1.1\r\nAccept: */*\r\n Host: evil.example\r\n"
        )
        .is_err()
    );
}

#[test]
fn the_firewall_holds_the_agents_user_to_loopback_and_is_removed_whole() {
    insta::assert_snapshot!(format!(
        "{}{}",
        rules("DAGEXEC-EGRESS-42", 1001, false),
        rules("DAGEXEC-EGRESS-42", 1001, true)
    ));
    // `iptables -S` of a host with this job's chain and a dead job's, and someone else's.
    let listing = "-P OUTPUT ACCEPT\n\
        -N DAGEXEC-EGRESS-42\n\
        -N DAGEXEC-EGRESS-7\n\
        -N OTHER\n\
        -A OUTPUT -m owner --uid-owner 1001 -j DAGEXEC-EGRESS-7\n\
        -A OUTPUT -m owner --uid-owner 1001 -j DAGEXEC-EGRESS-42\n\
        -A OUTPUT -j OTHER\n\
        -A DAGEXEC-EGRESS-7 -d 127.0.0.0/8 -j ACCEPT\n\
        -A DAGEXEC-EGRESS-7 -j REJECT --reject-with icmp-port-unreachable\n";
    assert_eq!(
        removal(listing, &|pid| pid == "7").unwrap(),
        "*filter\n-D OUTPUT -m owner --uid-owner 1001 -j DAGEXEC-EGRESS-7\n-F DAGEXEC-EGRESS-7\n-X DAGEXEC-EGRESS-7\nCOMMIT\n"
    );
    assert_eq!(removal(listing, &|_| false), None);
    assert_eq!(removal("-P OUTPUT ACCEPT\n-N OTHER\n", &|_| true), None);
    let counted = "Chain DAGEXEC-EGRESS-42 (1 references)\n\
        \x20   pkts      bytes target     prot opt in     out     source               destination\n\
        \x20      1       60 REJECT     17   --  *      *       0.0.0.0/0            127.0.0.0/8          udp dpt:53\n\
        \x20     12      720 ACCEPT     0    --  *      *       0.0.0.0/0            127.0.0.0/8\n\
        \x20      2      108 REJECT     0    --  *      *       0.0.0.0/0            0.0.0.0/0\n";
    assert_eq!(refused_packets(counted), Some(3));
    assert_eq!(refused_packets("no chain"), None);
}
