//! The usage file a worker may write at `$DAGEXEC_USAGE_FILE`.

use serde_json::Value;

use super::{MAX_COST_USD, MAX_TOKENS, Usage};

/// The file at `$DAGEXEC_USAGE_FILE`: a JSON object with any of `cost_usd` (a number),
/// `input_tokens`, `output_tokens` (whole numbers) and `model` (a string); other fields are
/// ignored. `Err` names what is wrong. The values come back [`Usage::checked`].
pub fn parse_usage_file(text: &str) -> Result<Usage, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(o) = v else {
        return Err("not a JSON object".into());
    };
    let tokens = |k: &str| -> Result<Option<u64>, String> {
        match o.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("`{k}` is not a whole number of tokens")),
        }
    };
    let cost_usd = match o.get("cost_usd") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .ok_or("`cost_usd` is not a number (USD, e.g. 0.42)")?,
        ),
    };
    let model = match o.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("`model` is not a string".into()),
    };
    let raw = Usage {
        cost_usd,
        input_tokens: tokens("input_tokens")?,
        output_tokens: tokens("output_tokens")?,
        model,
    };
    let checked = raw.clone().checked();
    if checked.cost_usd != raw.cost_usd {
        return Err(format!(
            "`cost_usd` {} is out of range (0 to {MAX_COST_USD})",
            raw.cost_usd.unwrap_or_default()
        ));
    }
    if checked.input_tokens != raw.input_tokens || checked.output_tokens != raw.output_tokens {
        return Err(format!("a token count is above {MAX_TOKENS}"));
    }
    Ok(checked)
}
