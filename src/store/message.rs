//! A checkpoint's commit message, readable in `git log`: a subject line (`[dialog] #seq kind:
//! first line of the label`, cut at 72 characters), a blank line, then the whole label.

/// The message of a checkpoint whose subject starts with `prefix` (`[dialog] #seq kind`).
pub(crate) fn message_of(prefix: &str, label: &str) -> String {
    let subject: String = label
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(72)
        .collect();
    let mut message = prefix.to_string();
    if !subject.is_empty() {
        message.push_str(": ");
        message.push_str(&subject);
    }
    message.push('\n');
    if !label.is_empty() {
        message.push('\n');
        message.push_str(label);
        message.push('\n');
    }
    message
}

/// A checkpoint's message with its label replaced by `f(label)`, the subject line made again
/// from the new label (it repeats the label's start, so a change to the label must reach it
/// too: a secret cut at the subject's 72nd character is no longer one to a scan). None when
/// `message` is not a checkpoint's message.
pub(crate) fn relabel(message: &str, f: impl FnOnce(&str) -> String) -> Option<String> {
    let (first, rest) = message.split_once('\n')?;
    let label = match rest {
        "" => "",
        _ => rest.strip_prefix('\n')?.strip_suffix('\n')?,
    };
    let prefix = first.split_once(": ").map_or(first, |(prefix, _)| prefix);
    (message_of(prefix, label) == message).then(|| message_of(prefix, &f(label)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_is_replaced_and_the_subject_made_again() {
        for label in [
            "",
            "one line",
            "two\nlines\n",
            "\nstarts blank",
            &"x".repeat(100),
        ] {
            let message = message_of("[d] #3 message", label);
            assert_eq!(
                relabel(&message, |l| l.to_string()).as_deref(),
                Some(message.as_str()),
                "{label:?}"
            );
        }
        let long = format!("{}TOKEN-TO-HIDE rest", "w".repeat(66));
        let message = message_of("[d] #1 message", &long);
        assert!(message.lines().next().unwrap().ends_with("TOKEN-"));
        let hidden = relabel(&message, |l| l.replace("TOKEN-TO-HIDE", "[x]")).unwrap();
        assert!(!hidden.contains("TOKEN-"), "{hidden}");
        assert_eq!(relabel("not ours", |l| l.into()), None);
        assert_eq!(
            relabel("[d] #1 kind: cut\n\nother label\n", |l| l.into()),
            None
        );
    }
}
