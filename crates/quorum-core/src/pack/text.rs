//! A pack file's text, held on the heap or spilled: a large snapshot writes its files' contents
//! once into a private spill file and maps it read-only, so the kernel pages the text in and
//! out as it is read instead of the process holding a multi-GB tree.
//!
//! The spill file is the review's own copy (written by the snapshot, then unlinked while mapped),
//! so what a review reads is still its snapshot: an edit to the working tree after the snapshot
//! cannot reach it, and no other process can open the file by name.

use std::fmt;
use std::io::Write;
use std::ops::Deref;
use std::sync::Arc;

/// UTF-8 text that derefs to `str`, cheap to clone.
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Heap(Arc<str>),
    Mapped {
        map: Arc<memmap2::Mmap>,
        start: usize,
        len: usize,
    },
}

impl Text {
    /// Whether this text lives in a spill file rather than on the heap.
    pub fn is_spilled(&self) -> bool {
        matches!(self.0, Repr::Mapped { .. })
    }

    /// The text as an `Arc<str>`: the same allocation when it is on the heap, a copy when it
    /// is spilled (for callers that keep text past the pack, such as a peer's blob cache).
    pub fn to_arc(&self) -> Arc<str> {
        match &self.0 {
            Repr::Heap(a) => a.clone(),
            Repr::Mapped { .. } => Arc::from(&**self),
        }
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        match &self.0 {
            Repr::Heap(a) => a,
            Repr::Mapped { map, start, len } => {
                let bytes = map.get(*start..start + len).unwrap_or_default();
                // SAFETY: the spill writer stores only text that was checked to be UTF-8
                // (`Spill::push` takes `&str`), at exactly this range, and the mapping is
                // read-only over a file nobody else can open (it is unlinked once mapped).
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
        }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text(Repr::Heap(Arc::from("")))
    }
}

impl From<Arc<str>> for Text {
    fn from(a: Arc<str>) -> Self {
        Text(Repr::Heap(a))
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Text(Repr::Heap(Arc::from(s)))
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(Repr::Heap(Arc::from(s)))
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Text {}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self
    }
}

/// Keeps a pass over a spilled pack from holding the whole spill resident: a mapped page, once
/// read, stays in the process's resident set until the process lets it go, so one pass over
/// every file (hashing, storing, counting) would otherwise leave the whole tree resident. Told
/// each text it is done with, in spill order, it hands back every [`ResidentWindow::STEP`]
/// bytes of the spill read so far; dropped, it hands back the rest of each spill it saw. A
/// page handed back is read again from the spill file if a later reader needs it.
#[derive(Default)]
pub struct ResidentWindow {
    /// Each spill seen: its mapping, how far it was handed back, and how far it was read.
    spills: Vec<(Arc<memmap2::Mmap>, usize, usize)>,
}

impl ResidentWindow {
    /// How much of a spill is read before its pages are handed back.
    pub const STEP: usize = 16 << 20;
    /// Hand-back boundaries are rounded down to this, a multiple of every common page size.
    const ALIGN: usize = 64 << 10;

    pub fn new() -> ResidentWindow {
        ResidentWindow::default()
    }

    /// The pass is done with `text` (a text on the heap is ignored).
    pub fn done_with(&mut self, text: &Text) {
        let Repr::Mapped { map, start, len } = &text.0 else {
            return;
        };
        let end = start + len;
        let at = match self.spills.iter().position(|(m, _, _)| Arc::ptr_eq(m, map)) {
            Some(i) => i,
            None => {
                self.spills.push((map.clone(), 0, 0));
                self.spills.len() - 1
            }
        };
        let (map, released, read) = &mut self.spills[at];
        *read = (*read).max(end);
        let upto = *read / Self::ALIGN * Self::ALIGN;
        if upto >= *released + Self::STEP {
            hand_back(map, *released, upto);
            *released = upto;
        }
    }
}

impl Drop for ResidentWindow {
    fn drop(&mut self) {
        for (map, released, _) in &self.spills {
            hand_back(map, *released, map.len());
        }
    }
}

/// Drop the pages of `map[from..to]` from the resident set (`from` is aligned).
fn hand_back(map: &memmap2::Mmap, from: usize, to: usize) {
    #[cfg(unix)]
    if to > from {
        // SAFETY: MADV_DONTNEED on this read-only private mapping only unmaps the pages: the
        // spill file behind it was written whole before it was mapped and is never written
        // again (created exclusively, unlinked once mapped), so a later read faults in exactly
        // the same bytes, and every `&str` borrowed from the mapping keeps its content.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
        };
    }
    #[cfg(not(unix))]
    let _ = (map, from, to);
}

/// A spill file being written: texts are appended, then [`Spill::finish`] maps the file and
/// hands out each text's [`Text`].
pub struct Spill {
    file: std::io::BufWriter<std::fs::File>,
    path: std::path::PathBuf,
    written: usize,
    ranges: Vec<(usize, usize)>,
}

impl Spill {
    /// A new spill file in `dir` (created 0600 where the platform allows).
    pub fn create(dir: &std::path::Path) -> std::io::Result<Spill> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!(
            "quorum-pack-{}-{}.spill",
            std::process::id(),
            SPILLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).read(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let file = opts.open(&path)?;
        Ok(Spill {
            file: std::io::BufWriter::with_capacity(1 << 20, file),
            path,
            written: 0,
            ranges: Vec::new(),
        })
    }

    /// Append one text; returns its index for [`Spill::finish`]'s result.
    pub fn push(&mut self, text: &str) -> std::io::Result<usize> {
        self.file.write_all(text.as_bytes())?;
        self.ranges.push((self.written, text.len()));
        self.written += text.len();
        Ok(self.ranges.len() - 1)
    }

    /// Map the file read-only, unlink it, and return every pushed text in push order.
    pub fn finish(self) -> std::io::Result<Vec<Text>> {
        let file = self
            .file
            .into_inner()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        file.sync_data()?;
        let map = if self.written == 0 {
            None
        } else {
            // SAFETY: the file is this process's own (created exclusively, 0600) and is
            // unlinked right below, so nothing else can change it while it is mapped.
            Some(Arc::new(unsafe { memmap2::Mmap::map(&file)? }))
        };
        let _ = std::fs::remove_file(&self.path);
        Ok(self
            .ranges
            .into_iter()
            .map(|(start, len)| match &map {
                Some(map) => Text(Repr::Mapped {
                    map: map.clone(),
                    start,
                    len,
                }),
                None => Text::default(),
            })
            .collect())
    }
}

static SPILLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_text_reads_back_exactly_and_leaves_no_file_behind() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::create(dir.path()).unwrap();
        let texts = ["fn main() {}\n", "", "ünïcödé ✓\n", "last"];
        for t in texts {
            spill.push(t).unwrap();
        }
        let got = spill.finish().unwrap();
        assert_eq!(got.len(), 4);
        for (g, t) in got.iter().zip(texts) {
            assert_eq!(&**g, t);
            assert!(g.is_spilled());
            assert_eq!(&*g.to_arc(), t);
        }
        assert_eq!(got[0], Text::from("fn main() {}\n"));
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "the spill file is unlinked once mapped"
        );
        let heap = Text::from("x".to_string());
        assert!(!heap.is_spilled());
        assert_eq!(format!("{heap:?}"), "\"x\"");
    }

    /// The resident kilobytes of the mapping that holds `ptr`, from /proc/self/smaps.
    #[cfg(target_os = "linux")]
    fn resident_kib_of_mapping_at(ptr: *const u8) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let at = ptr as usize;
        let mut inside = false;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = first.split_once('-') {
                if let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    inside = (lo..hi).contains(&at);
                    continue;
                }
            }
            if inside {
                if let Some(kb) = line.strip_prefix("Rss:") {
                    return kb.trim().trim_end_matches("kB").trim().parse().unwrap();
                }
            }
        }
        panic!("no mapping holds {ptr:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pass_through_a_resident_window_leaves_at_most_a_step_of_the_spill_resident() {
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::create(dir.path()).unwrap();
        // 48 MiB in 100 KiB files, each distinct.
        let files: Vec<String> = (0..480)
            .map(|i| format!("{i:08}\n").repeat(100 * 1024 / 9 + 1))
            .collect();
        for f in &files {
            spill.push(f).unwrap();
        }
        let texts = spill.finish().unwrap();
        let base = texts[0].as_ptr();
        let step_kib = (ResidentWindow::STEP / 1024) as u64;

        let mut window = ResidentWindow::new();
        let mut most = 0;
        for (t, want) in texts.iter().zip(&files) {
            assert_eq!(&**t, want.as_str());
            window.done_with(t);
            most = most.max(resident_kib_of_mapping_at(base));
        }
        // Reading shows up in the measure (it is not vacuous)...
        assert!(most >= 1024, "{most} KiB: the spill never looked resident");
        // ...and without the window all 48 MiB would be resident by now.
        assert!(
            most <= step_kib + 2 * 1024,
            "{most} KiB of the spill resident at once (step {step_kib} KiB)"
        );
        drop(window);
        assert_eq!(resident_kib_of_mapping_at(base), 0);
        // Handed back, not lost: every text still reads its own bytes.
        for (t, want) in texts.iter().zip(&files) {
            assert_eq!(&**t, want.as_str());
        }
    }
}
