//! Website scans: what a page's HTML says (`html`), the rules and their scoring (`rules`).
pub mod html;
pub mod rules;
