//! TESTOWNERS: who owns which cases, in CODEOWNERS' syntax over the case
//! files' paths (relative to the suite's folder, as `cases.jsonl` names
//! them). Each line is a pattern and its owners; the last line that
//! matches a file wins; `#` starts a comment; a line with a pattern and no
//! owner leaves its files unowned. Patterns are gitignore's: `*` within a
//! segment, `**` across segments, `?` one character, a leading `/` anchors
//! at the root, a trailing `/` matches a folder and all under it, and a
//! pattern without a `/` but a trailing one matches at any depth.

/// The file's name in a project.
pub const FILE: &str = "TESTOWNERS";
/// The largest TESTOWNERS taken.
pub const MAX_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Owners {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    /// The pattern's segments, anchored at the root or matched at any depth.
    segments: Vec<String>,
    anchored: bool,
    /// Matches a folder: what lies under it.
    folder: bool,
    owners: Vec<String>,
}

impl Owners {
    /// Parses a TESTOWNERS text; every problem named by its line.
    pub fn parse(text: &str) -> Result<Self, Vec<String>> {
        let mut rules = Vec::new();
        let mut problems = Vec::new();
        if text.len() > MAX_BYTES {
            return Err(vec![format!("{FILE}: {} bytes; {MAX_BYTES} at most", text.len())]);
        }
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |problem: String| format!("{FILE}:{}: {problem}", number + 1);
            let mut words = line.split_whitespace();
            let pattern = words.next().unwrap_or_default();
            let mut owners = Vec::new();
            for word in words {
                if word.starts_with('#') {
                    break;
                }
                if word.chars().any(char::is_control) || word.len() > 200 {
                    problems.push(at(format!("{word:?} is not an owner")));
                    continue;
                }
                let team_or_user = word.starts_with('@') && word.len() > 1;
                let email = word.contains('@') && !word.starts_with('@') && word.contains('.');
                if !(team_or_user || email) {
                    problems.push(at(format!("{word:?} is not an owner: write @user, @org/team or an email address")));
                    continue;
                }
                owners.push(word.to_owned());
            }
            if pattern.chars().any(char::is_control) {
                problems.push(at("the pattern holds a control character".into()));
                continue;
            }
            if pattern.starts_with('!') || pattern.contains('[') {
                problems.push(at(format!("{pattern:?}: negation and [ranges] are not CODEOWNERS syntax")));
                continue;
            }
            let folder = pattern.ends_with('/');
            let trimmed = pattern.trim_end_matches('/');
            let anchored = trimmed.starts_with('/') || trimmed.trim_start_matches('/').contains('/');
            let segments: Vec<String> =
                trimmed.trim_start_matches('/').split('/').filter(|s| !s.is_empty()).map(str::to_owned).collect();
            if segments.is_empty() && pattern != "*" {
                problems.push(at(format!("{pattern:?} matches nothing")));
                continue;
            }
            rules.push(Rule { segments, anchored, folder, owners });
        }
        if problems.is_empty() { Ok(Self { rules }) } else { Err(problems) }
    }

    /// The owners of `path` (empty: nobody).
    pub fn of(&self, path: &str) -> &[String] {
        let parts: Vec<&str> = path.trim_start_matches("./").split('/').filter(|p| !p.is_empty()).collect();
        self.rules.iter().rev().find(|rule| rule.matches(&parts)).map_or(&[], |rule| &rule.owners)
    }
}

impl Rule {
    fn matches(&self, parts: &[&str]) -> bool {
        let pattern: Vec<&str> = self.segments.iter().map(String::as_str).collect();
        // A folder pattern (or any pattern, as in git) also matches what lies under what it names.
        let under = |end: usize| end < parts.len();
        let whole = |end: usize| end == parts.len() && !self.folder;
        let ends = |end: usize| whole(end) || under(end);
        if self.anchored {
            prefixes(&pattern, parts).into_iter().any(ends)
        } else {
            (0..parts.len()).any(|start| prefixes(&pattern, &parts[start..]).into_iter().any(|end| ends(start + end)))
        }
    }
}

/// The lengths of the prefixes of `parts` that `pattern` matches whole.
fn prefixes(pattern: &[&str], parts: &[&str]) -> Vec<usize> {
    let Some((first, rest)) = pattern.split_first() else { return vec![0] };
    if *first == "**" {
        return (0..=parts.len())
            .flat_map(|skip| prefixes(rest, &parts[skip..]).into_iter().map(move |n| n + skip))
            .collect();
    }
    match parts.split_first() {
        Some((part, more)) if glob(first, part) => prefixes(rest, more).into_iter().map(|n| n + 1).collect(),
        _ => Vec::new(),
    }
}

/// `*` and `?` within one segment.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The owners of `cases` (case id → owners, space-separated), each once,
/// in the order first met.
pub fn of_cases(cases: &[String], owners: &std::collections::HashMap<String, String>) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for owner in cases.iter().filter_map(|c| owners.get(c)).flat_map(|o| o.split_whitespace()) {
        if !all.iter().any(|seen| seen == owner) {
            all.push(owner.to_owned());
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE_TEXT: &str = "\
# Everything is the platform team's, unless a line below says otherwise.
*                      @acme/platform
cases/checkout/        @ana  bo@acme.example
*.flaky.md             @qa   # flaky ones
/cases/login.md        @acme/auth
docs/**/guide.md       @writer
cases/orphans/
";

    #[test]
    fn the_last_matching_line_wins_as_in_codeowners() {
        let owners = Owners::parse(FILE_TEXT).unwrap();
        assert_eq!(owners.of("cases/home.md"), ["@acme/platform"]);
        assert_eq!(owners.of("cases/checkout/pay.md"), ["@ana", "bo@acme.example"]);
        assert_eq!(owners.of("cases/checkout/deep/card.md"), ["@ana", "bo@acme.example"]);
        assert_eq!(owners.of("cases/checkout/pay.flaky.md"), ["@qa"], "a later line wins");
        assert_eq!(owners.of("cases/login.md"), ["@acme/auth"]);
        assert_eq!(owners.of("other/cases/login.md"), ["@acme/platform"], "anchored at the root");
        assert_eq!(owners.of("docs/a/b/guide.md"), ["@writer"]);
        assert_eq!(owners.of("docs/guide.md"), ["@writer"], "** is zero folders too");
        assert!(owners.of("cases/orphans/x.md").is_empty(), "no owner given: nobody's");
        assert!(Owners::default().of("cases/a.md").is_empty());
    }

    #[test]
    fn a_bad_line_is_named() {
        let problems = Owners::parse("cases/ ana\n!cases/x.md @bo\n/ @x\n").unwrap_err();
        assert_eq!(
            problems,
            [
                "TESTOWNERS:1: \"ana\" is not an owner: write @user, @org/team or an email address",
                "TESTOWNERS:2: \"!cases/x.md\": negation and [ranges] are not CODEOWNERS syntax",
                "TESTOWNERS:3: \"/\" matches nothing",
            ]
        );
    }
}
