//! Android's binary XML, as an APK holds its `AndroidManifest.xml`: a
//! string pool, a map of attribute names to resource ids, and the elements
//! as start and end chunks (AOSP's `ResourceTypes.h` describes them).
//! Read into [`Element`]s with their attributes.

/// One element, its attributes (by name, the `android:` prefix dropped)
/// and its children.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Element {
    pub name: String,
    pub attributes: Vec<(String, Attribute)>,
    pub children: Vec<Element>,
}

/// An attribute's value: a string, or a typed number.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    String(String),
    Int(i64),
    Bool(bool),
    /// A reference to a resource (`@string/app_name`): its id.
    Reference(u32),
    Other(u32),
}

impl Attribute {
    /// As text: a string as it is, a number in decimal.
    pub fn text(&self) -> String {
        match self {
            Attribute::String(s) => s.clone(),
            Attribute::Int(n) => n.to_string(),
            Attribute::Bool(b) => b.to_string(),
            Attribute::Reference(id) => format!("@0x{id:08x}"),
            Attribute::Other(raw) => format!("0x{raw:08x}"),
        }
    }
}

impl Element {
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    /// Every descendant named `name`, depth first.
    pub fn descendants<'a>(&'a self, name: &'a str) -> Box<dyn Iterator<Item = &'a Element> + 'a> {
        Box::new(
            self.children
                .iter()
                .flat_map(move |c| std::iter::once(c).filter(move |c| c.name == name).chain(c.descendants(name))),
        )
    }
}

const RES_STRING_POOL: u16 = 0x0001;
const RES_XML: u16 = 0x0003;
const RES_XML_START_ELEMENT: u16 = 0x0102;
const RES_XML_END_ELEMENT: u16 = 0x0103;
const RES_XML_RESOURCE_MAP: u16 = 0x0180;
const UTF8_FLAG: u32 = 1 << 8;

/// The attributes of the `android:` namespace a manifest is read by, by
/// resource id: a shrunk APK may keep the ids and drop the names.
const ANDROID_ATTRIBUTES: [(u32, &str); 6] = [
    (0x0101_0003, "name"),
    (0x0101_021b, "versionCode"),
    (0x0101_021c, "versionName"),
    (0x0101_020c, "minSdkVersion"),
    (0x0101_0270, "targetSdkVersion"),
    (0x0101_0001, "label"),
];

/// Reads a binary XML document: its root element.
pub fn parse(bytes: &[u8]) -> Result<Element, String> {
    let header = Chunk::at(bytes, 0)?;
    if header.kind != RES_XML {
        return Err(format!("not binary XML (chunk type {:#06x})", header.kind));
    }
    let mut strings: Vec<String> = Vec::new();
    let mut ids: Vec<u32> = Vec::new();
    let mut open: Vec<Element> = Vec::new();
    let mut root = None;
    let mut at = usize::from(header.header_size);
    while at < header.size.min(bytes.len()) {
        let chunk = Chunk::at(bytes, at)?;
        let body = bytes
            .get(at..at + chunk.size)
            .ok_or_else(|| format!("a chunk at byte {at} of {} bytes runs past the end", chunk.size))?;
        match chunk.kind {
            RES_STRING_POOL => strings = string_pool(body)?,
            RES_XML_RESOURCE_MAP => {
                let map = body.get(usize::from(chunk.header_size)..).ok_or("a resource map shorter than its header")?;
                ids = map.chunks_exact(4).map(le32).collect();
            }
            RES_XML_START_ELEMENT => open.push(start_element(body, &strings, &ids)?),
            RES_XML_END_ELEMENT => {
                let element = open.pop().ok_or_else(|| format!("an element ends at byte {at} that never started"))?;
                match open.last_mut() {
                    Some(parent) => parent.children.push(element),
                    None => root = Some(element),
                }
            }
            _ => {}
        }
        at += chunk.size;
    }
    root.ok_or_else(|| "binary XML with no element".into())
}

struct Chunk {
    kind: u16,
    header_size: u16,
    size: usize,
}

impl Chunk {
    fn at(bytes: &[u8], at: usize) -> Result<Self, String> {
        let head = bytes.get(at..at + 8).ok_or_else(|| format!("a chunk at byte {at} past the end"))?;
        let chunk = Chunk {
            kind: u16::from_le_bytes([head[0], head[1]]),
            header_size: u16::from_le_bytes([head[2], head[3]]),
            size: le32(&head[4..8]) as usize,
        };
        if chunk.size < 8 || at + chunk.size > bytes.len() && chunk.kind != RES_XML {
            return Err(format!("a chunk at byte {at} of {} bytes runs past the end", chunk.size));
        }
        Ok(chunk)
    }
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le16(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

/// A string pool chunk: its strings, UTF-8 or UTF-16.
fn string_pool(chunk: &[u8]) -> Result<Vec<String>, String> {
    let field = |at: usize| chunk.get(at..at + 4).map(le32).ok_or("a string pool shorter than its header");
    let count = field(8)? as usize;
    let flags = field(16)?;
    let strings_start = field(20)? as usize;
    let header_size = usize::from(chunk.get(2..4).map(le16).ok_or("a string pool shorter than its header")?);
    (0..count)
        .map(|i| {
            let offset = field(header_size + i * 4)? as usize;
            let at = strings_start + offset;
            if flags & UTF8_FLAG != 0 { utf8_string(chunk, at) } else { utf16_string(chunk, at) }
        })
        .collect::<Result<_, &str>>()
        .map_err(str::to_owned)
}

fn utf8_string(chunk: &[u8], mut at: usize) -> Result<String, &'static str> {
    // Its length in UTF-16 units (skipped), then in bytes; each one or two bytes.
    let units = *chunk.get(at).ok_or("a string past the pool's end")?;
    at += if units & 0x80 != 0 { 2 } else { 1 };
    let first = *chunk.get(at).ok_or("a string past the pool's end")?;
    let (len, skip) = if first & 0x80 != 0 {
        let second = *chunk.get(at + 1).ok_or("a string past the pool's end")?;
        ((usize::from(first & 0x7f) << 8) | usize::from(second), 2)
    } else {
        (usize::from(first), 1)
    };
    let raw = chunk.get(at + skip..at + skip + len).ok_or("a string past the pool's end")?;
    Ok(String::from_utf8_lossy(raw).into_owned())
}

fn utf16_string(chunk: &[u8], at: usize) -> Result<String, &'static str> {
    let first = usize::from(le16(chunk.get(at..at + 2).ok_or("a string past the pool's end")?));
    let (len, skip) = if first & 0x8000 != 0 {
        let second = usize::from(le16(chunk.get(at + 2..at + 4).ok_or("a string past the pool's end")?));
        (((first & 0x7fff) << 16) | second, 4)
    } else {
        (first, 2)
    };
    let raw = chunk.get(at + skip..at + skip + len * 2).ok_or("a string past the pool's end")?;
    let units: Vec<u16> = raw.chunks_exact(2).map(le16).collect();
    Ok(String::from_utf16_lossy(&units))
}

/// A start-element chunk: its name and attributes.
fn start_element(chunk: &[u8], strings: &[String], ids: &[u32]) -> Result<Element, String> {
    let string = |index: u32| strings.get(index as usize).cloned().unwrap_or_default();
    // After the 16-byte node header: ns, name, attributeStart, attributeSize, attributeCount.
    let ext = chunk.get(16..36).ok_or("a start element shorter than its header")?;
    let name = string(le32(&ext[4..8]));
    let (start, size, count) =
        (usize::from(le16(&ext[8..10])), usize::from(le16(&ext[10..12])), usize::from(le16(&ext[12..14])));
    let mut attributes = Vec::with_capacity(count);
    for i in 0..count {
        let at = 16 + start + i * size;
        let a = chunk.get(at..at + 20).ok_or("an attribute past the element's end")?;
        let name_index = le32(&a[4..8]);
        let mut name = string(name_index);
        if name.is_empty()
            && let Some(id) = ids.get(name_index as usize)
            && let Some((_, known)) = ANDROID_ATTRIBUTES.iter().find(|(known, _)| known == id)
        {
            name = (*known).to_owned();
        }
        let raw = le32(&a[8..12]);
        let (data_type, data) = (a[15], le32(&a[16..20]));
        let value = match data_type {
            0x03 => Attribute::String(string(if raw != u32::MAX { raw } else { data })),
            0x01 => Attribute::Reference(data),
            0x10 | 0x11 => Attribute::Int(i64::from(data as i32)),
            0x12 => Attribute::Bool(data != 0),
            _ if raw != u32::MAX => Attribute::String(string(raw)),
            _ => Attribute::Other(data),
        };
        attributes.push((name, value));
    }
    Ok(Element { name, attributes, children: Vec::new() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A document whose chunks say they are bigger than the bytes it has,
    /// cut anywhere: an error, never a panic.
    #[test]
    fn a_document_that_lies_about_its_sizes_is_an_error() {
        let mut doc = Vec::new();
        doc.extend_from_slice(&RES_XML.to_le_bytes());
        doc.extend_from_slice(&8u16.to_le_bytes());
        doc.extend_from_slice(&64u32.to_le_bytes());
        // An inner chunk of the document's own type, claiming a megabyte.
        doc.extend_from_slice(&RES_XML.to_le_bytes());
        doc.extend_from_slice(&8u16.to_le_bytes());
        doc.extend_from_slice(&(1u32 << 20).to_le_bytes());
        // A resource map whose header says it is longer than itself.
        doc.extend_from_slice(&RES_XML_RESOURCE_MAP.to_le_bytes());
        doc.extend_from_slice(&200u16.to_le_bytes());
        doc.extend_from_slice(&12u32.to_le_bytes());
        doc.extend_from_slice(&[0; 4]);
        for end in 0..=doc.len() {
            assert!(parse(&doc[..end]).is_err(), "{end} bytes");
        }
        let mut map_first = doc[..8].to_vec();
        map_first.extend_from_slice(&doc[16..]);
        assert!(parse(&map_first).is_err());
    }
}
