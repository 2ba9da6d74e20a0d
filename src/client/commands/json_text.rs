//! A user's JSON file edited in place: the byte ranges of an array's elements found by a small
//! scanner, so that taking ckpt's entry out of an agent's settings leaves every other byte of
//! the file (its indentation, its key order, its line breaks) as the user wrote it. The text is
//! valid JSON already (it was parsed before); anything the scanner does not follow gives None,
//! and the caller writes the file whole instead.

use std::ops::Range;

/// `text` without element `index` of the array at `path` (object keys from the top), the
/// comma and space around it taken out with it.
pub fn remove_element(text: &str, path: &[&str], index: usize) -> Option<String> {
    let b = text.as_bytes();
    let (open, elements, close) = array_at(b, path)?;
    let element = elements.get(index)?;
    let cut = match (index.checked_sub(1), elements.get(index + 1)) {
        // Up to the next element: the element, its comma and the space after.
        (_, Some(next)) => element.start..next.start,
        // The last of several: from the end of the one before.
        (Some(before), None) => elements[before].end..element.end,
        // The only one: the array becomes `[]`.
        (None, None) => open + 1..close,
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..cut.start]);
    out.push_str(&text[cut.end..]);
    Some(out)
}

/// `text` without member `key` of the object at `path`, the comma and space around it taken
/// out with it.
pub fn remove_member(text: &str, path: &[&str], key: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut at = skip_space(b, 0);
    for k in path {
        at = member(b, at, k)?;
    }
    if b.get(at) != Some(&b'{') {
        return None;
    }
    let open = at;
    // Each member's range (key to value end) and name.
    let mut members: Vec<(Range<usize>, String)> = Vec::new();
    at = skip_space(b, at + 1);
    let close = loop {
        match b.get(at)? {
            b'}' => break at,
            b'"' => {}
            _ => return None,
        }
        let start = at;
        let key_end = string_end(b, at)?;
        let name: String = serde_json::from_slice(&b[at..key_end]).ok()?;
        at = skip_space(b, key_end);
        if b.get(at) != Some(&b':') {
            return None;
        }
        let end = value_end(b, skip_space(b, at + 1))?;
        members.push((start..end, name));
        at = skip_space(b, end);
        match b.get(at)? {
            b',' => at = skip_space(b, at + 1),
            b'}' => break at,
            _ => return None,
        }
    };
    let index = members.iter().position(|(_, name)| name == key)?;
    let element = &members[index].0;
    let cut = match (index.checked_sub(1), members.get(index + 1)) {
        (_, Some((next, _))) => element.start..next.start,
        (Some(before), None) => members[before].0.end..element.end,
        (None, None) => open + 1..close,
    };
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..cut.start]);
    out.push_str(&text[cut.end..]);
    Some(out)
}

/// The array at `path`: its `[` and `]` and its elements' ranges.
fn array_at(b: &[u8], path: &[&str]) -> Option<(usize, Vec<Range<usize>>, usize)> {
    let mut at = skip_space(b, 0);
    for key in path {
        at = member(b, at, key)?;
    }
    if b.get(at) != Some(&b'[') {
        return None;
    }
    let open = at;
    let mut elements = Vec::new();
    at = skip_space(b, at + 1);
    if b.get(at) == Some(&b']') {
        return Some((open, elements, at));
    }
    loop {
        let end = value_end(b, at)?;
        elements.push(at..end);
        at = skip_space(b, end);
        match b.get(at)? {
            b',' => at = skip_space(b, at + 1),
            b']' => return Some((open, elements, at)),
            _ => return None,
        }
    }
}

/// Where the value of member `key` of the object at `at` starts.
fn member(b: &[u8], at: usize, key: &str) -> Option<usize> {
    if b.get(at) != Some(&b'{') {
        return None;
    }
    let mut at = skip_space(b, at + 1);
    while b.get(at) == Some(&b'"') {
        let key_end = string_end(b, at)?;
        let name: String = serde_json::from_slice(&b[at..key_end]).ok()?;
        at = skip_space(b, key_end);
        if b.get(at) != Some(&b':') {
            return None;
        }
        at = skip_space(b, at + 1);
        if name == key {
            return Some(at);
        }
        at = skip_space(b, value_end(b, at)?);
        match b.get(at)? {
            b',' => at = skip_space(b, at + 1),
            _ => return None,
        }
    }
    None
}

/// Where the value starting at `at` ends.
fn value_end(b: &[u8], at: usize) -> Option<usize> {
    match b.get(at)? {
        b'"' => string_end(b, at),
        open @ (b'{' | b'[') => {
            let close = if *open == b'{' { b'}' } else { b']' };
            // Nested values are skipped by counting brackets outside strings.
            let mut depth = 0usize;
            let mut i = at;
            while i < b.len() {
                match b[i] {
                    b'"' => {
                        i = string_end(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return (b[i] == close).then_some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let end = b[at..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
                .map_or(b.len(), |n| at + n);
            (end > at).then_some(end)
        }
    }
}

/// Where the string starting at `at` (its `"`) ends, past its closing `"`.
fn string_end(b: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

fn skip_space(b: &[u8], mut at: usize) -> usize {
    while b.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_goes_and_every_other_byte_stays() {
        let text = "{\n  \"theme\" : \"dark\",\n  \"hooks\": {\"E\": [\n      {\"a\": \"[x]\"},\n      {\"b\": 2},\n      3\n  ]}\n}\n";
        let path = ["hooks", "E"];
        let first = remove_element(text, &path, 0).unwrap();
        assert_eq!(first, "{\n  \"theme\" : \"dark\",\n  \"hooks\": {\"E\": [\n      {\"b\": 2},\n      3\n  ]}\n}\n");
        let last = remove_element(text, &path, 2).unwrap();
        assert_eq!(last, "{\n  \"theme\" : \"dark\",\n  \"hooks\": {\"E\": [\n      {\"a\": \"[x]\"},\n      {\"b\": 2}\n  ]}\n}\n");
        let only = remove_element("{\"hooks\":{\"E\":[ 1 ]},\"z\":0}", &path, 0).unwrap();
        assert_eq!(only, "{\"hooks\":{\"E\":[]},\"z\":0}");
        for edited in [first, last, only] {
            serde_json::from_str::<serde_json::Value>(&edited).unwrap();
        }
        assert_eq!(remove_element(text, &path, 3), None);
        assert_eq!(remove_element(text, &["nope"], 0), None);
        let escaped = "{\"k\\\"ey\": 1, \"hooks\": {\"E\": [\"a\\\"]\", 2]}}";
        assert_eq!(
            remove_element(escaped, &path, 0).unwrap(),
            "{\"k\\\"ey\": 1, \"hooks\": {\"E\": [2]}}"
        );
    }
}
