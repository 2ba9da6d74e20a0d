//! Taking one change of a text file back from the file as it is now, line by line (a 3-way
//! merge whose base is the file as the change left it): each hunk of the change is undone
//! where its lines are still as the change left them, and left alone, counted as refused,
//! where someone changed them since. Lines keep their bytes (`\r\n`, a missing final newline).

use similar::{capture_diff_slices, Algorithm, DiffOp};

/// The file with the change taken back where it could be, and how many hunks were and were
/// not.
#[derive(Debug, PartialEq, Eq)]
pub struct TakenBack {
    pub data: Vec<u8>,
    pub taken: usize,
    pub refused: usize,
}

fn lines(data: &[u8]) -> Vec<&[u8]> {
    data.split_inclusive(|&b| b == b'\n').collect()
}

/// One hunk of the change: lines `after[a0..a1]` were `before[b0..b1]`.
struct Hunk {
    a0: usize,
    a1: usize,
    b0: usize,
    b1: usize,
}

/// Takes back the change from `before` to `after` out of `now`.
pub fn take_back(before: &[u8], after: &[u8], now: &[u8]) -> TakenBack {
    if now == after {
        return TakenBack {
            data: before.to_vec(),
            taken: usize::from(before != after),
            refused: 0,
        };
    }
    let (b, a, n) = (lines(before), lines(after), lines(now));
    // The hunks that turn `after` back into `before`.
    let mut hunks: Vec<Hunk> = Vec::new();
    for op in capture_diff_slices(Algorithm::Myers, &a, &b) {
        let (a0, a1, b0, b1) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index, old_index + old_len, new_index, new_index),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index, old_index, new_index, new_index + new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (
                old_index,
                old_index + old_len,
                new_index,
                new_index + new_len,
            ),
        };
        match hunks.last_mut() {
            Some(h) if h.a1 == a0 && h.b1 == b0 => {
                h.a1 = a1;
                h.b1 = b1;
            }
            _ => hunks.push(Hunk { a0, a1, b0, b1 }),
        }
    }
    // Where each line of `after` is now, if it is still there unchanged.
    let mut at: Vec<Option<usize>> = vec![None; a.len()];
    for op in capture_diff_slices(Algorithm::Myers, &a, &n) {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for k in 0..len {
                at[old_index + k] = Some(new_index + k);
            }
        }
    }
    // The part of `now` each hunk covers, where it still can be undone.
    let place = |h: &Hunk| -> Option<(usize, usize)> {
        if h.a0 == h.a1 {
            // Lines the change removed go back between two neighbours still side by side.
            let start = match h.a0 {
                0 => 0,
                i => at[i - 1]? + 1,
            };
            let next_ok = match h.a0 {
                i if i == a.len() => i > 0 || n.is_empty(),
                i => at[i] == Some(start),
            };
            return next_ok.then_some((start, start));
        }
        let start = at[h.a0]?;
        for (k, place) in at[h.a0..h.a1].iter().enumerate() {
            if *place != Some(start + k) {
                return None;
            }
        }
        Some((start, start + (h.a1 - h.a0)))
    };
    let mut out = Vec::with_capacity(now.len());
    let (mut copied, mut taken, mut refused) = (0, 0, 0);
    // Lines that put back a last line without its newline must stay last: anything after them
    // would be joined to them.
    let ends_open = |h: &Hunk| h.b1 > h.b0 && !b[h.b1 - 1].ends_with(b"\n");
    for h in &hunks {
        match place(h) {
            Some((n0, n1)) if n0 >= copied && (!ends_open(h) || n1 == n.len()) => {
                n[copied..n0].iter().for_each(|l| out.extend_from_slice(l));
                b[h.b0..h.b1].iter().for_each(|l| out.extend_from_slice(l));
                copied = n1;
                taken += 1;
            }
            _ => refused += 1,
        }
    }
    n[copied..].iter().for_each(|l| out.extend_from_slice(l));
    TakenBack {
        data: out,
        taken,
        refused,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(before: &str, after: &str, now: &str) -> (String, usize, usize) {
        let t = take_back(before.as_bytes(), after.as_bytes(), now.as_bytes());
        (String::from_utf8(t.data).unwrap(), t.taken, t.refused)
    }

    #[test]
    fn unchanged_since_goes_back_whole() {
        assert_eq!(
            back("a\nb\n", "a\nB\nc\n", "a\nB\nc\n"),
            ("a\nb\n".into(), 1, 0)
        );
    }

    #[test]
    fn other_lines_changed_since_are_kept() {
        // The turn changed line 2; someone else changed line 5 and added one at the end.
        let before = "1\n2\n3\n4\n5\n";
        let after = "1\nTWO\n3\n4\n5\n";
        let now = "1\nTWO\n3\n4\nfive\n6\n";
        assert_eq!(
            back(before, after, now),
            ("1\n2\n3\n4\nfive\n6\n".into(), 1, 0)
        );
    }

    #[test]
    fn a_line_changed_since_is_refused_and_the_rest_taken_back() {
        let before = "1\n2\n3\n4\n5\n6\n";
        let after = "1\nTWO\n3\n4\n5\nSIX\n";
        let now = "1\ntwo!\n3\n4\n5\nSIX\n";
        assert_eq!(
            back(before, after, now),
            ("1\ntwo!\n3\n4\n5\n6\n".into(), 1, 1)
        );
    }

    #[test]
    fn adjacent_hunks_with_the_line_between_changed_since() {
        let before = "a\nb\nc\n";
        let after = "A\nb\nC\n";
        let now = "A\nbee\nC\n";
        assert_eq!(back(before, after, now), ("a\nbee\nc\n".into(), 2, 0));
    }

    #[test]
    fn lines_the_turn_removed_come_back_between_their_neighbours() {
        assert_eq!(
            back("a\nb\nc\n", "a\nc\n", "a\nc\nd\n"),
            ("a\nb\nc\nd\n".into(), 1, 0)
        );
        // Someone wrote between the neighbours since: refused.
        assert_eq!(
            back("a\nb\nc\n", "a\nc\n", "a\nX\nc\n"),
            ("a\nX\nc\n".into(), 0, 1)
        );
    }

    #[test]
    fn crlf_and_a_missing_final_newline_keep_their_bytes() {
        let before = "one\r\ntwo\r\nend";
        let after = "one\r\n2\r\nend";
        let now = "zero\r\none\r\n2\r\nend";
        assert_eq!(
            back(before, after, now),
            ("zero\r\none\r\ntwo\r\nend".into(), 1, 0)
        );
        // The turn added the final newline; someone appended after it since.
        assert_eq!(back("x", "x\n", "x\ny"), ("x\ny".into(), 0, 1));
    }

    #[test]
    fn lines_added_at_the_end_go_with_others_kept() {
        assert_eq!(back("a\n", "a\nx\n", "a\nx\ny\n"), ("a\ny\n".into(), 1, 0));
    }
}
