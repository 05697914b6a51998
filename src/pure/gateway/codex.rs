//! The model provider a user's own Codex configuration selects (`config.toml`:
//! `model_provider = "x"` with `[model_providers.x]`, or a `profile` whose `model_provider`
//! says so), read so the gateway sends Codex's requests where Codex itself would: the
//! provider's `base_url` (an Azure or proxy endpoint), its key from the variable `env_key`
//! names, its `query_params` (Azure's `api-version`) and its headers (`http_headers`, and
//! `env_http_headers` whose values come from dagexec's environment) — all added by the
//! gateway upstream, never given to the agent. Fields as Codex documents them
//! (codex-rs/core/src/model_provider_info.rs, docs/config.md).

use std::collections::BTreeMap;

/// The provider the user's Codex configuration selects, where it is not `OpenAI`'s own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodexProvider {
    /// Its id (`x` of `[model_providers.x]`).
    pub id: String,
    /// Where its requests go (`…/v1`, the Responses API under it).
    pub base_url: String,
    /// The variable holding its key (sent as a bearer token), if it names one.
    pub env_key: Option<String>,
    /// Its key written in the file (`experimental_bearer_token`), which Codex sends before
    /// `env_key`'s.
    pub bearer_token: Option<String>,
    /// Query parameters added to every request.
    pub query_params: BTreeMap<String, String>,
    /// Headers added to every request.
    pub http_headers: BTreeMap<String, String>,
    /// Headers whose values are read from the named variables.
    pub env_http_headers: BTreeMap<String, String>,
    /// Whether it takes `OpenAI`'s own key (`requires_openai_auth`), which Codex sends it when
    /// it names no `env_key`; otherwise such a provider gets no key.
    pub openai_auth: bool,
}

/// Why a Codex configuration cannot be used: the field and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
pub struct CodexConfigError {
    /// The TOML key, dotted (`model_providers.azure.base_url`); empty for the whole file.
    pub field: String,
    pub message: String,
}

/// Codex's providers that need no table of their own.
enum BuiltIn {
    /// `OpenAI`'s own: the gateway's default upstream.
    OpenAi,
    /// A local server Codex knows by name, at this base URL.
    Local(&'static str),
}

fn built_in(id: &str) -> Option<BuiltIn> {
    match id {
        "openai" => Some(BuiltIn::OpenAi),
        "ollama" => Some(BuiltIn::Local("http://localhost:11434/v1")),
        "lmstudio" => Some(BuiltIn::Local("http://localhost:1234/v1")),
        _ => None,
    }
}

fn err(field: &str, message: String) -> CodexConfigError {
    CodexConfigError {
        field: field.to_string(),
        message,
    }
}

fn string(v: &toml::Value, field: &str) -> Result<String, CodexConfigError> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| err(field, "must be a string".into()))
}

/// The provider `text` (a Codex `config.toml`) selects, `None` for `OpenAI`'s own.
pub fn selected(text: &str) -> Result<Option<CodexProvider>, CodexConfigError> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| {
        err(
            "",
            format!(
                "not TOML: {}",
                e.message().lines().next().unwrap_or_default()
            ),
        )
    })?;
    let Some((id, named_in)) = chosen(&doc)? else {
        return Ok(None);
    };
    let prefix = format!("model_providers.{id}");
    // A provider Codex knows by name needs no table: its defaults are `provider`'s.
    let none = toml::Table::new();
    let table = match doc.get("model_providers").and_then(|t| t.get(&id)) {
        Some(t) => t
            .as_table()
            .ok_or_else(|| err(&prefix, "must be a table".into()))?,
        None if built_in(&id).is_some() => &none,
        None => {
            return Err(err(
                &named_in,
                format!("{id:?} names no [{prefix}] table and no provider Codex knows by name"),
            ));
        }
    };
    provider(id, &prefix, table)
}

/// The provider's id and the field that chose it: the top level's `model_provider`, or the
/// selected `profile`'s.
pub fn chosen(doc: &toml::Table) -> Result<Option<(String, String)>, CodexConfigError> {
    let mut chosen = doc
        .get("model_provider")
        .map(|v| Ok((string(v, "model_provider")?, "model_provider".to_string())))
        .transpose()?;
    if let Some(p) = doc.get("profile") {
        let profile = string(p, "profile")?;
        let field = format!("profiles.{profile}.model_provider");
        if let Some(v) = doc
            .get("profiles")
            .and_then(|t| t.get(&profile))
            .and_then(|t| t.get("model_provider"))
        {
            chosen = Some((string(v, &field)?, field));
        }
    }
    Ok(chosen)
}

/// The provider `id` from its table (`prefix`: `model_providers.<id>`).
fn provider(
    id: String,
    prefix: &str,
    table: &toml::Table,
) -> Result<Option<CodexProvider>, CodexConfigError> {
    let field = |k: &str| format!("{prefix}.{k}");
    let opt_string = |k: &str| table.get(k).map(|v| string(v, &field(k))).transpose();
    let base_url = match (opt_string("base_url")?, built_in(&id)) {
        (Some(v), _) => v,
        (None, Some(BuiltIn::OpenAi)) => return Ok(None),
        (None, Some(BuiltIn::Local(base))) => base.to_string(),
        (None, None) => {
            return Err(err(
                &field("base_url"),
                "missing: where the provider's requests go".into(),
            ));
        }
    };
    let base_url = base_url.trim().trim_end_matches('/').to_string();
    if !(base_url.starts_with("https://") || base_url.starts_with("http://"))
        || base_url.contains(char::is_whitespace)
    {
        return Err(err(
            &field("base_url"),
            format!("{base_url:?} is not an http:// or https:// URL"),
        ));
    }
    if let Some(wire) = opt_string("wire_api")?
        && wire != "responses"
    {
        return Err(err(
            &field("wire_api"),
            format!(
                "{wire:?}: dagexec's gateway passes the Responses API only (wire_api = \"responses\")"
            ),
        ));
    }
    let env_key = opt_string("env_key")?;
    let map = |k: &str| -> Result<BTreeMap<String, String>, CodexConfigError> {
        let Some(v) = table.get(k) else {
            return Ok(BTreeMap::new());
        };
        let t = v
            .as_table()
            .ok_or_else(|| err(&field(k), "must be a table of strings".into()))?;
        t.iter()
            .map(|(name, v)| Ok((name.clone(), string(v, &format!("{}.{name}", field(k)))?)))
            .collect()
    };
    Ok(Some(CodexProvider {
        id,
        base_url,
        env_key,
        bearer_token: opt_string("experimental_bearer_token")?,
        query_params: map("query_params")?,
        http_headers: map("http_headers")?,
        env_http_headers: map("env_http_headers")?,
        openai_auth: table.get("requires_openai_auth") == Some(&toml::Value::Boolean(true)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selected_providers_upstream_is_read() {
        let azure = r#"
model = "gpt-5.5"
model_provider = "azure"

[model_providers.azure]
name = "Azure"
base_url = "https://example.openai.azure.com/openai/"
env_key = "AZURE_OPENAI_API_KEY"
wire_api = "responses"
query_params = { api-version = "2025-04-01-preview" }
http_headers = { "X-Team" = "agents" }
env_http_headers = { "X-Org" = "MY_ORG" }
"#;
        let p = selected(azure).unwrap().unwrap();
        assert_eq!(p.id, "azure");
        assert_eq!(p.base_url, "https://example.openai.azure.com/openai");
        assert_eq!(p.env_key.as_deref(), Some("AZURE_OPENAI_API_KEY"));
        assert_eq!(p.query_params["api-version"], "2025-04-01-preview");
        assert_eq!(p.http_headers["X-Team"], "agents");
        assert_eq!(p.env_http_headers["X-Org"], "MY_ORG");
        // OpenAI's own, or no provider chosen: the gateway's default upstream.
        assert_eq!(selected("model = \"o3\"\n").unwrap(), None);
        assert_eq!(selected("model_provider = \"openai\"\n").unwrap(), None);
        assert_eq!(
            selected("model_provider = \"ollama\"\n")
                .unwrap()
                .unwrap()
                .base_url,
            "http://localhost:11434/v1"
        );
        // A profile's provider wins over the top level's.
        let profiled = "model_provider = \"openai\"\nprofile = \"p\"\n[profiles.p]\nmodel_provider = \"proxy\"\n[model_providers.proxy]\nbase_url = \"http://127.0.0.1:9/v1\"\n";
        assert_eq!(selected(profiled).unwrap().unwrap().id, "proxy");
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("model_provider = [1]", "model_provider: must be a string"),
            (
                "model_provider = \"x\"",
                "model_provider: \"x\" names no [model_providers.x] table and no provider Codex knows by name",
            ),
            (
                "model_provider = \"x\"\n[model_providers.x]\nname = \"x\"",
                "model_providers.x.base_url: missing: where the provider's requests go",
            ),
            (
                "model_provider = \"x\"\n[model_providers.x]\nbase_url = \"ftp://h\"",
                "model_providers.x.base_url: \"ftp://h\" is not an http:// or https:// URL",
            ),
            (
                "model_provider = \"x\"\n[model_providers.x]\nbase_url = \"http://h\"\nwire_api = \"chat\"",
                "model_providers.x.wire_api: \"chat\": dagexec's gateway passes the Responses API only (wire_api = \"responses\")",
            ),
            (
                "model_provider = \"x\"\n[model_providers.x]\nbase_url = \"http://h\"\nquery_params = { a = 1 }",
                "model_providers.x.query_params.a: must be a string",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(selected(text).unwrap_err().to_string(), want, "{text}");
        }
        assert!(
            selected("model_provider = ")
                .unwrap_err()
                .to_string()
                .starts_with("not TOML: "),
        );
    }
}
