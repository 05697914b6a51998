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
    // Read in this order: the first field that is wrong is the one named.
    let raw = Usage {
        cost_usd: field(&o, "cost_usd", Value::as_f64, "a number (USD, e.g. 0.42)")?,
        model: field(&o, "model", |v| v.as_str().map(str::to_string), "a string")?,
        input_tokens: field(&o, "input_tokens", Value::as_u64, TOKENS)?,
        output_tokens: field(&o, "output_tokens", Value::as_u64, TOKENS)?,
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

const TOKENS: &str = "a whole number of tokens";

/// The field `k` of `o`, read with `read`: `None` when absent or null; `Err` says it is not
/// `what`.
fn field<T>(
    o: &serde_json::Map<String, Value>,
    k: &str,
    read: impl Fn(&Value) -> Option<T>,
    what: &str,
) -> Result<Option<T>, String> {
    match o.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => read(v)
            .map(Some)
            .ok_or_else(|| format!("`{k}` is not {what}")),
    }
}
