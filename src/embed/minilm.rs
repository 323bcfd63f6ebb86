//! all-MiniLM-L6-v2 in-process on candle (CPU, f32).
//!
//! [`MiniLmModel`] is the synchronous model (tokenizer + BERT + pooling). [`MiniLm`] owns one on a dedicated
//! inference thread and implements [`Embedder`]: `embed` splits its input into batches of
//! [`MINILM_BATCH_SIZE`] (texts of similar length together, so little padding is computed), sends them to the
//! thread one at a time and awaits the answers, so the async runtime never runs inference, concurrent callers
//! interleave batch by batch, and at most one forward pass (which itself uses all cores) runs at a time.
//!
//! The queue to the thread is bounded ([`MINILM_QUEUE_BATCHES`]): a caller waits for room (back-pressure)
//! up to [`MINILM_QUEUE_WAIT`], then gets [`EmbedError::Busy`], so under more load than the model keeps up
//! with, work neither piles up without end nor makes every caller wait for all the work before it.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Duration;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config as BertConfig};
use rayon::prelude::*;
use tokenizers::{Encoding, Tokenizer, TruncationParams};
use tokio::sync::{mpsc, oneshot};

use super::{EmbedError, Embedder};

/// Model id recorded next to stored vectors.
pub const MINILM_MODEL_ID: &str = "all-MiniLM-L6-v2";
/// Longest input in word pieces, `[CLS]` and `[SEP]` included (the model's `max_seq_length`); the rest of a
/// longer text is cut off and does not influence its vector.
pub const MINILM_MAX_SEQ_LEN: usize = 256;
/// Texts per forward pass.
pub const MINILM_BATCH_SIZE: usize = 32;
/// Batches waiting for the inference thread at most (about 3 s of work at full batches on 2 cores).
pub const MINILM_QUEUE_BATCHES: usize = 64;
/// Longest a caller waits for room in the queue before it is told the embedder is busy.
pub const MINILM_QUEUE_WAIT: Duration = Duration::from_secs(5);

const CONFIG_FILE: &str = "config.json";
const TOKENIZER_FILE: &str = "tokenizer.json";
const WEIGHTS_FILE: &str = "model.safetensors";

fn inference(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Inference(e.to_string())
}

/// Sets `RAYON_NUM_THREADS`, when unset, to the number of physical cores: the thread count candle
/// would use anyway. candle looks its thread count up on every matrix multiplication and, without
/// the variable, computes it by reading and parsing `/proc/cpuinfo`: about 40 times per forward
/// pass of MiniLM, 11% of the process's CPU samples in a perf profile of searches and pages
/// (bench/history/2026-12.md, "What the profile showed, and what changed").
///
/// # Safety
/// It sets an environment variable: call it before the process starts any other thread.
pub unsafe fn settle_thread_count() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let cores = num_cpus::get_physical().max(1);
        // SAFETY: the caller guarantees that no other thread runs yet.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", cores.to_string()) };
    }
}

/// The synchronous model: tokenizer, BERT encoder, mean pooling, L2 normalisation.
pub struct MiniLmModel {
    model: BertModel,
    tokenizer: Tokenizer,
    /// Fills the padded positions of a pass (masked out, so its value changes nothing).
    pad_id: u32,
    device: Device,
    dims: usize,
}

impl MiniLmModel {
    /// Loads `config.json`, `tokenizer.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        if !dir.is_dir() {
            return Err(EmbedError::ModelFiles {
                path: dir.to_path_buf(),
            });
        }
        let file = |name: &str| -> Result<PathBuf, EmbedError> {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(EmbedError::ModelFiles { path })
            }
        };
        let (config_path, tokenizer_path, weights_path) = (
            file(CONFIG_FILE)?,
            file(TOKENIZER_FILE)?,
            file(WEIGHTS_FILE)?,
        );
        let load_err = |path: &Path, e: &dyn std::fmt::Display| EmbedError::ModelLoad {
            path: path.to_path_buf(),
            message: e.to_string(),
        };

        let config: BertConfig = std::fs::read_to_string(&config_path)
            .map_err(|e| load_err(&config_path, &e))
            .and_then(|s| serde_json::from_str(&s).map_err(|e| load_err(&config_path, &e)))?;

        let mut tokenizer =
            Tokenizer::from_file(&tokenizer_path).map_err(|e| load_err(&tokenizer_path, &e))?;
        // tokenizer.json pads every input to a fixed 128 and truncates at 128; we truncate at the
        // model's max_seq_length, as sentence-transformers does, and pad each pass ourselves to its
        // longest text (`forward_encoded`), after grouping texts of similar length.
        let pad_id = tokenizer.get_padding().map_or(0, |p| p.pad_id);
        tokenizer.with_padding(None);
        let truncation = TruncationParams {
            max_length: MINILM_MAX_SEQ_LEN.min(config.max_position_embeddings),
            ..tokenizer.get_truncation().cloned().unwrap_or_default()
        };
        tokenizer
            .with_truncation(Some(truncation))
            .map_err(|e| load_err(&tokenizer_path, &e))?;

        let device = Device::Cpu;
        let weights = std::fs::read(&weights_path).map_err(|e| load_err(&weights_path, &e))?;
        let tensors = candle_core::safetensors::load_buffer(&weights, &device)
            .and_then(with_linear_weights_transposed)
            .map_err(|e| load_err(&weights_path, &e))?;
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
        let model = BertModel::load(vb, &config).map_err(|e| load_err(&weights_path, &e))?;
        Ok(Self {
            model,
            tokenizer,
            pad_id,
            device,
            dims: config.hidden_size,
        })
    }

    /// Vector length (384 for all-MiniLM-L6-v2).
    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Embeds `texts` in ONE forward pass (padded to the longest). Blocking and CPU-heavy: never
    /// call it on an async runtime thread.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.encode(texts)?;
        let all: Vec<&Encoding> = encodings.iter().collect();
        self.forward_encoded(&all).map_err(inference)
    }

    /// Embeds `texts` as [`Self::embed_batch`] would, with less work: the texts are tokenized
    /// once, ordered by their number of word pieces and cut into groups of similar length
    /// ([`length_groups`]), one forward pass each, the passes run side by side on candle's
    /// thread pool. A pass pads every text to its longest, and a text's vector does not depend
    /// on the others of its pass (the padding is masked out), so grouping only saves the padded
    /// positions' work; and side by side, the passes' element-wise operations (softmax, GELU,
    /// layer norm, which candle runs on one thread) use every core, not just the products.
    /// Blocking and CPU-heavy: never call it on an async runtime thread.
    pub fn embed_texts(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings = self.encode(texts)?;
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let lengths: Vec<usize> = order.iter().map(|&i| encodings[i].len()).collect();
        let groups = length_groups(&lengths, rayon::current_num_threads());
        let passes: Vec<candle_core::Result<Vec<Vec<f32>>>> = groups
            .par_iter()
            .map(|range| {
                let group: Vec<&Encoding> = order[range.clone()]
                    .iter()
                    .map(|&i| &encodings[i])
                    .collect();
                self.forward_encoded(&group)
            })
            .collect();
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for (range, pass) in groups.iter().zip(passes) {
            for (&i, v) in order[range.clone()].iter().zip(pass.map_err(inference)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn encode(&self, texts: &[&str]) -> Result<Vec<Encoding>, EmbedError> {
        self.tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(inference)
    }

    /// One forward pass over `encodings`, each padded to the longest of them.
    fn forward_encoded(&self, encodings: &[&Encoding]) -> candle_core::Result<Vec<Vec<f32>>> {
        let n = encodings.len();
        let seq = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(n * seq);
        let mut type_ids = Vec::with_capacity(n * seq);
        let mut mask = Vec::with_capacity(n * seq);
        for e in encodings {
            let pad = seq - e.len();
            ids.extend(
                e.get_ids()
                    .iter()
                    .copied()
                    .chain(std::iter::repeat_n(self.pad_id, pad)),
            );
            type_ids.extend(
                e.get_type_ids()
                    .iter()
                    .copied()
                    .chain(std::iter::repeat_n(0, pad)),
            );
            mask.extend(
                e.get_attention_mask()
                    .iter()
                    .copied()
                    .chain(std::iter::repeat_n(0, pad)),
            );
        }
        let ids = Tensor::from_vec(ids, (n, seq), &self.device)?;
        let type_ids = Tensor::from_vec(type_ids, (n, seq), &self.device)?;
        let mask = Tensor::from_vec(mask, (n, seq), &self.device)?;
        let hidden = self.model.forward(&ids, &type_ids, Some(&mask))?; // (n, seq, dims)
        // Mean over the real tokens only (every input has at least [CLS] and [SEP]).
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (n, seq, 1)
        let summed = hidden.broadcast_mul(&mask)?.sum(1)?; // (n, dims)
        let mean = summed.broadcast_div(&mask.sum(1)?)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        mean.broadcast_div(&norm)?.to_vec2::<f32>()
    }
}

/// Cuts texts ordered by length (`lengths`, in word pieces, ascending) into consecutive groups,
/// one forward pass each: at least one per thread when there are as many texts, so every core
/// has a pass of its own, and more while the padding saved outweighs a pass's fixed cost.
fn length_groups(lengths: &[usize], threads: usize) -> Vec<std::ops::Range<usize>> {
    let n = lengths.len();
    let parts = threads.max(1).min(n.max(1));
    // Equal shares of the padded work (positions a pass computes), found from the end: the
    // longest texts cost the most per text.
    let (mut groups, mut end) = (Vec::with_capacity(parts), n);
    for part in (1..=parts).rev() {
        if end == 0 {
            break;
        }
        let left: usize = lengths[..end].iter().sum();
        let share = left / part;
        let mut start = end;
        let mut cost = 0;
        while start > part - 1 && cost < share {
            start -= 1;
            cost += lengths[end - 1];
        }
        let start = if part == 1 { 0 } else { start };
        groups.push(start..end);
        end = start;
    }
    groups.reverse();
    groups
}

/// The model's tensors, with each linear layer's weight (`out × in`) stored transposed in memory,
/// column by column, under the same shape. A linear layer computes `x · Wᵀ`, and candle hands `Wᵀ`
/// to gemm, which reads a column-major operand where it lies but first copies ("packs") a row-major
/// one, the whole matrix, on every product. For a query's few tokens that copy was a third of a
/// forward pass; without it a query embeds about a fifth faster (bench/history/2026-12.md, "MiniLM: the
/// weights where gemm reads them"). The values, and so the vectors, are the same.
fn with_linear_weights_transposed(
    tensors: HashMap<String, Tensor>,
) -> candle_core::Result<HashMap<String, Tensor>> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            // The embedding tables are 2-D as well, but they are read a row (a token) at a time.
            let linear = t.rank() == 2 && name.ends_with(".weight") && !name.contains("embeddings");
            let t = if linear {
                t.to_dtype(DType::F32)?.t()?.contiguous()?.t()?
            } else {
                t
            };
            Ok((name, t))
        })
        .collect()
}

struct Job {
    texts: Vec<String>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, EmbedError>>,
}

/// `first` and the jobs already waiting behind it, as long as their texts fit in one batch of
/// [`MINILM_BATCH_SIZE`]; the job that did not fit is returned for the next round. A forward pass
/// on a few short texts costs little more than on one (it is bound by reading the weights), so
/// concurrent searches embed their queries together instead of queueing one pass each.
fn gather(first: Job, queue: &mut mpsc::Receiver<Job>) -> (Vec<Job>, Option<Job>) {
    let mut size = first.texts.len();
    let mut jobs = vec![first];
    while size < MINILM_BATCH_SIZE {
        match queue.try_recv() {
            Ok(job) if size + job.texts.len() <= MINILM_BATCH_SIZE => {
                size += job.texts.len();
                jobs.push(job);
            }
            Ok(job) => return (jobs, Some(job)),
            Err(_) => break,
        }
    }
    (jobs, None)
}

/// One forward pass for the texts of all `jobs`; each job gets its own vectors back. When a
/// gathered pass fails, each job runs again alone, so that one job's failure is only its own.
fn run_jobs(model: &MiniLmModel, jobs: Vec<Job>) {
    // A caller that went away (request cancelled) needs no vectors.
    let jobs: Vec<Job> = jobs.into_iter().filter(|j| !j.reply.is_closed()).collect();
    let texts: Vec<&str> = jobs
        .iter()
        .flat_map(|j| j.texts.iter().map(String::as_str))
        .collect();
    match forward(model, &texts) {
        Ok(vectors) => {
            let mut vectors = vectors.into_iter();
            for job in jobs {
                let mine: Vec<Vec<f32>> = vectors.by_ref().take(job.texts.len()).collect();
                let _ = job.reply.send(Ok(mine));
            }
        }
        Err(e) if jobs.len() == 1 => {
            let _ = jobs.into_iter().next().map(|j| j.reply.send(Err(e)));
        }
        Err(_) => {
            for job in jobs {
                let texts: Vec<&str> = job.texts.iter().map(String::as_str).collect();
                let _ = job.reply.send(forward(model, &texts));
            }
        }
    }
}

/// [`MiniLmModel::embed_texts`], with a panic turned into an error.
fn forward(model: &MiniLmModel, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
    catch_unwind(AssertUnwindSafe(|| model.embed_texts(texts))).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(EmbedError::Inference(format!("model panicked: {what}")))
    })
}

/// all-MiniLM-L6-v2 behind a dedicated inference thread; see the module docs.
pub struct MiniLm {
    jobs: mpsc::Sender<Job>,
    dims: usize,
    wait: Duration,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").field("dims", &self.dims).finish()
    }
}

impl MiniLm {
    /// Loads the model from `dir` (blocking, ~0.1 s) and starts the inference thread, which stops when the
    /// `MiniLm` is dropped.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::from_model(MiniLmModel::load(dir)?)
    }

    /// Starts the inference thread for an already loaded model.
    pub fn from_model(model: MiniLmModel) -> Result<Self, EmbedError> {
        Self::with_queue(model, MINILM_QUEUE_BATCHES, MINILM_QUEUE_WAIT)
    }

    /// As [`Self::from_model`], with a queue of `batches` and callers waiting up to `wait` for room.
    pub fn with_queue(
        model: MiniLmModel,
        batches: usize,
        wait: Duration,
    ) -> Result<Self, EmbedError> {
        let dims = model.dims();
        let (jobs, mut queue) = mpsc::channel::<Job>(batches.max(1));
        std::thread::Builder::new()
            .name("honcho-embed".into())
            .spawn(move || {
                let mut carried: Option<Job> = None;
                while let Some(first) = carried.take().or_else(|| queue.blocking_recv()) {
                    let (jobs, next) = gather(first, &mut queue);
                    carried = next;
                    run_jobs(&model, jobs);
                }
            })
            .map_err(|e| {
                EmbedError::Inference(format!("cannot start the inference thread: {e}"))
            })?;
        Ok(Self { jobs, dims, wait })
    }

    async fn run_batch(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (reply, answer) = oneshot::channel();
        match self
            .jobs
            .send_timeout(Job { texts, reply }, self.wait)
            .await
        {
            Ok(()) => {}
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                return Err(EmbedError::Busy {
                    queued: self.jobs.max_capacity() - self.jobs.capacity(),
                    waited_ms: self.wait.as_millis() as u64,
                });
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => {
                return Err(EmbedError::WorkerStopped);
            }
        }
        answer.await.map_err(|_| EmbedError::WorkerStopped)?
    }
}

#[async_trait::async_trait]
impl Embedder for MiniLm {
    fn dims(&self) -> usize {
        self.dims
    }

    fn model_id(&self) -> &str {
        MINILM_MODEL_ID
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Similar lengths in one batch waste less work on padding; characters are a good enough proxy for
        // word pieces, and anything beyond ~4 KB is truncated anyway.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len().min(4096));
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(MINILM_BATCH_SIZE) {
            let batch = chunk.iter().map(|&i| texts[i].clone()).collect();
            let vectors = self.run_batch(batch).await?;
            if vectors.len() != chunk.len() {
                return Err(EmbedError::Inference("model returned a short batch".into()));
            }
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::embed_non_blank;
    use std::sync::{Arc, OnceLock};
    use std::time::Instant;

    /// `HONCHO_MODEL_DIR`, else `<crate>/.data/models/all-MiniLM-L6-v2` (filled by `make setup`).
    fn model_dir() -> PathBuf {
        std::env::var_os("HONCHO_MODEL_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join(crate::embed::DEFAULT_MODEL_SUBDIR)
            })
    }

    fn embedder() -> &'static MiniLm {
        static MODEL: OnceLock<MiniLm> = OnceLock::new();
        MODEL.get_or_init(|| MiniLm::load(&model_dir()).unwrap_or_else(|e| panic!("{e}")))
    }

    fn strings(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|t| t.to_string()).collect()
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    fn norm(a: &[f32]) -> f32 {
        a.iter().map(|x| x * x).sum::<f32>().sqrt()
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    fn job(n: usize) -> Job {
        let (reply, _answer) = oneshot::channel();
        Job {
            texts: vec!["x".to_owned(); n],
            reply,
        }
    }

    #[test]
    fn waiting_jobs_are_gathered_into_one_batch_up_to_its_size() {
        let (send, mut queue) = mpsc::channel(8);
        for n in [2, 20, 15, 5] {
            send.try_send(job(n)).unwrap();
        }
        let (jobs, carried) = gather(job(1), &mut queue);
        let sizes: Vec<usize> = jobs.iter().map(|j| j.texts.len()).collect();
        assert_eq!(sizes, [1, 2, 20], "15 more would pass the batch size of 32");
        let carried = carried.expect("the job that did not fit is kept");
        let (jobs, carried) = gather(carried, &mut queue);
        let sizes: Vec<usize> = jobs.iter().map(|j| j.texts.len()).collect();
        assert_eq!(sizes, [15, 5], "an empty queue ends the gathering");
        assert!(carried.is_none());
    }

    #[tokio::test]
    async fn concurrent_queries_get_the_vectors_they_get_alone() {
        let e = embedder();
        let texts = [
            "What does Alice like to drink?",
            "tea",
            "A much longer question about where Bob went on holiday last summer with his family",
            "zebra",
        ];
        let mut alone = Vec::new();
        for t in texts {
            alone.push(e.embed(&strings(&[t])).await.unwrap().remove(0));
        }
        for _ in 0..3 {
            let together = futures::future::join_all(
                texts
                    .iter()
                    .map(|t| async move { e.embed(&strings(&[t])).await }),
            )
            .await;
            for (v, a) in together.into_iter().zip(&alone) {
                let v = v.unwrap().remove(0);
                assert!(max_diff(&v, a) < 1e-4, "diff {}", max_diff(&v, a));
            }
        }
    }

    #[tokio::test]
    async fn vectors_have_384_unit_length_dimensions() {
        let e = embedder();
        assert_eq!(e.dims(), 384);
        assert_eq!(e.model_id(), "all-MiniLM-L6-v2");
        let v = e
            .embed(&strings(&[
                "Hello, world!",
                "A second, somewhat longer sentence.",
            ]))
            .await
            .unwrap();
        assert_eq!(v.len(), 2);
        for x in &v {
            assert_eq!(x.len(), 384);
            assert!((norm(x) - 1.0).abs() < 1e-4, "norm {}", norm(x));
            assert!(x.iter().all(|f| f.is_finite()));
        }
        assert!(e.embed(&[]).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn similar_meaning_scores_higher_than_unrelated() {
        let v = embedder()
            .embed(&strings(&[
                "My favorite color is blue",
                "What colors do you like?",
                "The quarterly tax filing deadline is in April.",
            ]))
            .await
            .unwrap();
        let related = cosine(&v[0], &v[1]);
        let unrelated = cosine(&v[0], &v[2]);
        eprintln!("cosine related = {related:.4}, unrelated = {unrelated:.4}");
        assert!(related > 0.55, "related cosine {related}");
        assert!(unrelated < 0.2, "unrelated cosine {unrelated}");
    }

    #[tokio::test]
    async fn batch_equals_one_by_one() {
        // 40 texts of varied length: two batches, padding inside each.
        let mut texts = strings(&[
            "My favorite color is blue",
            "What colors do you like?",
            "",
            "Short.",
            "A considerably longer sentence that goes on for a while, mentioning trains, \
             mountains, coffee and the way the light falls in the late afternoon.",
        ]);
        for i in 0..35 {
            texts.push(format!("Message number {i} says: {}", "la ".repeat(i % 9)));
        }
        let e = embedder();
        let batched = e.embed(&texts).await.unwrap();
        assert_eq!(batched.len(), texts.len());
        for (text, b) in texts.iter().zip(&batched) {
            let single = e.embed(std::slice::from_ref(text)).await.unwrap();
            let d = max_diff(&single[0], b);
            assert!(d < 1e-4, "{text:?}: batched differs by {d}");
        }
    }

    /// Chat turns as `createMessages` embeds them: the turn before (up to 200 characters), then
    /// the speaker and the turn, of 15-40 words, so lengths vary within a batch.
    fn chat_turns(n: usize) -> Vec<String> {
        const WORDS: &[&str] = &[
            "the",
            "pottery",
            "class",
            "was",
            "really",
            "fun",
            "and",
            "I",
            "made",
            "a",
            "bowl",
            "for",
            "my",
            "mother",
            "last",
            "weekend",
            "we",
            "went",
            "hiking",
            "near",
            "lake",
            "did",
            "you",
            "see",
            "photos",
            "from",
            "our",
            "trip",
            "to",
            "mountains",
            "coffee",
            "garden",
            "recipe",
            "dinner",
            "sister",
            "kids",
            "adopted",
            "puppy",
            "yesterday",
        ];
        let turn = |i: usize| {
            let words = 15 + (i * 7) % 26;
            (0..words)
                .map(|w| WORDS[(i * 31 + w * 17 + w * w) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let speakers = ["caroline", "melanie"];
        (0..n)
            .map(|i| {
                let before = (i > 0).then(|| (speakers[(i - 1) % 2], turn(i - 1)));
                let before: Vec<(&str, &str)> =
                    before.iter().map(|(p, c)| (*p, c.as_str())).collect();
                crate::embed::message_text(&before, speakers[i % 2], &turn(i))
            })
            .collect()
    }

    #[test]
    fn length_groups_cover_every_text_once_in_at_most_one_group_per_thread() {
        let lengths: Vec<usize> = (0..27).map(|i| 20 + i * 3).collect();
        for threads in [1, 2, 3, 8, 64] {
            let groups = length_groups(&lengths, threads);
            assert!(!groups.is_empty() && groups.len() <= threads.min(lengths.len()));
            assert_eq!(groups[0].start, 0);
            assert_eq!(groups.last().unwrap().end, lengths.len());
            for pair in groups.windows(2) {
                assert_eq!(pair[0].end, pair[1].start, "{groups:?}");
            }
            assert!(groups.iter().all(|g| !g.is_empty()), "{groups:?}");
        }
        let one = length_groups(&[5], 2);
        assert_eq!((one.len(), one[0].clone()), (1, 0..1));
        assert_eq!(length_groups(&[5, 9], 2), [0..1, 1..2]);
        assert!(length_groups(&[], 2).iter().all(|g| g.is_empty()));
    }

    #[test]
    fn grouped_passes_give_every_chat_turn_the_vector_it_gets_alone() {
        let model = MiniLmModel::load(&model_dir()).unwrap();
        let texts = chat_turns(30);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let grouped = model.embed_texts(&refs).unwrap();
        let one_pass = model.embed_batch(&refs).unwrap();
        assert_eq!(grouped.len(), texts.len());
        for ((text, g), p) in refs.iter().zip(&grouped).zip(&one_pass) {
            let alone = model.embed_batch(&[text]).unwrap().remove(0);
            let cos = cosine(g, &alone);
            assert!(cos >= 0.9999, "{text:?}: cosine {cos} to its vector alone");
            assert!(max_diff(g, &alone) < 1e-4, "{text:?}");
            assert!(cosine(p, &alone) >= 0.9999, "{text:?}: one padded pass");
        }
    }

    /// Where a batch of chat turns' time goes, printed, not asserted:
    /// `cargo test --release --lib embed::minilm::tests::chat_turn_profile -- --ignored --nocapture`.
    /// Word pieces per text, the padding a single pass computes, and the time of one padded pass
    /// against length groups one after another and side by side.
    #[test]
    #[ignore]
    fn chat_turn_profile() {
        let model = MiniLmModel::load(&model_dir()).unwrap();
        let texts = chat_turns(25);
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = model.encode(&refs).unwrap();
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let lengths: Vec<usize> = order.iter().map(|&i| encodings[i].len()).collect();
        let real: usize = lengths.iter().sum();
        let padded = lengths.len() * lengths.last().unwrap();
        eprintln!(
            "{} texts, word pieces {}..{} (mean {:.0}); one pass computes {padded} positions for \
             {real} real ({:.0}% padding)",
            lengths.len(),
            lengths[0],
            lengths.last().unwrap(),
            real as f64 / lengths.len() as f64,
            100.0 * (padded - real) as f64 / padded as f64
        );
        let time = |label: &str, f: &dyn Fn()| {
            f();
            let rounds = 8;
            let (t, c) = (Instant::now(), cpu_ms());
            for _ in 0..rounds {
                f();
            }
            let wall = t.elapsed().as_secs_f64() * 1e3 / rounds as f64;
            let cpu = c
                .zip(cpu_ms())
                .map_or(0.0, |(a, b)| (b - a) / rounds as f64);
            eprintln!(
                "{label}: {wall:.0} ms per batch [cpu {cpu:.0} ms], {:.0} texts/s",
                lengths.len() as f64 * 1e3 / wall
            );
        };
        let group = |range: std::ops::Range<usize>| -> Vec<&Encoding> {
            order[range].iter().map(|&i| &encodings[i]).collect()
        };
        time("one padded pass", &|| {
            model.forward_encoded(&group(0..order.len())).unwrap();
        });
        for parts in [2, 3, 4, 6] {
            let groups = length_groups(&lengths, parts);
            time(&format!("{parts} groups one after another"), &|| {
                for g in &groups {
                    model.forward_encoded(&group(g.clone())).unwrap();
                }
            });
            time(&format!("{parts} groups side by side"), &|| {
                groups.par_iter().for_each(|g| {
                    model.forward_encoded(&group(g.clone())).unwrap();
                });
            });
        }
    }

    #[test]
    fn linear_weights_are_stored_column_major_and_embedding_tables_row_major() {
        let weights = std::fs::read(model_dir().join(WEIGHTS_FILE)).unwrap();
        let tensors = candle_core::safetensors::load_buffer(&weights, &Device::Cpu).unwrap();
        let tensors = with_linear_weights_transposed(tensors).unwrap();
        let query = &tensors["encoder.layer.0.attention.self.query.weight"];
        assert_eq!(query.dims(), [384, 384], "the shape is the stored one");
        assert!(query.t().unwrap().is_contiguous(), "Wᵀ lies row by row");
        let intermediate = &tensors["encoder.layer.5.intermediate.dense.weight"];
        assert_eq!(intermediate.dims(), [1536, 384]);
        assert!(intermediate.t().unwrap().is_contiguous());
        assert!(tensors["embeddings.word_embeddings.weight"].is_contiguous());
        assert!(tensors["encoder.layer.0.attention.self.query.bias"].is_contiguous());
    }

    #[test]
    fn transposed_weights_give_the_vectors_of_the_weights_as_stored() {
        let ours = MiniLmModel::load(&model_dir()).unwrap();
        let config: BertConfig =
            serde_json::from_str(&std::fs::read_to_string(model_dir().join(CONFIG_FILE)).unwrap())
                .unwrap();
        let weights = std::fs::read(model_dir().join(WEIGHTS_FILE)).unwrap();
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu).unwrap();
        let as_stored = MiniLmModel {
            model: BertModel::load(vb, &config).unwrap(),
            tokenizer: ours.tokenizer.clone(),
            pad_id: ours.pad_id,
            device: Device::Cpu,
            dims: ours.dims,
        };
        let texts = [
            "blue",
            "What did Alice say about the trip to the mountains?",
            "A considerably longer sentence that goes on for a while, mentioning trains, \
             mountains, coffee and the way the light falls in the late afternoon.",
        ];
        // One text alone (a query) and all together (an ingest batch, with padding).
        for batch in [&texts[1..2], &texts[..]] {
            let got = ours.embed_batch(batch).unwrap();
            let want = as_stored.embed_batch(batch).unwrap();
            for ((g, w), text) in got.iter().zip(&want).zip(batch) {
                let d = max_diff(g, w);
                assert!(d < 1e-5, "{text:?} differs by {d}");
            }
        }
    }

    #[tokio::test]
    async fn text_beyond_256_word_pieces_is_truncated() {
        let head = "the weather today is mild ".repeat(60); // ~300 word pieces
        let v = embedder()
            .embed(&[
                format!("{head} and cats are lovely"),
                format!("{head} quantum chromodynamics explains the strong force"),
            ])
            .await
            .unwrap();
        assert!(
            max_diff(&v[0], &v[1]) < 1e-5,
            "tail beyond 256 tokens changed the vector"
        );
        assert!((norm(&v[0]) - 1.0).abs() < 1e-4);
    }

    #[tokio::test]
    async fn blank_texts_get_a_fixed_unit_vector_or_are_skipped() {
        let e = embedder();
        let v = e.embed(&strings(&["", "   \n\t"])).await.unwrap();
        assert!((norm(&v[0]) - 1.0).abs() < 1e-4);
        assert!(max_diff(&v[0], &v[1]) < 1e-5);

        let texts = strings(&["", "blue", "  ", "red"]);
        let some = embed_non_blank(e, &texts).await.unwrap();
        assert!(some[0].is_none() && some[2].is_none());
        let direct = e.embed(&strings(&["blue", "red"])).await.unwrap();
        assert!(max_diff(some[1].as_ref().unwrap(), &direct[0]) < 1e-4);
        assert!(max_diff(some[3].as_ref().unwrap(), &direct[1]) < 1e-4);
    }

    #[tokio::test]
    async fn a_full_queue_makes_callers_wait_then_answers_busy() {
        // One batch of room and callers that wait 20 ms for it, against 8 callers of full
        // batches (each pass takes far longer than 20 ms).
        let model = MiniLmModel::load(&model_dir()).unwrap();
        let e = Arc::new(MiniLm::with_queue(model, 1, Duration::from_millis(20)).unwrap());
        let long = "word ".repeat(60);
        let mut handles = Vec::new();
        for _ in 0..8 {
            let (e, texts) = (e.clone(), vec![long.clone(); MINILM_BATCH_SIZE]);
            handles.push(tokio::spawn(async move { e.embed(&texts).await }));
        }
        let (mut done, mut busy) = (0, 0);
        for h in handles {
            match h.await.unwrap() {
                Ok(v) => {
                    assert_eq!(v.len(), MINILM_BATCH_SIZE);
                    done += 1;
                }
                Err(EmbedError::Busy { queued, waited_ms }) => {
                    assert_eq!((queued, waited_ms), (1, 20));
                    busy += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(done >= 2 && busy >= 1, "{done} embedded, {busy} busy");
        // Once the queue drains the embedder serves again.
        assert_eq!(e.embed(&["after".into()]).await.unwrap().len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_callers_get_their_own_answers() {
        let e: Arc<dyn Embedder> = Arc::new(MiniLm::load(&model_dir()).unwrap());
        let sets: Vec<Vec<String>> = (0..6)
            .map(|t| {
                (0..(t * 7 + 1))
                    .map(|i| format!("task {t} text {i}"))
                    .collect()
            })
            .collect();
        let mut handles = Vec::new();
        for set in sets.clone() {
            let e = e.clone();
            handles.push(tokio::spawn(async move { e.embed(&set).await.unwrap() }));
        }
        for (set, h) in sets.iter().zip(handles) {
            let got = h.await.unwrap();
            let want = e.embed(set).await.unwrap();
            assert_eq!(got.len(), set.len());
            for (g, w) in got.iter().zip(&want) {
                assert!(max_diff(g, w) < 1e-4);
            }
        }
    }

    #[test]
    fn incomplete_model_dir_names_the_missing_file() {
        let dir = std::env::temp_dir().join(format!("honcho-embed-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(model_dir().join(CONFIG_FILE), dir.join(CONFIG_FILE)).unwrap();
        std::fs::copy(model_dir().join(TOKENIZER_FILE), dir.join(TOKENIZER_FILE)).unwrap();
        let err = MiniLm::load(&dir).expect_err("must fail without weights");
        std::fs::remove_dir_all(&dir).unwrap();
        match &err {
            EmbedError::ModelFiles { path } => assert!(path.ends_with(WEIGHTS_FILE)),
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("make setup"));
    }

    /// CPU time of this process so far (Linux; clock ticks assumed at 100 Hz), to report figures that
    /// mean something on a busy machine too.
    fn cpu_ms() -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
        let utime: f64 = fields.next()?.parse().ok()?;
        let stime: f64 = fields.next()?.parse().ok()?;
        Some((utime + stime) * 10.0)
    }

    /// Timing figures, not assertions: `cargo test --lib embed::minilm -- --ignored --nocapture`.
    /// Wall time, and CPU time over all threads in brackets.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore]
    async fn timings() {
        let measure = |t: Instant, cpu: Option<f64>, n: u32| {
            let wall = t.elapsed().as_secs_f64() * 1e3 / n as f64;
            let cpu = cpu.zip(cpu_ms()).map_or(String::from("?"), |(a, b)| {
                format!("{:.1}", (b - a) / n as f64)
            });
            format!("{wall:.1} ms [cpu {cpu} ms]")
        };
        let (t, c) = (Instant::now(), cpu_ms());
        let e = MiniLm::load(&model_dir()).unwrap();
        let load = measure(t, c, 1);
        let sentence = "My favorite color is blue and I like to walk by the sea in the evening.";
        e.embed(&strings(&[sentence])).await.unwrap(); // warm-up
        let rounds = 50;
        let (t, c) = (Instant::now(), cpu_ms());
        for i in 0..rounds {
            e.embed(&[format!("{sentence} {i}")]).await.unwrap();
        }
        let single = measure(t, c, rounds);
        let batch: Vec<String> = (0..32 * 8).map(|i| format!("{sentence} {i}")).collect();
        let (t, c) = (Instant::now(), cpu_ms());
        e.embed(&batch).await.unwrap();
        let per = measure(t, c, batch.len() as u32);
        eprintln!(
            "MiniLM: load {load}; single sentence {single}; per sentence in batches of 32 {per} \
             ({} threads)",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
    }
}
