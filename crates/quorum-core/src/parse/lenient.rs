//! Scalars as models write them: a 0..=1 score from `0.8`, `"80%"` or `"high"`, a count from a
//! number or a numeric string, a string from a string or a scalar.

use serde_json::Value;

/// A 0..=1 score from what models write: `0.8`, `"0.8"`, `80`, `"80%"`, `"high"`.
///
/// Numbers above 1 and up to 100 are read as percentages; the result is clamped to 0..=1.
pub fn lenient_f64(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => {
            let t = s.trim().to_ascii_lowercase();
            match t.as_str() {
                "very high" | "certain" => return Some(0.95),
                "high" => return Some(0.85),
                "moderate" | "medium" => return Some(0.6),
                "low" => return Some(0.3),
                "very low" => return Some(0.15),
                _ => {}
            }
            if let Some(p) = t.strip_suffix('%') {
                let p: f64 = p.trim().parse().ok()?;
                return p.is_finite().then(|| (p / 100.0).clamp(0.0, 1.0));
            }
            t.parse().ok()?
        }
        _ => return None,
    };
    if !x.is_finite() {
        return None;
    }
    let x = if x > 1.0 && x <= 100.0 { x / 100.0 } else { x };
    Some(x.clamp(0.0, 1.0))
}

/// A line number from what models write: `12`, `"12"`, `"L12"`, `"12-14"` (the start),
/// `"line 12"`, `[12, 14]` (the first).
pub fn lenient_u32(v: &Value) -> Option<u32> {
    match v {
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u32::try_from(u).ok()
            } else {
                let f = n.as_f64()?;
                (f.is_finite() && f >= 0.0 && f <= f64::from(u32::MAX)).then_some(f as u32)
            }
        }
        Value::String(s) => {
            let digits: String = s
                .chars()
                .skip_while(|c| !c.is_ascii_digit())
                .take_while(|c| c.is_ascii_digit())
                .collect();
            digits.parse().ok()
        }
        Value::Array(a) => a.first().and_then(lenient_u32),
        _ => None,
    }
}

/// A text field from what models write: strings as they are, numbers and booleans rendered;
/// null, empty or whitespace-only strings, arrays and objects give `None`.
pub fn lenient_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_numbers() {
        assert_eq!(lenient_f64(&json!(0.7)), Some(0.7));
        assert_eq!(lenient_f64(&json!("0.7")), Some(0.7));
        assert_eq!(lenient_f64(&json!(80)), Some(0.8));
        assert_eq!(lenient_f64(&json!("80%")), Some(0.8));
        assert_eq!(lenient_f64(&json!(" 5 % ")), Some(0.05));
        assert_eq!(lenient_f64(&json!("High")), Some(0.85));
        assert_eq!(lenient_f64(&json!("medium")), Some(0.6));
        assert_eq!(lenient_f64(&json!("moderate")), Some(0.6));
        assert_eq!(lenient_f64(&json!("low")), Some(0.3));
        assert_eq!(lenient_f64(&json!(1)), Some(1.0));
        assert_eq!(lenient_f64(&json!(250)), Some(1.0));
        assert_eq!(lenient_f64(&json!(-0.2)), Some(0.0));
        assert_eq!(lenient_f64(&json!("sure")), None);
        assert_eq!(lenient_f64(&json!(null)), None);

        assert_eq!(lenient_u32(&json!(12)), Some(12));
        assert_eq!(lenient_u32(&json!(12.0)), Some(12));
        assert_eq!(lenient_u32(&json!("12")), Some(12));
        assert_eq!(lenient_u32(&json!("L12")), Some(12));
        assert_eq!(lenient_u32(&json!("12-14")), Some(12));
        assert_eq!(lenient_u32(&json!("line 40")), Some(40));
        assert_eq!(lenient_u32(&json!([3, 9])), Some(3));
        assert_eq!(lenient_u32(&json!(-3)), None);
        assert_eq!(lenient_u32(&json!("n/a")), None);
        assert_eq!(lenient_u32(&json!(99_999_999_999u64)), None);

        assert_eq!(lenient_string(&json!("x")), Some("x".into()));
        assert_eq!(lenient_string(&json!(3)), Some("3".into()));
        assert_eq!(lenient_string(&json!(true)), Some("true".into()));
        assert_eq!(lenient_string(&json!("  ")), None);
        assert_eq!(lenient_string(&json!(null)), None);
        assert_eq!(lenient_string(&json!(["a"])), None);
    }
}
