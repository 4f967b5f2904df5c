//! What a page's HTML says, read by a streaming HTML5 tokenizer (`lol_html`) in one pass with
//! bounded memory: no DOM is built, so a 5 MB page or a million nested `<div>`s costs the same
//! few kilobytes of state. Lists are capped; counts are not.

use lol_html::{HtmlRewriter, MemorySettings, Settings, element, text};

/// At most this many URLs or links of one kind are kept.
const MAX_LISTED: usize = 500;
/// Inline script text kept for tracker and consent-manager detection.
const MAX_INLINE_SCRIPT: usize = 256 * 1024;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HtmlFacts {
    pub lang: Option<String>,
    pub title: Option<String>,
    pub meta_description: Option<String>,
    pub viewport: bool,
    pub robots_noindex: bool,
    pub canonical: Option<String>,
    pub hreflang: Vec<String>,
    pub h1_count: usize,
    pub images: usize,
    pub images_without_alt: usize,
    /// `og:*` properties present.
    pub open_graph: Vec<String>,
    pub json_ld_blocks: usize,
    /// `@type`s of the JSON-LD blocks (also inside `@graph`).
    pub json_ld_types: Vec<String>,
    /// `<script src>`: the URL and whether it carries `integrity`.
    pub scripts: Vec<(String, bool)>,
    pub inline_script: String,
    pub iframes: Vec<String>,
    pub stylesheets: Vec<String>,
    pub image_urls: Vec<String>,
    /// `<a href>` and its text.
    pub links: Vec<(String, String)>,
    pub elements: usize,
    /// The tokenizer stopped early (its memory limit, or markup it cannot read).
    pub truncated: bool,
}

fn push(list: &mut Vec<String>, v: String) {
    if list.len() < MAX_LISTED {
        list.push(v);
    }
}

fn json_ld_types(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Array(items) => items.iter().for_each(|i| json_ld_types(i, out)),
        serde_json::Value::Object(o) => {
            match o.get("@type") {
                Some(serde_json::Value::String(t)) => push(out, t.clone()),
                Some(serde_json::Value::Array(ts)) => ts.iter().filter_map(|t| t.as_str()).for_each(|t| push(out, t.to_string())),
                _ => {}
            }
            if let Some(g) = o.get("@graph") {
                json_ld_types(g, out);
            }
        }
        _ => {}
    }
}

/// Read the page. Invalid UTF-8 is decoded lossily; markup the tokenizer gives up on leaves
/// the facts read so far and `truncated`.
pub fn extract(html: &[u8]) -> HtmlFacts {
    use std::cell::RefCell;
    let f = RefCell::new(HtmlFacts::default());
    let (title, ld, anchor) = (RefCell::new(String::new()), RefCell::new(String::new()), RefCell::new(None::<(String, String)>));
    let handlers = vec![
        element!("*", |_| {
            f.borrow_mut().elements += 1;
            Ok(())
        }),
        element!("html[lang]", |el| {
            f.borrow_mut().lang = el.get_attribute("lang").filter(|l| !l.trim().is_empty());
            Ok(())
        }),
        text!("title", |t| {
            let mut s = title.borrow_mut();
            if s.len() < 4096 {
                s.push_str(t.as_str());
            }
            Ok(())
        }),
        element!("meta", |el| {
            let name = el.get_attribute("name").unwrap_or_default().to_ascii_lowercase();
            let property = el.get_attribute("property").unwrap_or_default().to_ascii_lowercase();
            let content = el.get_attribute("content").unwrap_or_default();
            let mut f = f.borrow_mut();
            match name.as_str() {
                "description" => f.meta_description = Some(content.trim().to_string()),
                "viewport" => f.viewport = !content.trim().is_empty(),
                "robots" if content.to_ascii_lowercase().contains("noindex") => f.robots_noindex = true,
                _ => {}
            }
            if property.starts_with("og:") && !content.trim().is_empty() {
                push(&mut f.open_graph, property);
            }
            Ok(())
        }),
        element!("link[href]", |el| {
            let rel = el.get_attribute("rel").unwrap_or_default().to_ascii_lowercase();
            let href = el.get_attribute("href").unwrap_or_default();
            let mut f = f.borrow_mut();
            let rels: Vec<&str> = rel.split_whitespace().collect();
            if rels.contains(&"canonical") {
                f.canonical = Some(href.clone());
            }
            if rels.contains(&"alternate")
                && let Some(l) = el.get_attribute("hreflang")
            {
                push(&mut f.hreflang, l);
            }
            if rels.contains(&"stylesheet") {
                push(&mut f.stylesheets, href);
            }
            Ok(())
        }),
        element!("h1", |_| {
            f.borrow_mut().h1_count += 1;
            Ok(())
        }),
        element!("img", |el| {
            let mut f = f.borrow_mut();
            f.images += 1;
            if el.get_attribute("alt").is_none() {
                f.images_without_alt += 1;
            }
            if let Some(src) = el.get_attribute("src") {
                push(&mut f.image_urls, src);
            }
            Ok(())
        }),
        element!("script[src]", |el| {
            let src = el.get_attribute("src").unwrap_or_default();
            let mut f = f.borrow_mut();
            if f.scripts.len() < MAX_LISTED {
                f.scripts.push((src, el.has_attribute("integrity")));
            }
            Ok(())
        }),
        text!("script:not([src])", |t| {
            let mut f = f.borrow_mut();
            if f.inline_script.len() < MAX_INLINE_SCRIPT {
                f.inline_script.push_str(t.as_str());
            }
            Ok(())
        }),
        element!(r#"script[type="application/ld+json"]"#, |_| {
            f.borrow_mut().json_ld_blocks += 1;
            ld.borrow_mut().clear();
            Ok(())
        }),
        text!(r#"script[type="application/ld+json"]"#, |t| {
            let mut s = ld.borrow_mut();
            if s.len() < MAX_INLINE_SCRIPT {
                s.push_str(t.as_str());
            }
            if t.last_in_text_node()
                && let Ok(v) = serde_json::from_str::<serde_json::Value>(&s)
            {
                json_ld_types(&v, &mut f.borrow_mut().json_ld_types);
            }
            Ok(())
        }),
        element!("iframe[src]", |el| {
            push(&mut f.borrow_mut().iframes, el.get_attribute("src").unwrap_or_default());
            Ok(())
        }),
        element!("a[href]", |el| {
            let mut last = anchor.borrow_mut();
            if let Some(done) = last.take() {
                let mut f = f.borrow_mut();
                if f.links.len() < MAX_LISTED {
                    f.links.push(done);
                }
            }
            *last = Some((el.get_attribute("href").unwrap_or_default(), String::new()));
            Ok(())
        }),
        text!("a[href]", |t| {
            if let Some((_, text)) = anchor.borrow_mut().as_mut()
                && text.len() < 200
            {
                text.push_str(t.as_str());
            }
            Ok(())
        }),
    ];
    let settings = handlers
        .into_iter()
        .fold(Settings::new(), |s, h| s.append_element_content_handler(h))
        .with_strict(false)
        .with_memory_settings(MemorySettings::new().with_max_allowed_memory_usage(8 * 1024 * 1024));
    let ok = {
        let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
        html.chunks(64 * 1024).all(|c| rewriter.write(c).is_ok()) && rewriter.end().is_ok()
    };
    let mut facts = f.into_inner();
    facts.truncated = !ok;
    if let Some(done) = anchor.into_inner()
        && facts.links.len() < MAX_LISTED
    {
        facts.links.push(done);
    }
    let title = title.into_inner();
    facts.title = (!title.trim().is_empty()).then(|| decode_entities(&title.split_whitespace().collect::<Vec<_>>().join(" ")));
    for (_, text) in &mut facts.links {
        *text = decode_entities(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    facts
}

/// Text nodes come raw from the tokenizer: the common named entities, for evidence.
fn decode_entities(s: &str) -> String {
    s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&nbsp;", " ").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_read_in_one_pass() {
        let html = br#"<!doctype html><html lang="en"><head>
            <title> Acme &amp; Co
               shop </title>
            <meta name="description" content="We sell anvils.">
            <meta name="viewport" content="width=device-width">
            <meta property="og:title" content="Acme"><meta property="og:image" content="">
            <link rel="canonical" href="https://acme.test/"><link rel="alternate" hreflang="de" href="/de">
            <link rel="stylesheet" href="/app.css">
            <script src="https://cdn.example/lib.js" integrity="sha384-x"></script>
            <script src="/app.js"></script>
            <script>gtag('config', 'G-1')</script>
            <script type="application/ld+json">{"@context":"https://schema.org","@graph":[{"@type":"Organization"},{"@type":["WebSite","Thing"]}]}</script>
            </head><body><h1>Anvils</h1><img src="/a.png" alt="An anvil"><img src="/b.png">
            <a href="/privacy">Privacy policy</a><a href="/about">About <b>us</b></a>
            <iframe src="https://www.youtube.com/embed/x"></iframe></body></html>"#;
        let f = extract(html);
        assert_eq!(f.lang.as_deref(), Some("en"));
        assert_eq!(f.title.as_deref(), Some("Acme & Co shop"));
        assert_eq!(f.meta_description.as_deref(), Some("We sell anvils."));
        assert!(f.viewport && !f.robots_noindex);
        assert_eq!(f.open_graph, vec!["og:title"]);
        assert_eq!(f.canonical.as_deref(), Some("https://acme.test/"));
        assert_eq!(f.hreflang, vec!["de"]);
        assert_eq!(f.stylesheets, vec!["/app.css"]);
        assert_eq!(f.scripts, vec![("https://cdn.example/lib.js".into(), true), ("/app.js".into(), false)]);
        assert!(f.inline_script.contains("gtag"));
        assert_eq!((f.json_ld_blocks, f.json_ld_types.clone()), (1, vec!["Organization".to_string(), "WebSite".into(), "Thing".into()]));
        assert_eq!((f.h1_count, f.images, f.images_without_alt), (1, 2, 1));
        assert_eq!(f.links, vec![("/privacy".into(), "Privacy policy".into()), ("/about".into(), "About us".into())]);
        assert_eq!(f.iframes, vec!["https://www.youtube.com/embed/x"]);
        assert!(!f.truncated);
    }

    #[test]
    fn hostile_markup_is_read_with_bounded_memory() {
        // A million nested elements, invalid UTF-8, an unclosed title.
        let mut html = b"<html><body>".to_vec();
        html.extend(std::iter::repeat_n(&b"<div>"[..], 1_000_000).flatten());
        html.extend_from_slice(b"\xff\xfe<h1>x</h1><title>open");
        let f = extract(&html);
        assert!(f.elements >= 1_000_000 || f.truncated, "{} elements", f.elements);
        assert_eq!(f.h1_count, usize::from(!f.truncated));
        let noindex = extract(br#"<meta name="ROBOTS" content="NOINDEX, follow">"#);
        assert!(noindex.robots_noindex);
    }
}
