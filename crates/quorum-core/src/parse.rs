//! Resilient extraction of JSON from model output: fences, prose, list markers, truncation.
//!
//! Models wrap JSON in prose, fence it, drop commas, stop mid-object. These functions recover as
//! much structured data as the text honestly contains, and say how they got it ([`Recovery`]), so
//! the report can count outputs that needed repair.
//!
//! The ladder, cheapest and most faithful first:
//! 1. the whole text (after dropping `<think>` blocks) is valid JSON: [`Recovery::Clean`];
//! 2. the first fenced block, or failing that the whole text, holds complete top-level JSON
//!    values among prose, possibly after small repairs (trailing commas, missing commas between
//!    values, raw newlines inside strings, `True`/`None`, `//` comments): [`Recovery::Extracted`];
//! 3. objects are recovered one at a time around their id key, closing a truncated last object:
//!    [`Recovery::Salvaged`]. Objects nested inside an item (a finding's `location`, its
//!    `references`) are never returned as items, and fragments with no content beyond a cut-off
//!    id are dropped rather than handed on as data.
//!
//! Reasoning is never mistaken for the answer: `<think>` blocks are removed, and a block the
//! model never closed (it ran out of tokens while thinking) is dropped to the end of the text,
//! so such output is [`ParseError::Empty`] even when its drafts contain JSON. Text that looks
//! like JSON but yields nothing is [`ParseError::Truncated`]; single-quoted pseudo-JSON lands
//! there too, deliberately unrepaired: telling a quote from an apostrophe needs guesses that
//! would corrupt as much as they recover.
//!
//! All scanning is byte-oriented on ASCII delimiters, so every slice boundary is a char boundary.
//!
//! The rooms: the public ladder (`extract`), what a text's JSON holds (`interpret`), salvage
//! (`salvage`), repairs of near-JSON (`repair`), byte-level scanning (`scan`) and lenient
//! scalars (`lenient`). This module only declares them and re-exports the public items, so
//! each has one path.

mod extract;
mod interpret;
mod lenient;
mod repair;
mod salvage;
mod scan;

pub use extract::{dedup_by_key, extract_object, extract_objects, ParseError, Recovery};
pub use lenient::{lenient_f64, lenient_string, lenient_u32};
