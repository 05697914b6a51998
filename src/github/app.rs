//! GitHub App authentication: with an `app-id` and its `private-key`, dagexec acts as the app's
//! installation on the repository instead of as `GITHUB_TOKEN`, so that the rounds it pushes
//! trigger the pull request's own CI (pushes made with `GITHUB_TOKEN` do not).
//!
//! The exchange is GitHub's documented one: an RS256 JWT signed with the app's private key
//! ([`app_jwt`]), the repository's installation (`apps/get-repo-installation`), then an
//! installation access token (`apps/create-installation-access-token`), scoped to the one
//! repository ([`installation_token`]).
//!
//! Secrets: the JWT and the installation token only ever live in a [`Token`] (redacted `Debug`
//! and `Display`); errors never quote the private key. Masking the installation token in the
//! log (`::add-mask::`) is the caller's job, right after it gets it:
//! `crate::actions::runtime::mask(&token)`. Installation tokens expire after one hour.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use http::Method;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use serde_json::{Value, json};

use super::{ApiError, Client, RepoName, Token};

/// Seconds the JWT's `iat` is put in the past, for clock drift (GitHub's recommendation).
pub const JWT_BACKDATE: u64 = 60;
/// Seconds from now until the JWT expires: under GitHub's ten-minute ceiling, with margin.
pub const JWT_LIFETIME: u64 = 540;

/// Why an app JWT could not be made. The messages never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the GitHub App id is empty: set `app-id` to the app's ID or client ID")]
    NoAppId,
    #[error(
        "the GitHub App private key is not usable: {0} (expected the app's PEM private key, \
         `-----BEGIN RSA PRIVATE KEY-----` or `-----BEGIN PRIVATE KEY-----`)"
    )]
    BadKey(String),
}

impl From<AppError> for ApiError {
    fn from(e: AppError) -> ApiError {
        ApiError::Invalid {
            op: "GitHub App JWT".into(),
            message: e.to_string(),
        }
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iat: u64,
    exp: u64,
    iss: &'a str,
}

/// An RS256 JWT for the GitHub App `app_id` (its numeric ID or its client ID, sent as the
/// string `iss`), signed with `pem` (PKCS#1 or PKCS#8 PEM), issued at `now - 60` and expiring
/// at `now + 540` (epoch seconds), as GitHub requires.
pub fn app_jwt(app_id: &str, pem: &str, now: u64) -> Result<Token, AppError> {
    let app_id = app_id.trim();
    if app_id.is_empty() {
        return Err(AppError::NoAppId);
    }
    let der = rsa_private_key_der(pem)?;
    let claims = Claims {
        iat: now.saturating_sub(JWT_BACKDATE),
        exp: now + JWT_LIFETIME,
        iss: app_id,
    };
    let key = EncodingKey::from_rsa_der(&der);
    // The key is only parsed (by ring) when signing; its errors name the problem, not the key.
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key)
        .map(Token::new)
        .map_err(|e| AppError::BadKey(format!("not a valid RSA private key ({e})")))
}

/// The installation access token of GitHub App `app_id` on `repo`, scoped to that repository,
/// through the API at `api_url` (`GITHUB_API_URL`). The token is not masked here: the caller
/// masks it (`crate::actions::runtime::mask`) before anything else can print it.
///
/// Fails naming the operation: a bad key or app id before any call; GitHub's 401 when it rejects
/// the JWT (wrong app id, or a key that is not the app's); 404 when the app is not installed on
/// the repository.
pub async fn installation_token(
    api_url: &str,
    repo: &RepoName,
    app_id: &str,
    pem: &str,
) -> Result<Token, ApiError> {
    let jwt = app_jwt(app_id, pem, now())?;
    let mut client = Client::new(api_url, &jwt, repo.clone())?;
    // Rate-limit waits must leave the JWT (valid 9 minutes) alive for both calls.
    client.policy.max_wait = client.policy.max_wait.min(Duration::from_secs(180));

    const GET: &str = "apps/get-repo-installation";
    let installation = client
        .rest(GET, Method::GET, &client.repo_path("/installation"), None)
        .await
        .map_err(|e| {
            explain(e, |status| match status {
                401 => Some(format!(
                    "GitHub rejected the JWT of app `{}`: check that `app-id` and `private-key` belong to the same GitHub App",
                    app_id.trim()
                )),
                404 => Some(format!(
                    "the GitHub App `{}` is not installed on {repo}",
                    app_id.trim()
                )),
                _ => None,
            })
        })?;
    let id = installation
        .get("id")
        .and_then(Value::as_u64)
        .ok_or_else(|| ApiError::Invalid {
            op: GET.into(),
            message: "GitHub's answer has no installation `id`".into(),
        })?;

    const CREATE: &str = "apps/create-installation-access-token";
    let body = json!({ "repositories": [repo.name] });
    let answer = client
        .rest(
            CREATE,
            Method::POST,
            &format!("/app/installations/{id}/access_tokens"),
            Some(&body),
        )
        .await?;
    match answer.get("token").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => Ok(Token::new(t)),
        _ => Err(ApiError::Invalid {
            op: CREATE.into(),
            message: "GitHub's answer has no `token`".into(),
        }),
    }
}

/// Adds a hint to a status error that has none.
fn explain(e: ApiError, hint: impl FnOnce(u16) -> Option<String>) -> ApiError {
    match e {
        ApiError::Status {
            op,
            status,
            message,
            why: None,
        } => ApiError::Status {
            op,
            status,
            message,
            why: hint(status),
        },
        other => other,
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The PKCS#1 DER of an RSA private key given as PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8
/// (`PRIVATE KEY`) PEM. Text around the block is ignored; a secret pasted with literal `\n`
/// escapes is accepted.
fn rsa_private_key_der(pem: &str) -> Result<Vec<u8>, AppError> {
    let bad = |why: &str| AppError::BadKey(why.to_string());
    let unescaped;
    let pem = if !pem.contains('\n') && pem.contains("\\n") {
        unescaped = pem.replace("\\n", "\n");
        &unescaped
    } else {
        pem
    };
    let pem = pem.trim();
    if pem.is_empty() {
        return Err(bad("it is empty"));
    }
    let start = pem
        .find("-----BEGIN ")
        .ok_or_else(|| bad("no `-----BEGIN …-----` line"))?;
    let after = &pem[start + "-----BEGIN ".len()..];
    let label_end = after
        .find("-----")
        .ok_or_else(|| bad("a malformed `-----BEGIN …-----` line"))?;
    let label = &after[..label_end];
    if label.is_empty()
        || !label
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ' ' || c == '#')
    {
        // Quote nothing: a mangled line may run into the key itself.
        return Err(bad("a malformed `-----BEGIN …-----` line"));
    }
    let body = &after[label_end + 5..];
    let end_line = format!("-----END {label}-----");
    let body = &body[..body
        .find(&end_line)
        .ok_or_else(|| bad(&format!("no `{end_line}` line")))?];
    let pkcs8 = match label {
        "RSA PRIVATE KEY" => false,
        "PRIVATE KEY" => true,
        "ENCRYPTED PRIVATE KEY" => {
            return Err(bad(
                "it is encrypted; give the unencrypted key GitHub generated",
            ));
        }
        l if l.contains("PUBLIC KEY") => {
            return Err(bad("it is a public key; the app's private key is needed"));
        }
        l => {
            // The label is a PEM header word, not key material.
            let l: String = l.chars().take(40).collect();
            return Err(AppError::BadKey(format!(
                "a `{l}` block is not an RSA private key"
            )));
        }
    };
    if body.lines().any(|l| l.contains(':')) {
        // RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`) mean a legacy encrypted key.
        return Err(bad(
            "it is encrypted; give the unencrypted key GitHub generated",
        ));
    }
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| bad("its body is not valid base64"))?;
    if pkcs8 {
        pkcs8_rsa_inner(&der).ok_or_else(|| bad("a PKCS#8 key that is not an RSA key"))
    } else {
        Ok(der)
    }
}

/// `rsaEncryption`, 1.2.840.113549.1.1.1.
const RSA_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];

/// The PKCS#1 key inside a PKCS#8 `PrivateKeyInfo` (RFC 5208) whose algorithm is RSA.
fn pkcs8_rsa_inner(der: &[u8]) -> Option<Vec<u8>> {
    let (0x30, info, _) = der_next(der)? else {
        return None;
    };
    let (0x02, _version, rest) = der_next(info)? else {
        return None;
    };
    let (0x30, alg, rest) = der_next(rest)? else {
        return None;
    };
    let (0x06, oid, _) = der_next(alg)? else {
        return None;
    };
    if oid != RSA_OID {
        return None;
    }
    let (0x04, key, _) = der_next(rest)? else {
        return None;
    };
    Some(key.to_vec())
}

/// One DER element: (tag, contents, what follows).
fn der_next(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    const KEY: &str = include_str!("../../tests/fixtures/app-key.pem");

    /// (n, e) of a PKCS#1 RSA private key, without DER's leading zero.
    fn public_parts(pkcs1: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (_, seq, _) = der_next(pkcs1).unwrap();
        let (_, _version, rest) = der_next(seq).unwrap();
        let (_, n, rest) = der_next(rest).unwrap();
        let (_, e, _) = der_next(rest).unwrap();
        let strip = |b: &[u8]| b.iter().skip_while(|&&x| x == 0).copied().collect();
        (strip(n), strip(e))
    }

    fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = contents.len();
        if len < 0x80 {
            out.push(len as u8);
        } else {
            let bytes: Vec<u8> = len
                .to_be_bytes()
                .into_iter()
                .skip_while(|&b| b == 0)
                .collect();
            out.push(0x80 | bytes.len() as u8);
            out.extend(bytes);
        }
        out.extend_from_slice(contents);
        out
    }

    /// The fixture re-wrapped as PKCS#8 `PRIVATE KEY` PEM.
    fn pkcs8_pem(pkcs1: &[u8]) -> String {
        let alg = der(0x30, &[der(0x06, RSA_OID), vec![0x05, 0x00]].concat());
        let info = der(0x30, &[der(0x02, &[0]), alg, der(0x04, pkcs1)].concat());
        let b64 = base64::engine::general_purpose::STANDARD.encode(info);
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            lines.join("\n")
        )
    }

    #[derive(serde::Deserialize)]
    struct Seen {
        iat: u64,
        exp: u64,
        iss: String,
    }

    fn verify(jwt: &Token, pkcs1: &[u8]) -> Seen {
        let header = jsonwebtoken::decode_header(jwt.expose()).unwrap();
        assert_eq!(header.alg, Algorithm::RS256);
        assert_eq!(header.typ.as_deref(), Some("JWT"));
        let (n, e) = public_parts(pkcs1);
        let mut v = Validation::new(Algorithm::RS256);
        // The test's `now` is in the past; the claims are checked by hand below.
        v.validate_exp = false;
        v.required_spec_claims.clear();
        jsonwebtoken::decode::<Seen>(
            jwt.expose(),
            &DecodingKey::from_rsa_raw_components(&n, &e),
            &v,
        )
        .expect("the JWT verifies with the key's public half")
        .claims
    }

    #[test]
    fn jwt_is_rs256_with_githubs_claims() {
        let now = 1_700_000_000;
        let jwt = app_jwt(" 123456\n", KEY, now).unwrap();
        assert_eq!(format!("{jwt:?}"), "Token(***)");
        let claims = verify(&jwt, &rsa_private_key_der(KEY).unwrap());
        assert_eq!(claims.iss, "123456");
        assert_eq!(claims.iat, now - 60);
        assert_eq!(claims.exp, now + 540);
        assert!(claims.exp - now <= 600);
        // `iss` is a string, client IDs included.
        let jwt = app_jwt("Iv23liAbCdEf", KEY, now).unwrap();
        assert_eq!(
            verify(&jwt, &rsa_private_key_der(KEY).unwrap()).iss,
            "Iv23liAbCdEf"
        );
    }

    #[test]
    fn pkcs8_and_escaped_newlines_are_accepted() {
        let pkcs1 = rsa_private_key_der(KEY).unwrap();
        let p8 = pkcs8_pem(&pkcs1);
        assert_eq!(rsa_private_key_der(&p8).unwrap(), pkcs1);
        let jwt = app_jwt("1", &p8, 1_700_000_000).unwrap();
        assert_eq!(verify(&jwt, &pkcs1).iss, "1");
        // A secret stored with literal `\n`s.
        let escaped = p8.replace('\n', "\\n");
        assert_eq!(rsa_private_key_der(&escaped).unwrap(), pkcs1);
    }

    #[test]
    fn bad_keys_fail_without_echoing_the_key() {
        let body_line = KEY
            .lines()
            .find(|l| l.starts_with("MII"))
            .unwrap()
            .to_string();
        // Corrupt the key's body but keep valid base64, so ring rejects the key itself.
        let corrupt = KEY.replacen(&body_line, &"A".repeat(body_line.len()), 1);
        let truncated: String = {
            let mut lines: Vec<&str> = KEY.lines().collect();
            lines.retain(|l| !l.starts_with("MII"));
            lines.join("\n")
        };
        let not_base64 = KEY.replacen(&body_line, &format!("{}!!", &body_line[2..]), 1);
        let cases = [
            ("", "empty"),
            ("ghp_notakey", "no `-----BEGIN"),
            ("-----BEGIN MIIsecret+/0-----\nMII\n-----END", "malformed"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIsecret\n",
                "no `-----END RSA PRIVATE KEY-----`",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nMIIsecret\n-----END PUBLIC KEY-----",
                "public key",
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blsecret\n-----END OPENSSH PRIVATE KEY-----",
                "`OPENSSH PRIVATE KEY` block",
            ),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIsecret\n-----END ENCRYPTED PRIVATE KEY-----",
                "encrypted",
            ),
            (&not_base64, "not valid base64"),
            (&corrupt, "not a valid RSA private key"),
            (&truncated, "not a valid RSA private key"),
            (
                "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----",
                "not an RSA key",
            ),
        ];
        for (pem, want) in cases {
            let e = app_jwt("1", pem, 1_700_000_000).unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
            assert!(e.contains("private key is not usable"), "{e}");
            assert!(!e.contains("secret") && !e.contains("b3Bl"), "{e}");
            assert!(!e.contains(&body_line[..20]), "{e}");
            let as_api: ApiError = AppError::BadKey(e.clone()).into();
            assert!(as_api.to_string().starts_with("GitHub App JWT: "));
        }
        assert!(matches!(
            app_jwt("  ", KEY, 1_700_000_000),
            Err(AppError::NoAppId)
        ));
    }

    #[test]
    fn der_lengths_in_long_form_parse() {
        let long = der(0x04, &[7; 300]);
        let (tag, contents, rest) = der_next(&long).unwrap();
        assert_eq!((tag, contents.len(), rest.len()), (0x04, 300, 0));
        assert!(der_next(&long[..100]).is_none());
        assert!(der_next(&[0x30]).is_none());
    }
}
