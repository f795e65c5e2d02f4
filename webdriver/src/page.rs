//! The page source: one XML element per element of a `screen` snapshot,
//! nested by `parent`, with the attributes docs/webdriver.md documents; and XPath
//! 1.0 over that same document, so that what a client reads in the source is
//! what its XPath finds.
//!
//! ```xml
//! <hierarchy route="Login" commit="42" width="390" height="844">
//!   <View i="0" kind="view" index="0" testId="screen" enabled="true" displayed="true" x="0" y="0" ...>
//!     <Button i="4" kind="button" index="2" testId="login" text="Log in" name="login" .../>
//! ```

use argus_proto::wire::{Element, ElementKind, Screen};
use sxd_document::Package;
use sxd_document::dom::{Document, Element as Node};

use super::error::{Code, WdError, WdResult};

/// The tag an element kind gets, and the class names that select it.
pub fn tag(kind: ElementKind) -> &'static str {
    match kind {
        ElementKind::Button => "Button",
        ElementKind::Input => "TextField",
        ElementKind::Text => "Text",
        ElementKind::Scroll => "ScrollView",
        ElementKind::Switch => "Switch",
        ElementKind::Image => "Image",
        ElementKind::View => "View",
    }
}

/// The kind a `class name` names: our tags, lynkeus kinds, and the iOS and
/// Android class names a copied locator uses. None: no element has it.
pub fn kind_of_class(class: &str) -> Option<ElementKind> {
    use ElementKind::*;
    const ALIASES: [(ElementKind, &[&str]); 7] = [
        (Button, &["Button", "button", "XCUIElementTypeButton", "android.widget.Button", "android.widget.ImageButton"]),
        (
            Input,
            &[
                "TextField",
                "input",
                "XCUIElementTypeTextField",
                "XCUIElementTypeSecureTextField",
                "XCUIElementTypeTextView",
                "android.widget.EditText",
            ],
        ),
        (Text, &["Text", "text", "XCUIElementTypeStaticText", "android.widget.TextView"]),
        (
            Scroll,
            &[
                "ScrollView",
                "scroll",
                "XCUIElementTypeScrollView",
                "XCUIElementTypeTable",
                "XCUIElementTypeCollectionView",
                "android.widget.ScrollView",
                "androidx.recyclerview.widget.RecyclerView",
                "android.widget.ListView",
            ],
        ),
        (
            Switch,
            &["Switch", "switch", "XCUIElementTypeSwitch", "android.widget.Switch", "android.widget.CompoundButton"],
        ),
        (Image, &["Image", "image", "XCUIElementTypeImage", "android.widget.ImageView"]),
        (
            View,
            &[
                "View",
                "view",
                "XCUIElementTypeOther",
                "android.view.View",
                "android.view.ViewGroup",
                "android.widget.FrameLayout",
            ],
        ),
    ];
    ALIASES.iter().find(|(_, names)| names.contains(&class)).map(|(kind, _)| *kind)
}

/// Whether a client should see the element as displayed.
pub fn displayed(element: &Element) -> bool {
    element.hidden.is_none() && !element.is_offscreen()
}

/// The value of attribute `name` of an element as the page source shows it
/// (and its Appium aliases); None when the element has none.
pub fn attribute(element: &Element, name: &str) -> Option<String> {
    let flag = |b: bool| Some(b.to_string());
    let number = |n: f64| Some(format!("{}", n.round() as i64));
    match name {
        "i" => Some(element.i.to_string()),
        "kind" => Some(element.kind.as_str().to_owned()),
        "testId" | "resource-id" | "resourceId" => element.test_id.clone(),
        "text" => element.text.clone(),
        "accessibilityLabel" | "label" | "content-desc" | "contentDescription" => element.accessibility_label.clone(),
        "name" => element.test_id.clone().or_else(|| element.accessibility_label.clone()),
        // An input with nothing in it has an empty value.
        "value" => element.value.clone().or_else(|| (element.kind == ElementKind::Input).then(String::new)),
        "placeholder" => element.placeholder.clone(),
        "enabled" => flag(element.enabled),
        "displayed" | "visible" => flag(displayed(element)),
        "hidden" => element.hidden.map(|h| h.as_str().to_owned()),
        "offscreen" => flag(element.is_offscreen()),
        "covered" => flag(element.is_covered()),
        "focused" => flag(element.is_focused()),
        "selected" | "checked" => flag(selected(element)),
        "type" | "class" | "className" => Some(tag(element.kind).to_owned()),
        "x" => number(element.frame.x),
        "y" => number(element.frame.y),
        "width" => number(element.frame.w),
        "height" => number(element.frame.h),
        "depth" => Some(element.depth.to_string()),
        "bounds" => {
            let f = &element.frame;
            let r = |n: f64| n.round() as i64;
            Some(format!("[{},{}][{},{}]", r(f.x), r(f.y), r(f.x + f.w), r(f.y + f.h)))
        }
        _ => None,
    }
}

/// The attributes every element carries in the source, in order.
const ATTRIBUTES: [&str; 22] = [
    "i",
    "kind",
    "testId",
    "text",
    "accessibilityLabel",
    "value",
    "placeholder",
    "name",
    "label",
    "enabled",
    "displayed",
    "visible",
    "hidden",
    "offscreen",
    "covered",
    "focused",
    "selected",
    "x",
    "y",
    "width",
    "height",
    "depth",
];

/// A switch that is on, or an input that has the focus.
pub fn selected(element: &Element) -> bool {
    match element.kind {
        ElementKind::Switch => element.value.as_deref().is_some_and(|v| matches!(v, "true" | "1" | "on")),
        ElementKind::Input => element.is_focused(),
        _ => false,
    }
}

/// A snapshot as an XML document, built once per find or source.
pub struct Page {
    package: Package,
}

impl Page {
    pub fn new(screen: &Screen) -> Self {
        let package = Package::new();
        {
            let doc = package.as_document();
            let root = doc.create_element("hierarchy");
            let set = |name: &str, value: String| root.set_attribute_value(name, &value);
            if let Some(route) = &screen.route {
                set("route", route.clone());
            }
            if !screen.path.is_empty() {
                set("path", screen.path.join("/"));
            }
            set("commit", screen.commit.to_string());
            set("busy", screen.busy.to_string());
            set("width", format!("{}", screen.window.w.round() as i64));
            set("height", format!("{}", screen.window.h.round() as i64));
            if let Some(presenting) = &screen.presenting {
                set("presenting", presenting.i.to_string());
            }
            doc.root().append_child(root);
            let nodes: Vec<Node> = screen.elements.iter().map(|e| element_node(&doc, e)).collect();
            let mut children = vec![0usize; screen.elements.len() + 1];
            for (n, element) in screen.elements.iter().enumerate() {
                // An element whose parent is missing (or itself, or later in
                // the list, which would make a cycle) hangs off the root.
                let parent =
                    element.parent.and_then(|p| screen.elements.iter().position(|e| e.i == p)).filter(|&p| p < n);
                let (holder, slot) = match parent {
                    Some(p) => (nodes[p], p + 1),
                    None => (root, 0),
                };
                nodes[n].set_attribute_value("index", &children[slot].to_string());
                children[slot] += 1;
                holder.append_child(nodes[n]);
            }
        }
        Self { package }
    }

    /// The document as text.
    pub fn xml(&self) -> String {
        let mut out = Vec::new();
        sxd_document::writer::format_document(&self.package.as_document(), &mut out)
            .expect("writing to memory does not fail");
        String::from_utf8(out).expect("the writer writes UTF-8")
    }

    /// The `i` of each element `xpath` selects, in document order; relative
    /// to the element `within` (its `i`) when given.
    pub fn select(&self, xpath: &str, within: Option<usize>) -> WdResult<Vec<usize>> {
        let invalid = |why: String| WdError::new(Code::InvalidSelector, format!("invalid XPath {xpath:?}: {why}"));
        // The parser recurses per bracket: a hostile expression must not
        // overflow the coordinator's stack.
        if xpath.len() > MAX_XPATH {
            return Err(invalid(format!("it is {} bytes; the limit is {MAX_XPATH}", xpath.len())));
        }
        if nesting(xpath) > MAX_NESTING {
            return Err(invalid(format!("it nests brackets (and unary minuses) more than {MAX_NESTING} deep")));
        }
        let factory = sxd_xpath::Factory::new();
        let compiled =
            factory.build(xpath).map_err(|e| invalid(e.to_string()))?.ok_or_else(|| invalid("it is empty".into()))?;
        let doc = self.package.as_document();
        let context = sxd_xpath::Context::new();
        let start = match within {
            None => sxd_xpath::nodeset::Node::Root(doc.root()),
            Some(i) => match find_node(&doc, i) {
                Some(node) => sxd_xpath::nodeset::Node::Element(node),
                None => return Ok(Vec::new()),
            },
        };
        match compiled.evaluate(&context, start).map_err(|e| invalid(e.to_string()))? {
            sxd_xpath::Value::Nodeset(nodes) => Ok(nodes
                .document_order()
                .into_iter()
                .filter_map(|node| node.element()?.attribute_value("i")?.parse().ok())
                .collect()),
            other => Err(invalid(format!("it selects a {}, not elements", value_kind(&other)))),
        }
    }
}

/// The longest XPath taken, and the deepest nesting of `(` and `[`.
const MAX_XPATH: usize = 4096;
const MAX_NESTING: usize = 32;

/// How deep `xpath` makes the parser recurse, at most: the nesting of `(`
/// and `[` outside its string literals, plus every `-` that is not inside a
/// name (a unary minus recurses once each; `resource-id` does not).
fn nesting(xpath: &str) -> usize {
    let chars: Vec<char> = xpath.chars().collect();
    let name = |c: Option<&char>| c.is_some_and(|c| c.is_alphanumeric() || *c == '_' || *c == '.');
    let (mut depth, mut deepest, mut minuses, mut quote) = (0usize, 0usize, 0usize, None);
    for (n, &c) in chars.iter().enumerate() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ')' | ']') => depth = depth.saturating_sub(1),
            (None, '-') if !(n > 0 && name(chars.get(n - 1)) && name(chars.get(n + 1))) => minuses += 1,
            _ => {}
        }
    }
    deepest + minuses
}

fn value_kind(value: &sxd_xpath::Value) -> &'static str {
    match value {
        sxd_xpath::Value::Boolean(_) => "boolean",
        sxd_xpath::Value::Number(_) => "number",
        sxd_xpath::Value::String(_) => "string",
        sxd_xpath::Value::Nodeset(_) => "node-set",
    }
}

fn element_node<'d>(doc: &Document<'d>, element: &Element) -> Node<'d> {
    let node = doc.create_element(tag(element.kind));
    for name in ATTRIBUTES {
        if let Some(value) = attribute(element, name) {
            node.set_attribute_value(name, &value);
        }
    }
    node
}

fn find_node<'d>(doc: &Document<'d>, i: usize) -> Option<Node<'d>> {
    fn walk<'d>(node: Node<'d>, i: &str) -> Option<Node<'d>> {
        if node.attribute_value("i") == Some(i) {
            return Some(node);
        }
        node.children().into_iter().filter_map(|c| c.element()).find_map(|c| walk(c, i))
    }
    let wanted = i.to_string();
    doc.root().children().into_iter().filter_map(|c| c.element()).find_map(|c| walk(c, &wanted))
}

#[cfg(test)]
pub(crate) mod tests {
    use argus_proto::wire::Screen;
    use serde_json::json;

    use super::*;

    pub fn login_screen() -> Screen {
        serde_json::from_value(json!({
            "route": "Login", "path": ["Login"], "commit": 42, "busy": false,
            "window": {"w": 390, "h": 844}, "costMs": 1,
            "elements": [
                {"i": 0, "kind": "view", "frame": {"x": 0, "y": 0, "w": 390, "h": 844}, "enabled": true, "depth": 0, "testId": "screen"},
                {"i": 1, "kind": "scroll", "frame": {"x": 0, "y": 0, "w": 390, "h": 800}, "enabled": true, "depth": 1, "testId": "form", "parent": 0},
                {"i": 2, "kind": "input", "frame": {"x": 20, "y": 100, "w": 350, "h": 44}, "enabled": true, "depth": 2, "testId": "email", "accessibilityLabel": "Email", "value": "", "parent": 1},
                {"i": 3, "kind": "button", "frame": {"x": 20, "y": 220, "w": 350, "h": 44}, "enabled": false, "depth": 2, "testId": "login", "text": "Log in", "parent": 1},
                {"i": 4, "kind": "text", "frame": {"x": 20, "y": 900, "w": 350, "h": 20}, "enabled": true, "depth": 2, "text": "Terms & <conditions>", "offscreen": true, "parent": 1},
                {"i": 5, "kind": "button", "frame": {"x": 20, "y": 300, "w": 350, "h": 44}, "enabled": true, "depth": 2, "testId": "login", "text": "Log in again", "parent": 1}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn the_source_nests_elements_and_escapes_their_text() {
        let xml = Page::new(&login_screen()).xml();
        let doc = sxd_document::parser::parse(&xml).expect("the source is XML");
        let root = doc.as_document().root().children()[0].element().unwrap();
        assert_eq!(root.name().local_part(), "hierarchy");
        assert_eq!(root.attribute_value("route"), Some("Login"));
        assert!(xml.contains("Terms &amp; &lt;conditions&gt;"), "{xml}");
        assert!(
            xml.contains("<Button i='3' kind='button' testId='login' text='Log in' name='login' enabled='false'"),
            "{xml}"
        );
        assert!(
            xml.contains("<TextField i='2' kind='input' testId='email' accessibilityLabel='Email' value=''"),
            "{xml}"
        );
    }

    #[test]
    fn xpath_finds_what_the_source_shows() {
        let page = Page::new(&login_screen());
        assert_eq!(page.select("//Button[@testId='login']", None).unwrap(), [3, 5]);
        assert_eq!(page.select("(//Button)[2]", None).unwrap(), [5]);
        assert_eq!(page.select("//ScrollView[@testId='form']//TextField", None).unwrap(), [2]);
        assert_eq!(page.select("//*[contains(@text, 'again')]", None).unwrap(), [5]);
        assert_eq!(page.select("//*[@displayed='false']", None).unwrap(), [4]);
        assert_eq!(page.select(".//TextField", Some(1)).unwrap(), [2], "from an element");
        assert!(page.select("//Button[@testId='nope']", None).unwrap().is_empty());
        let error = page.select("//Button[", None).unwrap_err();
        assert_eq!(error.code, Code::InvalidSelector);
        assert_eq!(page.select("count(//Button)", None).unwrap_err().code, Code::InvalidSelector);
        let hostile = "(".repeat(1000);
        assert!(page.select(&hostile, None).unwrap_err().message.contains("more than 32 deep"));
        assert!(page.select(&"/a".repeat(3000), None).unwrap_err().message.contains("the limit is 4096"));
        assert_eq!(
            page.select("//*[@text='((((((((((((((((((((((((((((((((((((']", None).unwrap(),
            Vec::<usize>::new()
        );
        assert!(page.select("//*[@resource-id='login' or @content-desc='x']", None).is_ok(), "names with hyphens pass");
        // Within the limits, the parser's deepest recursions still fit a
        // thread's stack (this test runs on one of 2 MiB, as tokio's do).
        for deep in [
            "-".repeat(4000) + "1",
            "1 or ".repeat(800) + "1",
            "//a".repeat(1300),
            "(".repeat(30) + "1" + &")".repeat(30),
            "-".repeat(30) + "1",
        ] {
            let _ = page.select(&deep, None);
        }
    }

    #[test]
    fn class_names_include_the_platforms_aliases() {
        assert_eq!(kind_of_class("XCUIElementTypeButton"), Some(ElementKind::Button));
        assert_eq!(kind_of_class("android.widget.EditText"), Some(ElementKind::Input));
        assert_eq!(kind_of_class("TextField"), Some(ElementKind::Input));
        assert_eq!(kind_of_class("Marquee"), None);
    }
}
