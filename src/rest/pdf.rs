//! The text of an uploaded PDF, read safely from a file anyone may send.
//!
//! pdf-extract (on lopdf) does the reading; this module bounds it, because neither crate was
//! written for hostile input: lopdf inflates every stream it needs with no cap (a 10 MB upload of
//! deflate can be 10 GB once inflated), pdf-extract panics on many malformed files, and a crafted
//! page can keep it busy for long. So, in order:
//!
//! - the bytes are scanned before lopdf sees them: every stream is decoded with a cap by each
//!   decoder lopdf would apply (deflate, LZW, ASCII85, and chains of them), and a file whose
//!   streams decode to more than [`MAX_DECODED_BYTES`] in all is refused; encrypted files are
//!   refused too, since lopdf decrypts and inflates them past any scan of the bytes;
//! - as lopdf loads the file, a filter measures each stream through its own filter chain, with
//!   the same cap, before lopdf decodes any;
//! - nested form XObjects and each page's chain of parents are checked to stay within
//!   [`MAX_FORM_DEPTH`] levels, because pdf-extract follows both by recursion (a form drawing
//!   itself would overflow the stack, which aborts the process instead of panicking);
//! - the reading runs on the blocking pool, at most [`CONCURRENT_READS`] at once, inside
//!   `catch_unwind`, and stops at [`READ_TIMEOUT`]: the output callbacks check the deadline, and
//!   the request is answered at the deadline even if the crate is stuck in a call that makes none
//!   (that thread then keeps its slot until it returns, so stuck reads cannot pile up);
//! - the text is capped at the characters an upload may hold, checked as it is written.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::rc::Rc;
use std::time::{Duration, Instant};

use pdf_extract::{
    ColorSpace, ConvertToFmt, Dictionary, Document, LoadOptions, MediaBox, Object, ObjectId,
    OutputDev, OutputError, Path, PlainTextOutput, Transform,
};
use tokio::sync::Semaphore;

/// How long one PDF may take to read, waiting for a slot included.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// PDFs read at once; each may hold its upload and up to [`MAX_DECODED_BYTES`] besides.
pub const CONCURRENT_READS: usize = 2;
/// The most a PDF's streams may decode to, all of them together.
pub const MAX_DECODED_BYTES: usize = 64 << 20;
/// The deepest nesting of form XObjects read, and the longest chain of a page's parents.
pub const MAX_FORM_DEPTH: usize = 16;
/// The stages of a filter chain the scan of the bytes follows; a further stage that still
/// decodes much is refused.
const MAX_FILTER_CHAIN: usize = 4;

static READS: Semaphore = Semaphore::const_new(CONCURRENT_READS);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PdfError {
    #[error("the file is not a PDF that can be read: {0}")]
    Unreadable(String),
    #[error("encrypted PDFs are not read: upload the document without a password")]
    Encrypted,
    #[error("the PDF has no text to extract (a scanned document needs OCR first)")]
    NoText,
    #[error("the PDF's streams decode to more than {MAX_DECODED_BYTES} bytes")]
    Expands,
    #[error("the PDF nests forms or pages deeper than {MAX_FORM_DEPTH} levels")]
    TooDeep,
    #[error("the PDF's text is longer than {0} characters")]
    TooLong(usize),
    #[error("reading the PDF took longer than {} seconds", READ_TIMEOUT.as_secs())]
    TimedOut,
    #[error("the PDF reader failed on this file")]
    ReaderFailed,
    #[error("{CONCURRENT_READS} PDFs are being read already: try again")]
    Busy,
}

/// The text of `bytes`, page by page as `[Page N]` followed by the page's text, pages without
/// text left out, at most `max_chars` characters.
pub async fn text(bytes: Vec<u8>, max_chars: usize) -> Result<String, PdfError> {
    bounded(READ_TIMEOUT, move |deadline| {
        read(&bytes, deadline, max_chars)
    })
    .await
}

/// Runs `work` on the blocking pool with a slot, a deadline and its panics caught.
async fn bounded<T: Send + 'static>(
    timeout: Duration,
    work: impl FnOnce(Instant) -> Result<T, PdfError> + Send + 'static,
) -> Result<T, PdfError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let slot = tokio::time::timeout_at(deadline, READS.acquire())
        .await
        .map_err(|_| PdfError::Busy)?
        .expect("the semaphore is never closed");
    let task = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        catch_unwind(AssertUnwindSafe(|| work(deadline.into_std())))
    });
    match tokio::time::timeout_at(deadline, task).await {
        Err(_) => Err(PdfError::TimedOut),
        Ok(Ok(Ok(done))) => done,
        Ok(Ok(Err(_))) | Ok(Err(_)) => Err(PdfError::ReaderFailed),
    }
}

fn read(bytes: &[u8], deadline: Instant, max_chars: usize) -> Result<String, PdfError> {
    let names = Names::of(bytes);
    if names.encrypt {
        return Err(PdfError::Encrypted);
    }
    let mut budget = Budget {
        left: MAX_DECODED_BYTES,
        deadline,
        lzw: names.lzw,
        ascii85: names.ascii85,
    };
    for start in stream_starts(bytes) {
        budget.take(&bytes[start..], 0)?;
    }
    LOADED_LEFT.set(MAX_DECODED_BYTES);
    let options = LoadOptions {
        filter: Some(within_budget),
        ..LoadOptions::default()
    };
    let doc = Document::load_mem_with_options(bytes, options)
        .map_err(|e| PdfError::Unreadable(e.to_string()))?;
    if LOADED_LEFT.get() == OVER {
        return Err(PdfError::Expands);
    }
    if doc.get_pages().is_empty() {
        return Err(PdfError::Unreadable("it has no pages".into()));
    }
    parents_within_depth(&doc)?;
    forms_within_depth(&doc, deadline)?;
    let pages = Rc::new(RefCell::new(Written {
        pages: Vec::new(),
        chars: 0,
        max_chars,
        over: false,
    }));
    let mut out = Watched {
        text: PlainTextOutput::new(Sink(pages.clone())),
        pages: pages.clone(),
        deadline,
        late: false,
    };
    let done = pdf_extract::output_doc(&doc, &mut out);
    if out.late {
        return Err(PdfError::TimedOut);
    }
    if pages.borrow().over {
        return Err(PdfError::TooLong(max_chars));
    }
    done.map_err(|e| PdfError::Unreadable(format!("{e:?}")))?;
    let text = pages
        .borrow()
        .pages
        .iter()
        .enumerate()
        .filter(|(_, page)| !page.trim().is_empty())
        .map(|(i, page)| format!("[Page {}]\n{}", i + 1, page.trim()))
        .collect::<Vec<_>>()
        .join("\n\n");
    if text.is_empty() {
        return Err(PdfError::NoText);
    }
    Ok(text)
}

thread_local! {
    /// What the streams lopdf loads may still decode to, for [`within_budget`] (a plain `fn`).
    /// lopdf loads on the calling thread (its `rayon` feature is off: pdf-extract turns its
    /// default features off, and nothing else asks for lopdf).
    static LOADED_LEFT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}
const OVER: usize = usize::MAX;

/// lopdf's load filter, run on each object before any stream is decoded: a stream's decoded
/// size is measured through its own filter chain, each stage with a cap, and a stream past the
/// budget is emptied (and the file refused). This is exact where the scan of the bytes guesses;
/// the scan remains for the cross-reference stream, which lopdf decodes before any filter runs.
fn within_budget(id: ObjectId, object: &mut Object) -> Option<(ObjectId, Object)> {
    let Object::Stream(stream) = object else {
        // Objects inside an object stream are kept as this returns them; never a stream.
        return Some((id, object.clone()));
    };
    let left = LOADED_LEFT.get();
    if left != OVER {
        match decoded_len(stream, left) {
            Some(n) if n <= left => LOADED_LEFT.set(left - n),
            _ => {
                LOADED_LEFT.set(OVER);
                stream.content.clear();
            }
        }
    } else {
        stream.content.clear();
    }
    // For a top-level object lopdf keeps `object` and drops what this returns.
    Some((id, Object::Null))
}

/// The size of `stream` decoded as lopdf decodes it, or `None` past `cap` at some stage.
fn decoded_len(stream: &pdf_extract::Stream, cap: usize) -> Option<usize> {
    let Ok(filters) = stream.filters() else {
        return Some(stream.content.len());
    };
    let early_change = stream
        .dict
        .get(b"DecodeParms")
        .and_then(Object::as_dict)
        .and_then(|p| p.get(b"EarlyChange"))
        .and_then(Object::as_i64)
        .map_or(true, |v| v != 0);
    let mut data = std::borrow::Cow::Borrowed(stream.content.as_slice());
    for filter in filters {
        let out = match filter {
            b"FlateDecode" => {
                let out = inflate(flate2::read::ZlibDecoder::new(&*data), cap + 1);
                if out.is_empty() && data.len() > 2 {
                    inflate(flate2::read::DeflateDecoder::new(&data[2..]), cap + 1)
                } else {
                    out
                }
            }
            b"LZWDecode" => lzw(&data, early_change, cap + 1),
            b"ASCII85Decode" => ascii85(&data, cap + 1),
            // lopdf stops here and the data stays as it is.
            _ => break,
        };
        if out.len() > cap {
            return None;
        }
        data = std::borrow::Cow::Owned(out);
    }
    Some(data.len())
}

/// Which of the names that change how the file is read it holds, `#xx` escapes decoded.
#[derive(Default)]
struct Names {
    encrypt: bool,
    lzw: bool,
    ascii85: bool,
}

impl Names {
    fn of(bytes: &[u8]) -> Names {
        let mut names = Names::default();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'/' {
                i += 1;
                continue;
            }
            i += 1;
            let mut name = Vec::new();
            while i < bytes.len() && regular(bytes[i]) {
                if bytes[i] == b'#'
                    && let Some(b) = bytes
                        .get(i + 1..i + 3)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    name.push(b);
                    i += 3;
                    continue;
                }
                name.push(bytes[i]);
                i += 1;
            }
            match name.as_slice() {
                b"Encrypt" => names.encrypt = true,
                b"LZWDecode" => names.lzw = true,
                b"ASCII85Decode" => names.ascii85 = true,
                _ => {}
            }
        }
        names
    }
}

/// A byte that may be part of a name (PDF 32000-1, 7.2.2: not white-space, not a delimiter).
fn regular(b: u8) -> bool {
    !matches!(
        b,
        b'\0'
            | b'\t'
            | b'\n'
            | b'\x0c'
            | b'\r'
            | b' '
            | b'('
            | b')'
            | b'<'
            | b'>'
            | b'['
            | b']'
            | b'{'
            | b'}'
            | b'/'
            | b'%'
    )
}

/// Where the data of each `stream` keyword would start, wherever it is: the scan does not trust
/// `/Length`, the dictionaries or the cross-reference table, which lopdf may read otherwise.
fn stream_starts(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .windows(6)
        .enumerate()
        .filter(move |&(i, w)| w == b"stream" && !(i >= 3 && &bytes[i - 3..i] == b"end"))
        .map(move |(i, _)| {
            let mut start = i + 6;
            while start < bytes.len() && matches!(bytes[start], b'\r' | b'\n' | b' ') {
                start += 1;
            }
            start
        })
}

/// A decoder of the scan: the input and the most to yield, and what it yields.
type Decoder<'a> = &'a dyn Fn(&[u8], usize) -> Vec<u8>;

/// What is left to decode, and the decoders worth trying.
struct Budget {
    left: usize,
    deadline: Instant,
    lzw: bool,
    ascii85: bool,
}

impl Budget {
    /// Takes what `data` decodes to through any chain of lopdf's decoders. Every decoder's output
    /// is taken (not only the one lopdf would pick), so the outputs alive at once, one per stage
    /// followed, stay within the budget too.
    fn take(&mut self, data: &[u8], depth: usize) -> Result<(), PdfError> {
        let (lzw_on, a85_on) = (self.lzw, self.ascii85);
        let decoders: [Decoder; 5] = [
            &|d, cap| inflate(flate2::read::ZlibDecoder::new(d), cap),
            &|d, cap| match d.get(2..) {
                Some(rest) => inflate(flate2::read::DeflateDecoder::new(rest), cap),
                None => Vec::new(),
            },
            &|d, cap| {
                if lzw_on {
                    lzw(d, true, cap)
                } else {
                    Vec::new()
                }
            },
            &|d, cap| {
                if lzw_on {
                    lzw(d, false, cap)
                } else {
                    Vec::new()
                }
            },
            &|d, cap| if a85_on { ascii85(d, cap) } else { Vec::new() },
        ];
        for decode in decoders {
            if Instant::now() > self.deadline {
                return Err(PdfError::TimedOut);
            }
            let out = decode(data, self.left.saturating_add(1));
            if out.len() > self.left {
                return Err(PdfError::Expands);
            }
            if depth == MAX_FILTER_CHAIN {
                // Past the chains followed, a stage that still yields much is taken for a bomb:
                // what garbage decodes to is a few hundred bytes.
                if out.len() > 64 << 10 {
                    return Err(PdfError::Expands);
                }
                continue;
            }
            self.left -= out.len();
            if !out.is_empty() {
                self.take(&out, depth + 1)?;
            }
        }
        Ok(())
    }
}

/// What a deflate reader yields before it ends, fails or passes `cap` bytes.
fn inflate(reader: impl Read, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = reader.take(cap as u64).read_to_end(&mut out);
    out
}

/// What LZW yields (as lopdf decodes it) before it ends, fails or passes `cap` bytes.
fn lzw(data: &[u8], early_change: bool, cap: usize) -> Vec<u8> {
    use weezl::{BitOrder, decode::Decoder};
    let mut decoder = if early_change {
        Decoder::with_tiff_size_switch(BitOrder::Msb, 8)
    } else {
        Decoder::new(BitOrder::Msb, 8)
    };
    let mut out = Capped(Vec::new(), cap);
    let _ = decoder.into_stream(&mut out).decode_all(data);
    out.0
}

/// A writer that fails once it holds `.1` bytes.
struct Capped(Vec<u8>, usize);

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.1 - self.0.len();
        if room == 0 {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        let n = buf.len().min(room);
        self.0.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What ASCII85 yields before its end marker, a byte outside it, or `cap` bytes. Only `z`
/// expands (one byte to four).
fn ascii85(data: &[u8], cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut group, mut count) = (0u64, 0);
    for &b in data {
        if out.len() >= cap {
            break;
        }
        match b {
            b'z' if count == 0 => out.extend_from_slice(&[0; 4]),
            b'!'..=b'u' => {
                group = group * 85 + u64::from(b - b'!');
                count += 1;
                if count == 5 {
                    out.extend_from_slice(&(group as u32).to_be_bytes());
                    (group, count) = (0, 0);
                }
            }
            b if b.is_ascii_whitespace() => {}
            _ => break,
        }
    }
    out
}

/// Fails when a page's chain of `/Parent`s is longer than [`MAX_FORM_DEPTH`] or loops:
/// pdf-extract follows it by recursion for what a page inherits (its box, its resources), and
/// lopdf's page tree, walked from the root, does not see where a page's own `/Parent` leads.
fn parents_within_depth(doc: &Document) -> Result<(), PdfError> {
    for page in doc.get_pages().into_values() {
        let mut node = doc.get_dictionary(page).ok();
        let mut left = MAX_FORM_DEPTH;
        while let Some(dict) = node {
            let Ok(parent) = dict.get(b"Parent").and_then(Object::as_reference) else {
                break;
            };
            if left == 0 {
                return Err(PdfError::TooDeep);
            }
            left -= 1;
            node = doc.get_dictionary(parent).ok();
        }
    }
    Ok(())
}

/// Fails when form XObjects nest deeper than [`MAX_FORM_DEPTH`] from some page, counting a form
/// without resources of its own as seeing its caller's (as pdf-extract reads it).
fn forms_within_depth(doc: &Document, deadline: Instant) -> Result<(), PdfError> {
    // A form that fitted within some depth fits within more: reached again with at least that
    // much left it is skipped, so a form shared by many pages is walked a few times, not once
    // per path.
    let mut checked: std::collections::HashMap<(ObjectId, usize), usize> = Default::default();
    for page in doc.get_pages().into_values() {
        let Ok((own, inherited)) = doc.get_page_resources(page) else {
            continue;
        };
        let inherited = inherited
            .into_iter()
            .filter_map(|id| doc.get_dictionary(id).ok());
        for resources in own.into_iter().chain(inherited) {
            descend(doc, resources, MAX_FORM_DEPTH, deadline, &mut checked)?;
        }
    }
    Ok(())
}

fn descend(
    doc: &Document,
    resources: &Dictionary,
    left: usize,
    deadline: Instant,
    checked: &mut std::collections::HashMap<(ObjectId, usize), usize>,
) -> Result<(), PdfError> {
    if Instant::now() > deadline {
        return Err(PdfError::TimedOut);
    }
    let Ok(xobjects) = doc.get_dict_in_dict(resources, b"XObject") else {
        return Ok(());
    };
    for (_, xobject) in xobjects.iter() {
        let Ok(id) = xobject.as_reference() else {
            continue;
        };
        let Ok(form) = doc.get_object(id).and_then(Object::as_stream) else {
            continue;
        };
        if form.dict.get(b"Subtype").and_then(Object::as_name).ok() != Some(b"Form") {
            continue;
        }
        if left == 0 {
            return Err(PdfError::TooDeep);
        }
        let inner = doc
            .get_dict_in_dict(&form.dict, b"Resources")
            .unwrap_or(resources);
        let key = (id, inner as *const Dictionary as usize);
        if checked.get(&key).is_some_and(|&done| done <= left) {
            continue;
        }
        // Marked once done only: a form on its own path is followed again, until no depth is left.
        descend(doc, inner, left - 1, deadline, checked)?;
        checked.insert(key, left);
    }
    Ok(())
}

/// The text written so far, one string per page.
struct Written {
    pages: Vec<String>,
    chars: usize,
    max_chars: usize,
    over: bool,
}

/// pdf-extract's plain-text writer, writing into the current page.
struct Sink(Rc<RefCell<Written>>);

impl std::fmt::Write for Sink {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut written = self.0.borrow_mut();
        written.chars += s.chars().count();
        if written.chars > written.max_chars {
            written.over = true;
            return Err(std::fmt::Error);
        }
        if written.pages.is_empty() {
            written.pages.push(String::new());
        }
        written.pages.last_mut().expect("one page").push_str(s);
        Ok(())
    }
}

impl ConvertToFmt for Sink {
    type Writer = Sink;
    fn convert(self) -> Sink {
        self
    }
}

/// The plain-text writer with a page break at each page and the deadline checked at each call.
struct Watched {
    text: PlainTextOutput<Sink>,
    pages: Rc<RefCell<Written>>,
    deadline: Instant,
    late: bool,
}

impl Watched {
    fn on_time(&mut self) -> Result<(), OutputError> {
        if Instant::now() > self.deadline {
            self.late = true;
            return Err(OutputError::IoError(std::io::ErrorKind::TimedOut.into()));
        }
        Ok(())
    }
}

impl OutputDev for Watched {
    fn begin_page(
        &mut self,
        page_num: u32,
        media_box: &MediaBox,
        art_box: Option<(f64, f64, f64, f64)>,
    ) -> Result<(), OutputError> {
        self.on_time()?;
        self.pages.borrow_mut().pages.push(String::new());
        self.text.begin_page(page_num, media_box, art_box)
    }

    fn end_page(&mut self) -> Result<(), OutputError> {
        self.on_time()?;
        self.text.end_page()
    }

    fn output_character(
        &mut self,
        trm: &Transform,
        width: f64,
        spacing: f64,
        font_size: f64,
        char: &str,
    ) -> Result<(), OutputError> {
        self.on_time()?;
        self.text
            .output_character(trm, width, spacing, font_size, char)
    }

    fn begin_word(&mut self) -> Result<(), OutputError> {
        self.on_time()?;
        self.text.begin_word()
    }

    fn end_word(&mut self) -> Result<(), OutputError> {
        self.on_time()?;
        self.text.end_word()
    }

    fn end_line(&mut self) -> Result<(), OutputError> {
        self.on_time()?;
        self.text.end_line()
    }

    fn stroke(
        &mut self,
        _: &Transform,
        _: &ColorSpace,
        _: &[f64],
        _: &Path,
    ) -> Result<(), OutputError> {
        self.on_time()
    }

    fn fill(
        &mut self,
        _: &Transform,
        _: &ColorSpace,
        _: &[f64],
        _: &Path,
    ) -> Result<(), OutputError> {
        self.on_time()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_the_reader_is_an_error_not_a_crash() {
        let r: Result<(), _> = bounded(Duration::from_secs(5), |_| panic!("crafted")).await;
        assert_eq!(r, Err(PdfError::ReaderFailed));
    }

    #[tokio::test]
    async fn a_read_past_the_deadline_is_answered_at_the_deadline() {
        let started = Instant::now();
        let r: Result<(), _> = bounded(Duration::from_millis(200), |_| {
            std::thread::sleep(Duration::from_secs(2));
            Ok(())
        })
        .await;
        assert_eq!(r, Err(PdfError::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_deflate_bomb_is_refused_before_lopdf_inflates_it() {
        let mut deflated = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..(MAX_DECODED_BYTES >> 20) + 1 {
            deflated.write_all(&zeros).unwrap();
        }
        let data = deflated.finish().unwrap();
        let mut pdf = b"%PDF-1.4\n1 0 obj <</Length 0>>\nstream\n".to_vec();
        pdf.extend_from_slice(&data);
        pdf.extend_from_slice(b"\nendstream\nendobj\n");
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(read(&pdf, far, 1000), Err(PdfError::Expands));
    }

    /// A PDF of these objects (numbered from 1, the first the catalog), with its xref table.
    fn pdf_of(objects: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"%PDF-1.4\n".to_vec();
        let mut offsets = Vec::new();
        for (i, object) in objects.iter().enumerate() {
            offsets.push(out.len());
            out.extend_from_slice(format!("{} 0 obj\n", i + 1).as_bytes());
            out.extend_from_slice(object);
            out.extend_from_slice(b"\nendobj\n");
        }
        let xref = out.len();
        let n = objects.len() + 1;
        out.extend_from_slice(format!("xref\n0 {n}\n0000000000 65535 f \n").as_bytes());
        for offset in offsets {
            out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
        }
        let trailer = format!("trailer\n<< /Size {n} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n");
        out.extend_from_slice(trailer.as_bytes());
        out
    }

    fn stream(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut out = format!("<< {dict} /Length {} >>\nstream\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\nendstream");
        out
    }

    fn one_page(resources: &str, contents: Vec<u8>, more: Vec<Vec<u8>>) -> Vec<u8> {
        let mut objects = vec![
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] \
                 /Resources << {resources} >> /Contents 4 0 R >>"
            )
            .into_bytes(),
            contents,
        ];
        objects.extend(more);
        pdf_of(&objects)
    }

    #[test]
    fn a_deflated_page_is_read_through_the_load_filter() {
        let mut deflated = flate2::write::ZlibEncoder::new(Vec::new(), Default::default());
        deflated
            .write_all(b"BT /F1 12 Tf 72 720 Td (Deflated words) Tj ET")
            .unwrap();
        let font = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>".to_vec();
        let pdf = one_page(
            "/Font << /F1 5 0 R >>",
            stream("/Filter /FlateDecode", &deflated.finish().unwrap()),
            vec![font],
        );
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(
            read(&pdf, far, 1000),
            Ok("[Page 1]\nDeflated words".to_owned())
        );
    }

    #[test]
    fn a_form_that_draws_itself_is_refused_not_followed() {
        let form = stream(
            "/Type /XObject /Subtype /Form /BBox [0 0 10 10] /Resources << /XObject << /X 5 0 R >> >>",
            b"/X Do",
        );
        let pdf = one_page("/XObject << /X 5 0 R >>", stream("", b"/X Do"), vec![form]);
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(read(&pdf, far, 1000), Err(PdfError::TooDeep));
    }

    #[test]
    fn a_page_that_is_its_own_parent_is_refused_not_followed() {
        let pdf = pdf_of(&[
            b"<< /Type /Catalog /Pages 2 0 R >>".to_vec(),
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_vec(),
            b"<< /Type /Page /Parent 3 0 R /Contents 4 0 R >>".to_vec(),
            stream("", b""),
        ]);
        let far = Instant::now() + Duration::from_secs(30);
        assert_eq!(read(&pdf, far, 1000), Err(PdfError::TooDeep));
    }

    #[test]
    fn a_name_spelled_with_escapes_is_still_recognised() {
        assert!(Names::of(b"trailer <</Encr#79pt 5 0 R>>").encrypt);
        assert!(!Names::of(b"<</Encrypted true>>").encrypt);
        assert!(Names::of(b"/Filter [/ASCII85Decode /FlateDecode]").ascii85);
    }

    #[test]
    fn ascii85_decodes_as_lopdf_does() {
        assert_eq!(ascii85(b"87cURD]i,\"Ebo80~>", 100), b"Hello World!");
        assert_eq!(ascii85(b"zz", 100), vec![0; 8]);
    }
}
