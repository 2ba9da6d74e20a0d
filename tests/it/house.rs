//! The house rules, checked on the source itself: no file in `src/` over 600 lines, and no
//! import circle between files. A file's imports are the `crate::…`, `super::…` and `self::…`
//! paths it names (in `use` lines or inline); each resolves to the file of the deepest module
//! it names, and a name a module only re-exports (`pub use child::Name`) resolves to the file
//! that defines it. A circle is reported with the files on it and one use that closes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 600;
/// Files over this are listed (not failed): the next split is due.
const SPLIT_LINES: usize = 500;
const MAX_FN_LINES: usize = 160;

/// Layers that never import each other in this direction: (from, to) top-level modules.
const NEVER: &[(&str, &str)] = &[
    ("client", "store"),
    ("client", "engine"),
    ("client", "daemon"),
    ("client", "index"),
    ("protocol", "store"),
    ("store", "engine"),
    ("store", "daemon"),
    ("store", "protocol"),
    ("engine", "daemon"),
];

/// What is left to fix, file by file: it may only shrink. A new crossing fails the test.
const KNOWN_CROSSINGS: &[(&str, &str)] = &[];

/// A module's path (`["store", "journal"]`) and its file.
type Modules = BTreeMap<Vec<String>, PathBuf>;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every library source file (the binaries are crates of their own).
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "bin") {
                files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// The source without comments, string literals (so a path in prose is not an import) and
/// unit-test modules (`#[cfg(test)] mod …`, which may use what they test from anywhere).
fn code_of(text: &str) -> String {
    let code = code_without_prose(text);
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        if !(after.starts_with("mod ") || after.starts_with("pub(crate) mod ")) {
            out.push_str("#[cfg(test)]");
            rest = &rest[at + "#[cfg(test)]".len()..];
            continue;
        }
        // Past the module's closing brace.
        let open = rest[at..].find('{').map(|i| at + i);
        let Some(open) = open else { break };
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The number of `#` of a raw string literal starting at `at` (`r"`, `r#"`, `br##"`), if one does.
fn raw_string_at(at: &[u8]) -> Option<usize> {
    let rest = at.strip_prefix(b"r")?;
    let hashes = rest.iter().take_while(|&&b| b == b'#').count();
    (rest.get(hashes) == Some(&b'"')).then_some(hashes)
}

fn code_without_prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i..].starts_with(b"/*") {
            while i < bytes.len() && !bytes[i..].starts_with(b"*/") {
                i += 1;
            }
            i += 2;
        } else if let Some(hashes) = raw_string_at(&bytes[i..]).filter(|_| {
            i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') || {
                bytes[i - 1] == b'b' && (i < 2 || !bytes[i - 2].is_ascii_alphanumeric())
            }
        }) {
            // `r"…"`, `r#"…"#`: to the quote followed by as many `#`.
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = i + 2 + hashes;
            i = bytes[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |at| body + at + close.len());
            out.push_str("\"\"");
        } else if bytes[i] == b'"' && !(i > 0 && bytes[i - 1] == b'\'') {
            let raw = i > 0 && (bytes[i - 1] == b'r' || bytes[i - 1] == b'#');
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                if bytes[i] == b'\\' && !raw {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

/// Every path the code names that starts with `crate`, `super`, `self` or one of the module's
/// `children` (a relative path), made absolute, one per name brought in (`use a::{b, c::d}`
/// gives `a::b` and `a::c::d`).
fn paths_in(code: &str, here: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let words: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < words.len() {
        let boundary = i == 0
            || !(words[i - 1].is_alphanumeric() || words[i - 1] == '_' || words[i - 1] == ':');
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .any(|p| words[i..].iter().take(p.len()).copied().eq(p.chars()));
        // A path relative to this module: `txn::Durable` where `txn` is a child module.
        let word: String = words[i..]
            .iter()
            .take_while(|c| c.is_alphanumeric() || **c == '_')
            .collect();
        let relative = !starts
            && !word.is_empty()
            && words[i + word.len()..].starts_with(&[':', ':'])
            && children.contains(&word);
        if !boundary || !(starts || relative) {
            i += 1;
            continue;
        }
        // The path up to the end of its `use` tree or expression.
        let mut j = i;
        let mut depth = 0;
        while j < words.len() {
            let c = words[j];
            if c == '{' {
                depth += 1;
            } else if c == '}' {
                if depth == 0 {
                    break;
                }
                depth -= 1;
            } else if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':') {
                break;
            }
            j += 1;
        }
        let text: String = words[i..j].iter().collect();
        let text = if relative {
            format!("self::{text}")
        } else {
            text
        };
        for path in expand(&text) {
            out.push(absolute(&path, here));
        }
        i = j.max(i + 1);
    }
    out
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(text: &str) -> Vec<String> {
    let Some(open) = text.find('{') else {
        return vec![text.trim_end_matches("::").to_string()];
    };
    let prefix = &text[..open];
    let inner = &text[open + 1..text.rfind('}').unwrap_or(text.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            let p = p.split(" as ").next().unwrap().trim();
            match p {
                "self" => vec![prefix.trim_end_matches("::").to_string()],
                _ => expand(&format!("{prefix}{p}")),
            }
        })
        .collect()
}

fn absolute(path: &str, here: &[String]) -> Vec<String> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = match segs.first() {
        Some(&"crate") => {
            segs.remove(0);
            Vec::new()
        }
        _ => here.to_vec(),
    };
    while let Some(&first) = segs.first() {
        match first {
            "super" => {
                base.pop();
                segs.remove(0);
            }
            "self" => {
                segs.remove(0);
            }
            _ => break,
        }
    }
    base.extend(segs.iter().map(|s| s.to_string()));
    base
}

/// The file defining what `path` names: the deepest module on it, through re-exports.
fn resolve(
    path: &[String],
    modules: &Modules,
    reexports: &Reexports,
    seen: usize,
) -> Option<PathBuf> {
    let depth = (0..=path.len())
        .rev()
        .find(|&n| modules.contains_key(&path[..n]))?;
    let module = &path[..depth];
    if let (Some(name), true) = (path.get(depth), seen < 8) {
        if let Some(target) = reexports.get(module).and_then(|r| r.get(name)) {
            let mut next = target.clone();
            next.extend(path[depth + 1..].iter().cloned());
            if next != path {
                return resolve(&next, modules, reexports, seen + 1);
            }
        }
    }
    modules.get(module).cloned()
}

/// Per module, the names it brings into scope (`use x::Name`, `pub use`, `pub(crate) use`: a
/// child's `super::Name` finds a private `use` too) and the path each stands for.
type Reexports = BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>;

fn reexports_of(code: &str, here: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let Some(rest) = stmt
            .strip_prefix("pub use ")
            .or_else(|| stmt.strip_prefix("use "))
            .or_else(|| stmt.strip_prefix("pub(crate) use "))
            .or_else(|| stmt.strip_prefix("pub(super) use "))
        else {
            continue;
        };
        let rest: String = rest.split_whitespace().collect::<Vec<_>>().join(" ");
        let rest = if rest.starts_with("crate::")
            || rest.starts_with("super::")
            || rest.starts_with("self::")
        {
            rest
        } else {
            format!("self::{rest}")
        };
        for path in expand(&rest.replace(", ", ",").replace(" ,", ",")) {
            let (path, alias) = match path.split_once(" as ") {
                Some((p, a)) => (p.to_string(), a.trim().to_string()),
                None => (path.clone(), path.rsplit("::").next().unwrap().to_string()),
            };
            out.insert(alias, absolute(&path, here));
        }
    }
    out
}

/// The circles of `edges` (strongly connected components of more than one file).
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Tarjan's algorithm, iterative enough for a few hundred files by recursion.
    struct State<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, usize>,
        low: BTreeMap<&'a PathBuf, usize>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        next: usize,
        found: Vec<Vec<PathBuf>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a PathBuf) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            let w = edges.get_key_value(w).map(|(k, _)| k).unwrap_or(w);
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[w].min(s.low[v]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.index[w].min(s.low[v]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.clone());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_source_keeps_its_shape_files_functions_layers_and_no_import_circles() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    all.sort();
    let long: Vec<String> = all
        .iter()
        .filter_map(|f| {
            let lines = std::fs::read_to_string(f).unwrap().lines().count();
            (lines > MAX_LINES).then(|| format!("{} ({lines} lines)", f.display()))
        })
        .collect();
    let modules: Modules = all.iter().map(|f| (module_of(f), f.clone())).collect();
    let codes: BTreeMap<PathBuf, String> = all
        .iter()
        .map(|f| (f.clone(), code_of(&std::fs::read_to_string(f).unwrap())))
        .collect();
    let reexports: Reexports = all
        .iter()
        .map(|f| (module_of(f), reexports_of(&codes[f], &module_of(f))))
        .collect();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut why: BTreeMap<(PathBuf, PathBuf), String> = BTreeMap::new();
    for f in &all {
        let here = module_of(f);
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == here.len() + 1 && m.starts_with(&here))
            .map(|m| m.last().unwrap().clone())
            .collect();
        for path in paths_in(&codes[f], &here, &children) {
            let Some(target) = resolve(&path, &modules, &reexports, 0) else {
                continue;
            };
            if &target != f {
                edges.entry(f.clone()).or_default().insert(target.clone());
                why.entry((f.clone(), target)).or_insert(path.join("::"));
            }
        }
    }
    let found = circles(&edges);
    let name = |p: &PathBuf| p.strip_prefix(src()).unwrap().display().to_string();
    let mut report = String::new();
    let mut bad_circles = 0;
    for circle in &found {
        let names: Vec<String> = circle.iter().map(name).collect();
        bad_circles += 1;
        report.push_str(&format!("circle: {}\n", names.join(" ⇄ ")));
        for a in circle {
            for b in circle {
                if let Some(path) = why.get(&(a.clone(), b.clone())) {
                    report.push_str(&format!("  {} uses {} ({path})\n", name(a), name(b)));
                }
            }
        }
    }
    // Layer directions.
    let top = |p: &PathBuf| {
        let n = name(p);
        n.split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut crossings = Vec::new();
    for (from, tos) in &edges {
        for to in tos {
            let (a, b) = (top(from), top(to));
            let pair = (name(from), name(to));
            if NEVER.iter().any(|(x, y)| *x == a && *y == b)
                && !KNOWN_CROSSINGS
                    .iter()
                    .any(|(x, y)| *x == pair.0 && *y == pair.1)
            {
                let path = &why[&(from.clone(), to.clone())];
                crossings.push(format!(
                    "{} → {} ({path}): {a} never imports {b}",
                    pair.0, pair.1
                ));
            }
        }
    }
    // A known crossing that is gone is taken off the list, so the list only shrinks.
    let stale: Vec<String> = KNOWN_CROSSINGS
        .iter()
        .filter(|(x, y)| {
            !edges
                .iter()
                .any(|(f, tos)| name(f) == *x && tos.iter().any(|t| name(t) == *y))
        })
        .map(|(x, y)| format!("{x} → {y} is gone: remove it from KNOWN_CROSSINGS"))
        .collect();
    crossings.extend(stale);
    // Functions.
    let mut long_fns = Vec::new();
    for f in &all {
        for (fn_name, lines) in functions(&codes[f]) {
            if lines > MAX_FN_LINES {
                long_fns.push(format!("{}: fn {fn_name} ({lines} lines)", name(f)));
            }
        }
    }
    for f in &all {
        let lines = std::fs::read_to_string(f).unwrap().lines().count();
        if lines > SPLIT_LINES {
            println!(
                "{} has {lines} lines (over {SPLIT_LINES}: split it by what it holds)",
                name(f)
            );
        }
    }
    assert!(
        long.is_empty() && bad_circles == 0 && crossings.is_empty() && long_fns.is_empty(),
        "files over {MAX_LINES} lines: {long:?}\nfunctions over {MAX_FN_LINES} lines: \
         {long_fns:?}\nlayer crossings: {crossings:#?}\n{bad_circles} import circles:\n{report}"
    );
}

/// Each function of `code` (unit tests aside) and how many lines it spans.
fn functions(code: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let t = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        let t = t.strip_prefix("async ").unwrap_or(t);
        let t = t.strip_prefix("const ").unwrap_or(t);
        let Some(rest) = t.strip_prefix("fn ") else {
            continue;
        };
        let fn_name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0i32, false);
        for (j, l) in lines[i..].iter().enumerate() {
            for c in l.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                out.push((fn_name.clone(), j + 1));
                break;
            }
        }
    }
    out
}

/// The `mod` names a file declares (`mod x;`, `pub mod x;`, `pub(…) mod x;`, `#[cfg(test)] mod
/// tests;`), whatever its attributes.
fn declared_modules(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("#[cfg(test)]").unwrap_or(l).trim();
            let rest = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub(super) "))
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// Every source and test file is reached by a `mod` line of its parent: a file nobody declares
/// is never compiled, and its tests never run.
#[test]
fn no_source_or_test_file_is_forgotten() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut forgotten = Vec::new();
    for base in [root.join("src"), root.join("tests/it")] {
        let mut all = Vec::new();
        files(&base, &mut all);
        for f in &all {
            let rel = f.strip_prefix(&base).unwrap();
            if rel.starts_with("bin") || rel == Path::new("lib.rs") || rel == Path::new("main.rs") {
                continue;
            }
            let dir = f.parent().unwrap();
            let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
            // The module's name, and the folder its parent module's file is in or named after.
            let (name, here) = match stem.as_str() {
                "mod" => (
                    dir.file_name().unwrap().to_string_lossy().into_owned(),
                    dir.parent().unwrap(),
                ),
                _ => (stem, dir),
            };
            let mut parents = vec![here.join("mod.rs"), here.with_extension("rs")];
            if here == base {
                parents.extend([base.join("lib.rs"), base.join("main.rs")]);
            }
            let declared = parents
                .iter()
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .any(|text| declared_modules(&text).contains(&name));
            if !declared {
                forgotten.push(rel.display().to_string());
            }
        }
    }
    assert!(
        forgotten.is_empty(),
        "files no `mod` line declares: {forgotten:?}"
    );
}
