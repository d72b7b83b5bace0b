//! Fetching a batch's pages: through the page cache (misses read in one
//! volume batch) or straight from the volume, every page checked as it
//! comes off the volume.

use std::sync::Arc;

use solidgraph_io::{Pages, Volume};

use crate::adjacency::{EdgeFormat, SKIP};
use crate::cache::{IMAGE_MAX_PAGES, Image, PageCache, PageRef, Resident};
use crate::error::Result;
use crate::page::{self, Kind};

/// Pages fetched for one read, in the order asked.
pub(crate) enum Fetched {
    /// Shared with the page cache: entries of `page_size` bytes, an extent
    /// page's followed by its checkpoints (`Block::skips`).
    Cached { refs: Vec<PageRef>, page_size: usize },
    /// In the buffers of one volume read; `at[k]`: the slot of page k.
    Direct { got: Pages, at: Vec<u32> },
    /// In a direction's image, or for pages not filled yet, in the buffers
    /// of one volume read: `at[k]` is page k's image slot, or `VOLUME` | its
    /// slot in `got`.
    Image { img: Arc<Image>, at: Vec<u32>, got: Option<Pages> },
}

/// Marks a page of `Fetched::Image` read from the volume.
const VOLUME: u32 = IMAGE_MAX_PAGES as u32;

impl Fetched {
    /// The k-th page asked for.
    pub fn page(&self, k: usize) -> &[u8] {
        match self {
            Fetched::Cached { refs, page_size } => &refs[k][..*page_size],
            Fetched::Direct { got, at } => got.page(at[k] as usize),
            Fetched::Image { img, at, got } => match (at[k] & VOLUME, got) {
                (0, _) => img.page(at[k]),
                (_, Some(got)) => got.page((at[k] & !VOLUME) as usize),
                (_, None) => unreachable!("a page read from the volume without the read"),
            },
        }
    }

    /// The checkpoints kept with the k-th page (empty when none).
    pub fn skips(&self, k: usize) -> &[u8] {
        match self {
            Fetched::Cached { refs, page_size } => &refs[k][*page_size..],
            Fetched::Direct { .. } | Fetched::Image { .. } => &[],
        }
    }
}

/// Where pages come from: a store's volume and its page cache.
#[derive(Clone, Copy)]
pub(crate) struct Fetcher<'a> {
    pub vol: &'a Volume,
    pub cache: &'a PageCache,
}

impl Fetcher<'_> {
    pub fn page_size(&self) -> usize {
        self.vol.page_size()
    }

    /// `pages` through the cache when `cached`, else straight from the
    /// volume. Pages of a direction's image come from it where filled; the
    /// others are read straight from the volume and offered to the image.
    pub fn fetch(&self, fmt: EdgeFormat, pages: &[u64], cached: bool) -> Result<Fetched> {
        if !cached {
            return self.direct(pages);
        }
        match self.cache.resident(pages) {
            Resident::In(img, at) => self.through_image(img, at, pages),
            Resident::No => self.cached(fmt, pages),
        }
    }

    /// `pages`, at slots `at` of `img`: the filled ones there, the rest in
    /// one volume read. The image is credited with the distinct pages it
    /// served before it is offered the pages read, so a batch whose pages
    /// are half filled may fill the rest.
    fn through_image(&self, img: Arc<Image>, mut at: Vec<u32>, pages: &[u64]) -> Result<Fetched> {
        // Each page's state is looked at once: another thread may fill it
        // meanwhile.
        let (mut missing, mut served) = (Vec::new(), Vec::with_capacity(at.len()));
        for (k, &slot) in at.iter().enumerate() {
            if img.filled(slot) {
                served.push(slot);
            } else {
                missing.push(k);
            }
        }
        served.sort_unstable();
        served.dedup();
        self.cache.served(&img, served.len());
        if missing.is_empty() {
            return Ok(Fetched::Image { img, at, got: None });
        }
        let want: Vec<u64> = missing.iter().map(|&k| pages[k]).collect();
        let Fetched::Direct { got, at: read_at } = self.direct(&want)? else { unreachable!("direct reads are Direct") };
        let slots: Vec<u32> = missing.iter().map(|&k| at[k]).collect();
        self.cache.fill(&img, &slots, |j| got.page(read_at[j] as usize));
        for (&k, &r) in missing.iter().zip(&read_at) {
            at[k] = VOLUME | r;
        }
        Ok(Fetched::Image { img, at, got: Some(got) })
    }

    /// Fetches pages through the cache; misses are read in one batch and
    /// their checksums verified. An extent page of more than `SKIP` edges is
    /// kept with its checkpoints (`Block::skips`, a small share of the
    /// page), so that sampling a hub's page, again and again while it is
    /// cached, decodes a few dozen ids per draw instead of the page.
    pub fn cached(&self, fmt: EdgeFormat, pages: &[u64]) -> Result<Fetched> {
        let keep = self.cache.budget() > 0;
        let (mut tail, mut scratch) = (Vec::new(), Vec::new());
        self.cache
            .get_many(pages, |missing| {
                let got = self.vol.read(missing)?;
                let mut out = Vec::with_capacity(missing.len());
                for (i, &p) in missing.iter().enumerate() {
                    let pg = got.page(i);
                    let h = page::open(p, pg)?;
                    tail.clear();
                    if keep && h.kind == Kind::Extent && h.count as usize > SKIP {
                        // A block that does not parse is reported by its reader.
                        let _ = fmt.extent_block(pg, &h).and_then(|b| b.skips(&mut scratch, &mut tail));
                    }
                    out.push(entry(pg, &tail));
                }
                Ok(out)
            })
            .map(|refs| Fetched::Cached { refs, page_size: self.page_size() })
    }

    /// Reads pages bypassing the cache, into the volume's own buffers (a
    /// scan's pages are not copied: per-page copies would double a batch's
    /// memory and fragment the heap); duplicates are read once.
    pub fn direct(&self, pages: &[u64]) -> Result<Fetched> {
        let mut distinct = pages.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let got = self.vol.read(&distinct)?;
        for (i, &p) in distinct.iter().enumerate() {
            page::open(p, got.page(i))?;
        }
        let at = pages.iter().map(|p| distinct.binary_search(p).expect("read above") as u32).collect();
        Ok(Fetched::Direct { got, at })
    }
}

/// A page cache entry: the page, then `tail`, copied once.
fn entry(pg: &[u8], tail: &[u8]) -> Arc<[u8]> {
    let mut e = Arc::<[u8]>::new_uninit_slice(pg.len() + tail.len());
    let dst = Arc::get_mut(&mut e).expect("a new Arc is unique");
    dst[..pg.len()].write_copy_of_slice(pg);
    dst[pg.len()..].write_copy_of_slice(tail);
    // SAFETY: both parts were written just above.
    unsafe { e.assume_init() }
}
