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
//! `crate::action::runtime::mask(&token)`. Installation tokens expire after one hour.

use std::time::Duration;

use http::Method;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

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
        ApiError::invalid("GitHub App JWT", e.to_string())
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
    let key = rsa_private_key(pem)?;
    let claims = Claims {
        iat: now.saturating_sub(JWT_BACKDATE),
        exp: now + JWT_LIFETIME,
        iss: app_id,
    };
    // The key's numbers are only checked (by ring) when signing; its errors name the
    // problem, not the key.
    jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims, &key)
        .map(Token::new)
        .map_err(|e| AppError::BadKey(format!("not a valid RSA private key ({e})")))
}

/// The installation access token of GitHub App `app_id` on `repo`, scoped to that repository,
/// through the API at `api_url` (`GITHUB_API_URL`). The token is not masked here: the caller
/// masks it (`crate::action::runtime::mask`) before anything else can print it.
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
    let jwt = app_jwt(app_id, pem, super::now())?;
    let mut client = Client::new(api_url, &jwt, repo.clone())?;
    // Rate-limit waits must leave the JWT (valid 9 minutes) alive for both calls.
    client.policy.max_wait = client.policy.max_wait.min(Duration::from_secs(180));

    let installation: super::ops::Id = client
        .get(
            "apps/get-repo-installation",
            &client.repo_path("/installation"),
        )
        .await
        .map_err(|mut e| {
            // A hint for the refusals a wrong app or installation gets.
            let app = app_id.trim();
            if let ApiError::Status { status, why, .. } = &mut e
                && why.is_none()
            {
                *why = match status {
                    401 => Some(format!(
                        "GitHub rejected the JWT of app `{app}`: check that `app-id` and `private-key` belong to the same GitHub App"
                    )),
                    404 => Some(format!("the GitHub App `{app}` is not installed on {repo}")),
                    _ => None,
                };
            }
            e
        })?;

    const CREATE: &str = "apps/create-installation-access-token";
    #[derive(Deserialize)]
    struct Access {
        token: String,
    }
    let access: Access = client
        .send(
            CREATE,
            Method::POST,
            &format!("/app/installations/{}/access_tokens", installation.id),
            &serde_json::json!({ "repositories": [&repo.name] }),
        )
        .await?;
    if access.token.is_empty() {
        return Err(ApiError::invalid(
            CREATE,
            "GitHub's answer has an empty `token`",
        ));
    }
    Ok(Token::new(access.token))
}

/// The signing key of an RSA private key given as PKCS#1 (`RSA PRIVATE KEY`) or PKCS#8
/// (`PRIVATE KEY`) PEM, read by jsonwebtoken. Text around the block is ignored; a secret
/// pasted with literal `\n` escapes is accepted. The block is looked at first (with the `pem`
/// crate jsonwebtoken reads it with) only to say what is wrong with a key that is not one:
/// jsonwebtoken's own error does not tell an encrypted key from a public one. No message
/// quotes the text: a mangled line may run into the key itself.
fn rsa_private_key(pem: &str) -> Result<EncodingKey, AppError> {
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
    if !pem.contains("-----BEGIN ") {
        return Err(bad("no `-----BEGIN …-----` line"));
    }
    let block = ::pem::parse(pem).map_err(|e| {
        bad(match e {
            ::pem::PemError::InvalidData(_) => "its body is not valid base64",
            ::pem::PemError::MismatchedTags(..) => {
                "its `-----BEGIN …-----` and `-----END …-----` lines name different blocks"
            }
            ::pem::PemError::MalformedFraming if !pem.contains("-----END ") => {
                "no `-----END …-----` line"
            }
            _ => "a malformed `-----BEGIN …-----` or `-----END …-----` line",
        })
    })?;
    match block.tag() {
        "RSA PRIVATE KEY" | "PRIVATE KEY" => {}
        "ENCRYPTED PRIVATE KEY" => {
            return Err(bad(
                "it is encrypted; give the unencrypted key GitHub generated",
            ));
        }
        l if l.contains("PUBLIC KEY") => {
            return Err(bad("it is a public key; the app's private key is needed"));
        }
        l if l.len() <= 40 && l.chars().all(|c| c.is_ascii_uppercase() || c == ' ') => {
            // A PEM label of words, not key material.
            return Err(AppError::BadKey(format!(
                "a `{l}` block is not an RSA private key"
            )));
        }
        _ => return Err(bad("a malformed `-----BEGIN …-----` line")),
    }
    if block.headers().get("Proc-Type").is_some() {
        // RFC 1421 headers (`Proc-Type: 4,ENCRYPTED`) mean a legacy encrypted key.
        return Err(bad(
            "it is encrypted; give the unencrypted key GitHub generated",
        ));
    }
    EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(|_| {
        bad("not a valid RSA private key (its content is not an RSA key in PKCS#1 or PKCS#8 form)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{DecodingKey, Validation};

    const KEY: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/app-key.pem"
    ));
    /// The same key as PKCS#8 (`openssl pkcs8 -topk8 -nocrypt`).
    const KEY_PKCS8: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/app-key-pkcs8.pem"
    ));
    /// Its public half (`openssl rsa -pubout`).
    const PUBLIC: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/app-key.pub.pem"
    ));
    /// A P-256 key, PKCS#8: a private key, not an RSA one.
    const EC_KEY: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ec-key.pem"
    ));

    #[derive(serde::Deserialize)]
    struct Seen {
        iat: u64,
        exp: u64,
        iss: String,
    }

    fn verify(jwt: &Token) -> Seen {
        let header = jsonwebtoken::decode_header(jwt.expose()).unwrap();
        assert_eq!(header.alg, Algorithm::RS256);
        assert_eq!(header.typ.as_deref(), Some("JWT"));
        let mut v = Validation::new(Algorithm::RS256);
        // The test's `now` is in the past; the claims are checked by hand below.
        v.validate_exp = false;
        v.required_spec_claims.clear();
        let public = DecodingKey::from_rsa_pem(PUBLIC.as_bytes()).unwrap();
        jsonwebtoken::decode::<Seen>(jwt.expose(), &public, &v)
            .expect("the JWT verifies with the key's public half")
            .claims
    }

    #[test]
    fn jwt_is_rs256_with_githubs_claims() {
        let now = 1_700_000_000;
        let jwt = app_jwt(" 123456\n", KEY, now).unwrap();
        assert_eq!(format!("{jwt:?}"), "Token(***)");
        let claims = verify(&jwt);
        assert_eq!(claims.iss, "123456");
        assert_eq!(claims.iat, now - 60);
        assert_eq!(claims.exp, now + 540);
        assert!(claims.exp - now <= 600);
        // `iss` is a string, client IDs included.
        let jwt = app_jwt("Iv23liAbCdEf", KEY, now).unwrap();
        assert_eq!(verify(&jwt).iss, "Iv23liAbCdEf");
    }

    #[test]
    fn pkcs8_and_escaped_newlines_are_accepted() {
        let now = 1_700_000_000;
        let pkcs1 = app_jwt("1", KEY, now).unwrap();
        let pkcs8 = app_jwt("1", KEY_PKCS8, now).unwrap();
        assert_eq!(verify(&pkcs8).iss, "1");
        // RS256 is deterministic: the same key signs the same claims alike.
        assert_eq!(pkcs1, pkcs8);
        // A secret stored with literal `\n`s.
        for pem in [KEY, KEY_PKCS8] {
            let escaped = pem.replace('\n', "\\n");
            assert_eq!(app_jwt("1", &escaped, now).unwrap(), pkcs1);
        }
    }

    #[test]
    fn bad_keys_fail_without_echoing_the_key() {
        let body_line = KEY
            .lines()
            .find(|l| l.starts_with("MII"))
            .unwrap()
            .to_string();
        // Corrupt the key's body but keep valid base64, so the key itself is refused.
        let corrupt = KEY.replacen(&body_line, &"A".repeat(body_line.len()), 1);
        let truncated: String = {
            let mut lines: Vec<&str> = KEY.lines().collect();
            lines.retain(|l| !l.starts_with("MII"));
            lines.join("\n")
        };
        let not_base64 = KEY.replacen(&body_line, &format!("{}!!", &body_line[2..]), 1);
        let legacy_encrypted = KEY.replacen(
            "-----BEGIN RSA PRIVATE KEY-----\n",
            "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\n",
            1,
        );
        let cases = [
            ("", "empty"),
            ("ghp_notakey", "no `-----BEGIN"),
            (
                "-----BEGIN MIIsecret+/0-----\nMIIA\n-----END MIIsecret+/0-----",
                "malformed",
            ),
            (
                "-----BEGIN MIIsecret+/0-----\nMII\n-----END",
                "no `-----END",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIsecretAAA\n",
                "no `-----END",
            ),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIsecretAAA\n-----END PRIVATE KEY-----",
                "name different blocks",
            ),
            (
                "-----BEGIN PUBLIC KEY-----\nMIIsecretAAA\n-----END PUBLIC KEY-----",
                "public key",
            ),
            (PUBLIC, "public key"),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlsecretAAAA==\n-----END OPENSSH PRIVATE KEY-----",
                "`OPENSSH PRIVATE KEY` block",
            ),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIsecretAAA\n-----END ENCRYPTED PRIVATE KEY-----",
                "encrypted",
            ),
            (&legacy_encrypted, "encrypted"),
            (&not_base64, "not valid base64"),
            (&corrupt, "not a valid RSA private key"),
            (&truncated, "not a valid RSA private key"),
            (EC_KEY, "not a valid RSA private key"),
            (
                "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----",
                "not a valid RSA private key",
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
}
