//! Finding the JSON object in a model's answer: as sent, inside a Markdown fence or prose, after
//! a `<think>` block, or almost JSON (a trailing comma, single quotes, a missing closing brace),
//! which `llm_json` repairs.

use serde_json::Value;

/// The answer without `<think>…</think>` blocks (an unclosed one hides everything after it).
fn without_thinking(text: &str) -> &str {
    let mut rest = text;
    while let Some(start) = rest.find("<think>") {
        match rest[start..].find("</think>") {
            Some(end) => rest = &rest[start + end + "</think>".len()..],
            None => return &rest[..start],
        }
    }
    rest
}

/// The JSON object in `text`, and whether it had to be repaired. `None` when there is none.
pub fn json_object_in(text: &str) -> Option<(Value, bool)> {
    let text = without_thinking(text).trim();
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(text) {
        return Some((v, false));
    }
    // From the first `{`: fences and prose before it are dropped; after it, the repairer drops
    // what does not belong to the object (or closes what was left open).
    let start = text.find('{')?;
    let body = &text[start..];
    if let Some(end) = body.rfind('}')
        && let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&body[..=end])
    {
        return Some((v, true));
    }
    match llm_json::loads(body, &llm_json::RepairOptions::default()) {
        Ok(v @ Value::Object(_)) => Some((v, true)),
        _ => None,
    }
}

/// Whether `value` has the shape `schema` asks for at its top level: an object with every
/// `required` key, and arrays, strings and objects where the schema's properties say so. Deeper
/// checks are the caller's (it reads the value into its own types).
pub fn conforms(value: &Value, schema: &Value) -> Result<(), String> {
    let Value::Object(obj) = value else {
        return Err("not a JSON object".into());
    };
    for key in schema["required"].as_array().into_iter().flatten() {
        let Some(key) = key.as_str() else { continue };
        let Some(v) = obj.get(key) else {
            return Err(format!("no {key:?} key"));
        };
        let ok = match schema["properties"][key]["type"].as_str() {
            Some("array") => v.is_array(),
            Some("string") => v.is_string(),
            Some("object") => v.is_object(),
            _ => true,
        };
        if !ok {
            return Err(format!("{key:?} is not of the schema's type"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_json_is_not_repaired() {
        let (v, repaired) = json_object_in(r#" {"facts": []} "#).unwrap();
        assert_eq!(v, json!({"facts": []}));
        assert!(!repaired);
    }

    #[test]
    fn fenced_json_with_prose_is_found() {
        let text = "Sure! Here you go:\n```json\n{\"facts\": [\"a\"]}\n```\nAnything else?";
        assert_eq!(
            json_object_in(text).unwrap(),
            (json!({"facts": ["a"]}), true)
        );
    }

    #[test]
    fn thinking_is_skipped() {
        let text = "<think>maybe {\"facts\": [\"wrong\"]}</think>{\"facts\": [\"right\"]}";
        assert_eq!(json_object_in(text).unwrap().0, json!({"facts": ["right"]}));
    }

    #[test]
    fn almost_json_is_repaired() {
        for text in [
            r#"{"facts": ["a", "b",]}"#,
            r#"{"facts": ["a", "b"]"#,
            r#"{'facts': ['a', 'b']}"#,
        ] {
            let (v, repaired) = json_object_in(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(v, json!({"facts": ["a", "b"]}), "{text}");
            assert!(repaired);
        }
    }

    #[test]
    fn prose_has_no_object() {
        assert!(json_object_in("I cannot help with that.").is_none());
        assert!(json_object_in("[1, 2]").is_none());
        assert!(json_object_in("<think>{\"a\": 1}").is_none());
    }

    #[test]
    fn conformance_checks_required_keys_and_types() {
        let schema = json!({"type": "object", "required": ["facts"],
            "properties": {"facts": {"type": "array"}}});
        assert!(conforms(&json!({"facts": []}), &schema).is_ok());
        assert!(conforms(&json!({"fact": []}), &schema).is_err());
        assert!(conforms(&json!({"facts": "x"}), &schema).is_err());
        assert!(conforms(&json!([]), &schema).is_err());
    }
}
