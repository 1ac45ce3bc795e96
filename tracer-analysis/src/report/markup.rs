//! What the HTML report's pieces share: escaping text for HTML and SVG, the colour of
//! each procedure and call, and the figures as people read them.

use std::collections::HashMap;

use super::types::Report;
use crate::graph::path::{Activity, OUTSIDE};

/// Text made safe for HTML and SVG, in element content and in quoted attributes alike.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Colours of the names, in the order names get them: red first, for the procedure with
/// the largest share of the path.
const COLOURS: &[&str] = &[
    "#e15759", "#4e79a7", "#f28e2b", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6", "#d37295", "#a0cbe8",
];

/// Work outside the selected procedures: grey, whatever else there is.
const OUTSIDE_COLOUR: &str = "#c8c8c8";

/// A line of the timeline's legend: a name on the path and its colour.
pub(crate) struct LegendEntry<'a> {
    pub(crate) name: &'a str,
    pub(crate) colour: &'static str,
}

/// A colour for every procedure and every call the path waits in, the same in the
/// timeline, its legend and the procedure table.
pub(crate) struct Palette {
    names: Vec<String>,
    colours: HashMap<String, &'static str>,
}

impl Palette {
    /// The report's procedures first (largest share of the path first), then the
    /// calls the path waits in, in the order it meets them.
    pub(crate) fn of_report(r: &Report) -> Palette {
        let mut p = Palette {
            names: Vec::new(),
            colours: HashMap::new(),
        };
        for row in &r.procedures {
            p.add(&row.name);
        }
        for a in &r.activities {
            p.add(a.kind_name());
        }
        p
    }

    fn add(&mut self, name: &str) {
        if self.colours.contains_key(name) {
            return;
        }
        let colour = if name == OUTSIDE {
            OUTSIDE_COLOUR
        } else {
            let coloured = self.names.iter().filter(|n| *n != OUTSIDE).count();
            COLOURS[coloured % COLOURS.len()]
        };
        self.names.push(name.to_string());
        self.colours.insert(name.to_string(), colour);
    }

    pub(crate) fn colour(&self, name: &str) -> &'static str {
        self.colours.get(name).copied().unwrap_or(OUTSIDE_COLOUR)
    }

    /// The names on the path, with their colours, in palette order.
    pub(crate) fn on_path<'a>(&'a self, acts: &[Activity]) -> Vec<LegendEntry<'a>> {
        let used: std::collections::HashSet<&str> = acts.iter().map(|a| a.kind_name()).collect();
        self.names
            .iter()
            .filter(|n| used.contains(n.as_str()))
            .map(|n| LegendEntry {
                name: n.as_str(),
                colour: self.colour(n),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">Tom & 'Jerry'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; &#39;Jerry&#39;&lt;/a&gt;"
        );
        assert_eq!(escape("a\u{0}b"), "a b");
    }
}
